"""The functional paths against torch: scaled_dot_product_attention and tiled_attention."""

import math

import pytest
import torch
import torch.nn.functional as F

from attention import causal_mask, scaled_dot_product_attention, tiled_attention

from .helpers import NEAR_RANGE, assert_close, near_range, random_mask, torch_lower_right

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


# --- tiled_attention -----------------------------------------------------------------------

# Block sizes that divide S and that do not (the last block is short), one key per block, and
# one block larger than the whole sequence.
TILED_CASES = [
    (12, 12, 4),
    (12, 12, 5),
    (12, 12, 1),
    (7, 13, 4),
    (7, 13, 13),
    (13, 7, 3),
    (13, 7, 64),
    (1, 10, 3),
]


def _reference(q, k, v, causal, scale=None):
    """torch's SDPA; causal through torch's own lower-right CausalBias, materialised."""
    L, S = q.shape[-2], k.shape[-2]
    mask = torch_lower_right(L, S) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("L, S, block_size", TILED_CASES)
def test_tiled_attention_matches_the_reference(L, S, block_size, causal, dtype):
    q, k, v = _qkv((2, 3), L, S, 8, 6, dtype)
    out = tiled_attention(q, k, v, causal=causal, block_size=block_size)
    assert out.shape == (2, 3, L, 6)
    assert_close(out, _reference(q, k, v, causal))
    mask = causal_mask(L, S) if causal else None
    assert_close(out, scaled_dot_product_attention(q, k, v, mask)[0])


def test_tiled_attention_with_a_scale_and_broadcast_batches():
    q = torch.randn(2, 3, 9, 4, dtype=torch.float64)
    k = torch.randn(1, 3, 11, 4, dtype=torch.float64)
    v = torch.randn(2, 1, 11, 5, dtype=torch.float64)
    out = tiled_attention(q, k, v, scale=0.7, block_size=4)
    assert_close(out, _reference(q, k, v, False, scale=0.7))


def test_tiled_causal_rows_before_every_key_are_zero():
    # L > S, bottom-right aligned: the first L - S queries have no key at all.
    L, S = 9, 4
    q, k, v = _qkv((2,), L, S, 8, 8, torch.float64)
    out = tiled_attention(q, k, v, causal=True, block_size=3)
    assert torch.equal(out[:, : L - S], torch.zeros(2, L - S, 8, dtype=torch.float64))
    assert out[:, L - S :].abs().amin(dim=-1).gt(0).all()


def test_tiled_attention_survives_scores_far_beyond_exp_range():
    # The online softmax subtracts the running maximum: scores of ~1e4 must not overflow.
    q, k, v = _qkv((2,), 8, 20, 4, 4, torch.float64)
    q = q * 1e4
    out = tiled_attention(q, k, v, block_size=3)
    assert out.isfinite().all()
    assert_close(out, _reference(q, k, v, False))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"block_size": 0}, ValueError, r"block_size must be at least 1; got 0"),
        ({"block_size": 2.0}, TypeError, r"block_size must be an int; got float"),
        ({"block_size": True}, TypeError, r"block_size must be an int; got bool"),
        ({"causal": 1}, TypeError, r"causal must be a bool; got int"),
        ({"scale": -1.0}, ValueError, r"scale must be a positive finite number; got -1.0"),
        ({"scale": "1"}, TypeError, r"scale must be a positive finite number; got str"),
    ],
)
def test_tiled_attention_rejects_bad_options(kwargs, error, match):
    q = torch.randn(2, 3, 4)
    with pytest.raises(error, match=match):
        tiled_attention(q, q, q, **kwargs)


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


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("L, S", [(3, 0), (0, 4), (0, 0)])
def test_tiled_attention_on_empty_inputs_gives_the_reference_gradients(L, S, causal):
    # With S = 0 the output used to have no grad_fn, so backward raised.
    q = torch.randn(2, L, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, S, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, S, 3, dtype=torch.float64, requires_grad=True)
    out = tiled_attention(q, k, v, causal=causal)
    mask = causal_mask(L, S) if causal else None
    reference = scaled_dot_product_attention(q, k, v, mask)[0]
    assert torch.equal(out, reference) and out.shape == (2, L, 3)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    expected = torch.autograd.grad(reference.sum(), (q, k, v))
    for got, want in zip(grads, expected, strict=True):
        assert torch.equal(got, want) and not got.any()
