"""The kernel against torch: scaled_dot_product_attention (masks, bias, shared key/value heads)
and the block step that the tiled and distributed paths share."""

import math

import pytest
import torch
import torch.nn.functional as F

from attention import causal_mask, scaled_dot_product_attention, tiled_attention
from attention.functional import attention_block, attention_block_backward, merge_blocks

from .helpers import NEAR_RANGE, assert_close, near_range, random_mask

# (batch shape, L, S, D, Dv): no batch, one and two batch dims, L != S both ways, Dv != D.
SHAPES = [
    ((), 5, 5, 4, 4),
    ((3,), 4, 7, 8, 8),
    ((2, 3), 6, 3, 4, 5),
    ((2, 2), 1, 9, 16, 2),
]
SHAPE_IDS = ["2d", "3d-L<S", "4d-L>S-Dv", "4d-L=1"]

# Mask shapes that broadcast to (*batch, L, S): none, one (L, S) for all, one row of keys
# broadcast over queries, and a mask as large as the scores.
MASK_KINDS = ["none", "LS", "keys", "full"]


def _mask(kind, batch, L, S):
    if kind == "none":
        return None
    shape = {"LS": (L, S), "keys": (*batch, 1, S), "full": (*batch, L, S)}[kind]
    return random_mask(*shape)


def _qkv(batch, L, S, D, Dv, dtype):
    return (
        torch.randn(*batch, L, D, dtype=dtype),
        torch.randn(*batch, S, D, dtype=dtype),
        torch.randn(*batch, S, Dv, dtype=dtype),
    )


@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_scaled_dot_product_attention_matches_torch(shape, mask_kind, scale, dtype):
    batch, L, S, D, Dv = shape
    q, k, v = _qkv(batch, L, S, D, Dv, dtype)
    mask = _mask(mask_kind, batch, L, S)  # random: some rows have no allowed key
    out, weights = scaled_dot_product_attention(q, k, v, mask, scale=scale)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    assert out.shape == (*batch, L, Dv) and weights.shape == (*batch, L, S)
    assert_close(out, expected)
    assert_close(out, weights @ v)  # the weights returned are the ones used


def test_scaled_dot_product_attention_weights_are_the_softmax_of_the_scaled_scores():
    q, k, v = _qkv((2,), 3, 4, 8, 8, torch.float64)
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    assert_close(weights, expected)


def test_scaled_dot_product_attention_dropout_zeroes_and_rescales_weights():
    q, k, v = _qkv((4,), 6, 6, 8, 8, torch.float64)
    _, clean = scaled_dot_product_attention(q, k, v)
    out, dropped = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    kept = dropped != 0
    assert 0 < kept.float().mean() < 1
    assert_close(dropped[kept], clean[kept] / 0.5)
    assert_close(out, dropped @ v)


# --- low precision near the format's range -------------------------------------------------

LOW = pytest.mark.parametrize("low", NEAR_RANGE, ids=["float16", "bfloat16"])


@LOW
def test_every_functional_path_agrees_near_the_range_of_the_format(low):
    # Computing (q @ k^T) * scale gave all NaN in float16: the product overflowed first.
    x = near_range(low)
    v = torch.randn(x.shape).to(low)
    reference = F.scaled_dot_product_attention(x.double(), x.double(), v.double())
    outputs = {
        "ours": scaled_dot_product_attention(x, x, v)[0],
        "tiled": tiled_attention(x, x, v, block_size=2),
        "torch": F.scaled_dot_product_attention(x, x, v),
    }
    for name, out in outputs.items():
        assert out.isfinite().all(), name
        # One rounding of v to the format (eps 2**-10 or 2**-7) and a few in the softmax sums.
        torch.testing.assert_close(out.double(), reference, atol=3e-2, rtol=3e-2, msg=name)


def test_scaled_scores_beyond_the_half_range_stay_finite_like_torch():
    # Every scaled score 100 * 100 * 64 / 8 = 80000 > 65504: formed in float16 they were inf and
    # the softmax NaN, while PyTorch's math path forms them in float32 and stays finite.
    q = torch.full((1, 4, 64), 100.0, dtype=torch.float16)
    v = torch.randn(1, 4, 64).half()
    expected = F.scaled_dot_product_attention(q.double(), q.double(), v.double())
    out, weights = scaled_dot_product_attention(q, q, v)
    assert out.dtype == weights.dtype == torch.float16
    assert F.scaled_dot_product_attention(q, q, v).isfinite().all()
    torch.testing.assert_close(out.double(), expected, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(weights.double(), torch.full((1, 4, 4), 0.25).double())


# --- shared key/value heads and an additive bias ---------------------------------------------


@pytest.mark.parametrize(
    "heads", [(4, 4), (4, 2), (6, 3), (4, 1)], ids=["mha", "gqa2", "gqa3", "mqa"]
)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "heads"])
def test_shared_key_value_heads_match_torch_enable_gqa(heads, mask_kind, dtype):
    H, H_kv = heads
    q = torch.randn(2, H, 5, 8, dtype=dtype)
    k, v = torch.randn(2, H_kv, 7, 8, dtype=dtype), torch.randn(2, H_kv, 7, 3, dtype=dtype)
    mask = {"none": None, "causal": causal_mask(5, 7), "heads": random_mask(2, H, 5, 7)}[mask_kind]
    out, weights = scaled_dot_product_attention(q, k, v, mask, enable_gqa=True)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert out.shape == (2, H, 5, 3) and weights.shape == (2, H, 5, 7)
    assert_close(out, expected)
    # Query head h reads key/value head h // G: the same as repeating each key/value head.
    G = H // H_kv
    repeated = [x.repeat_interleave(G, dim=1) for x in (k, v)]
    assert_close(weights, scaled_dot_product_attention(q, *repeated, mask)[1])


def test_an_additive_bias_is_added_to_the_scaled_scores(dtype):
    q, k, v = _qkv((2, 3), 4, 6, 8, 8, dtype)
    bias = torch.randn(3, 4, 6, dtype=dtype)
    mask = causal_mask(4, 6)
    out, _ = scaled_dot_product_attention(q, k, v, mask, bias=bias)
    float_mask = bias.masked_fill(~mask, float("-inf"))
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"enable_gqa": 1}, TypeError, r"enable_gqa must be a bool; got int"),
        ({"bias": torch.zeros(3, 4, 5)}, ValueError, r"bias of shape \(3, 4, 5\) does not"),
        (
            {"bias": torch.zeros(4, 6, dtype=torch.float64)},
            TypeError,
            r"bias must have the same dtype",
        ),
        (
            {"bias": torch.zeros(4, 6, dtype=torch.long)},
            TypeError,
            r"bias must be a floating-point",
        ),
    ],
)
def test_bad_bias_and_group_options_are_refused(kwargs, error, match):
    q, k = torch.randn(2, 4, 4, 8), torch.randn(2, 4, 6, 8)
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(q, k, k, **kwargs)


def test_key_heads_that_do_not_divide_the_query_heads_are_refused():
    q, k = torch.randn(1, 6, 3, 4), torch.randn(1, 4, 3, 4)
    with pytest.raises(ValueError, match=r"with enable_gqa=True, key and value must have the same"):
        scaled_dot_product_attention(q, k, k, enable_gqa=True)


# --- the block step ------------------------------------------------------------------------


def test_blocks_merged_in_any_order_give_attention_over_all_keys(dtype):
    q, k, v = _qkv((2,), 5, 12, 8, 3, dtype)
    mask = random_mask(5, 12)
    mask[0] = False  # a row that sees no key at all
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    out = torch.zeros(2, 5, 3, dtype=dtype)
    lse = torch.full((2, 5, 1), float("-inf"), dtype=dtype)
    for cols in (slice(8, 12), slice(0, 3), slice(3, 8)):
        block = attention_block(q, k[:, cols], v[:, cols], scale=8**-0.5, allowed=mask[:, cols])
        out, lse = merge_blocks(out, lse, *block)
    assert_close(out, expected)
    scores = (q @ k.transpose(-2, -1) / 8**0.5).masked_fill(~mask, float("-inf"))
    assert_close(lse, scores.logsumexp(-1, keepdim=True))
    assert torch.isneginf(lse[:, 0]).all() and not out[:, 0].any()


def test_the_block_backward_gives_the_gradients_of_attention(dtype):
    q, k, v = (x.requires_grad_() for x in _qkv((2,), 5, 9, 4, 3, dtype))
    mask = random_mask(5, 9)
    mask[2] = False
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    grad_out = torch.randn_like(out)
    expected = torch.autograd.grad(out, (q, k, v), grad_out)
    with torch.no_grad():
        _, lse = attention_block(q, k, v, scale=0.5, allowed=mask)
        delta = (grad_out * out).sum(-1, keepdim=True)
        got = attention_block_backward(grad_out, q, k, v, lse, delta, scale=0.5, allowed=mask)
    for g, e in zip(got, expected, strict=True):
        assert_close(g, e)
