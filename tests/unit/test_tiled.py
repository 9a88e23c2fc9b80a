"""tiled_attention against torch: forward and FlashAttention's backward, in float64, with every
shape of tile (ragged last blocks, S != L, Dv != D, rows with no key), and its memory."""

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

from attention import causal_mask, scaled_dot_product_attention, tiled_attention
from attention.tiled import tiles

from .helpers import assert_close, torch_lower_right


def _qkv(batch, L, S, D, Dv, dtype, requires_grad=False):
    return tuple(
        torch.randn(*batch, n, d, dtype=dtype).requires_grad_(requires_grad)
        for n, d in ((L, D), (S, D), (S, Dv))
    )


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


# --- the backward pass ---------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("L, S, block_size", TILED_CASES)
def test_tiled_gradients_equal_sdpas(L, S, block_size, causal, dtype):
    q, k, v = _qkv((2, 3), L, S, 8, 6, dtype, requires_grad=True)
    out = tiled_attention(q, k, v, causal=causal, block_size=block_size)
    expected = _reference(q, k, v, causal)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), grad)
    want = torch.autograd.grad(expected, (q, k, v), grad)
    for name, g, w in zip("qkv", got, want, strict=True):
        assert g.isfinite().all(), name
        assert_close(g, w)


def test_rows_with_no_key_get_zero_gradients_never_nan():
    L, S = 9, 4  # causal, bottom-right: the first 5 queries see no key
    q, k, v = _qkv((2,), L, S, 8, 8, torch.float64, requires_grad=True)
    out = tiled_attention(q, k, v, causal=True, block_size=3)
    out.sum().backward()
    assert not q.grad[:, : L - S].any() and q.grad.isfinite().all()
    reference = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    scaled_dot_product_attention(*reference, causal_mask(L, S))[0].sum().backward()
    for mine, theirs in zip((q, k, v), reference, strict=True):
        assert_close(mine.grad, theirs.grad)


def test_broadcast_inputs_get_the_sum_of_their_gradients():
    q = torch.randn(2, 3, 9, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 3, 11, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 1, 11, 5, dtype=torch.float64, requires_grad=True)
    out = tiled_attention(q, k, v, block_size=4)
    expected = F.scaled_dot_product_attention(q, k, v)
    grad = torch.randn_like(out)
    for g, w in zip(torch.autograd.grad(out, (q, k, v), grad),
                    torch.autograd.grad(expected, (q, k, v), grad), strict=True):  # fmt: skip
        assert g.shape == w.shape
        assert_close(g, w)


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_and_no_double_backward(causal):
    q, k, v = _qkv((1,), 5, 7, 3, 2, torch.float64, requires_grad=True)

    def f(q, k, v):
        return tiled_attention(q, k, v, causal=causal, block_size=3)

    assert gradcheck(f, (q, k, v))
    with pytest.raises(RuntimeError, match=r"tiled_attention has first derivatives only"):
        torch.autograd.grad(f(q, k, v).sum(), q, create_graph=True)


def test_the_forward_keeps_only_the_output_and_the_log_sum_exp():
    L, S, D = 64, 96, 8
    q, k, v = _qkv((2,), L, S, D, D, torch.float64, requires_grad=True)
    out = tiled_attention(q, k, v, causal=True, block_size=16)
    saved = out.grad_fn.saved_tensors
    sizes = sorted(t.numel() for t in saved)
    # q, k, v, the output and the log-sum-exp (2 x L): nothing of size L x S.
    assert sizes == sorted([2 * L * D, 2 * S * D, 2 * S * D, 2 * L * D, 2 * L])


def test_causal_tiles_above_the_diagonal_are_skipped_and_the_rest_trimmed():
    found = tiles(8, 8, 4, 4, q_pos=torch.arange(8), k_pos=torch.arange(8))
    assert [(r.start, r.stop, c.start, c.stop) for r, c, _ in found] == [
        (0, 4, 0, 4), (4, 8, 0, 4), (4, 8, 4, 8)
    ]  # fmt: skip
    masks = [allowed for _, _, allowed in found]
    assert masks[1] is None  # wholly below the diagonal: no mask needed
    assert torch.equal(masks[0], causal_mask(4))
    # Queries that see no key are trimmed from a tile: 3 queries after 8 keys, then 5 before.
    found = tiles(6, 4, 6, 4, q_pos=torch.arange(-2, 4), k_pos=torch.arange(4))
    assert [(r.start, r.stop) for r, _, _ in found] == [(2, 6)]


@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_tied_scores_near_the_range_keep_the_log_of_their_sum(low):
    # Every score 12800: in float16 numbers near 12800 are 8 apart, so a log-sum-exp kept in
    # float16 loses the log 2 of merging two equal blocks and weighs each block 1, not 1/2.
    q = torch.full((8, 64), 40.0, dtype=low)
    v = torch.randn(8, 4).to(low)
    expected = F.scaled_dot_product_attention(q.double(), q.double(), v.double())
    out = tiled_attention(q, q, v, block_size=4)
    assert out.dtype == low
    torch.testing.assert_close(out.double(), expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("block_size", [2, 4])
def test_scaled_scores_beyond_the_half_range_give_finite_outputs_and_gradients(block_size):
    # Scaled scores of 80000 overflowed float16 (largest 65504) when formed in it: output and
    # gradients were NaN. Formed in float32 they match float64 to float16's rounding.
    q = torch.full((1, 4, 64), 100.0, dtype=torch.float16, requires_grad=True)
    v = torch.randn(1, 4, 64).half().requires_grad_()
    grad_out = torch.randn(1, 4, 64).half()
    out = tiled_attention(q, q, v, block_size=block_size)
    grads = torch.autograd.grad(out, (q, v), grad_out)
    q64, v64 = (x.detach().double().requires_grad_() for x in (q, v))
    expected = F.scaled_dot_product_attention(q64, q64, v64)
    expected_grads = torch.autograd.grad(expected, (q64, v64), grad_out.double())
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.double(), expected, atol=2e-3, rtol=2e-3)
    for grad, reference in zip(grads, expected_grads, strict=True):
        assert grad.dtype == torch.float16
        torch.testing.assert_close(grad.double(), reference, atol=2e-2, rtol=2e-2)
