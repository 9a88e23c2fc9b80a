"""Mask builders and the converters between this package's polarity and nn.MultiheadAttention's."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention import MultiHeadAttention, causal_mask, padding_mask
from attention.masks import from_torch_masks, to_torch_attn_mask, to_torch_key_padding_mask

from .helpers import assert_close, randn, random_mask, torch_causal_blocked, torch_lower_right

# --- causal_mask ---------------------------------------------------------------------------


@pytest.mark.parametrize("L", [0, 1, 2, 5])
def test_causal_mask_is_lower_triangular(L):
    mask = causal_mask(L)
    assert mask.dtype == torch.bool and mask.shape == (L, L)
    expected = torch.tensor([[j <= i for j in range(L)] for i in range(L)], dtype=torch.bool)
    assert torch.equal(mask, expected.reshape(L, L))


@pytest.mark.parametrize("L, S", [(2, 5), (3, 4), (4, 4), (5, 3), (4, 1), (1, 4), (0, 3), (3, 0)])
def test_causal_mask_is_bottom_right_aligned_like_torch(L, S):
    assert torch.equal(causal_mask(L, S), torch_lower_right(L, S))


def test_causal_mask_rows_with_no_key_when_more_queries_than_keys():
    mask = causal_mask(5, 3)  # the first two queries come before every key
    assert not mask[:2].any()
    assert mask[2:].any(dim=-1).all()


def test_causal_mask_matches_torch_is_causal_for_square_inputs():
    q, k, v = randn(2, 3, 6, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 4)
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(6))
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close(ours, theirs)


def test_torch_is_causal_is_top_left_aligned_so_it_differs_when_L_differs_from_S():
    # Why causal_mask(L, S) exists: torch's is_causal=True aligns to the top left for L != S.
    q, k, v = randn(1, 1, 2, 4), randn(1, 1, 4, 4), randn(1, 1, 4, 4)
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(2, 4))
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(ours, top_left)


def test_causal_mask_is_built_on_the_requested_device():
    assert causal_mask(3, device="meta").device.type == "meta"


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((-1,), ValueError, r"L must be non-negative; got -1"),
        ((2, -3), ValueError, r"S must be non-negative; got -3"),
        ((2.0,), TypeError, r"L must be an int; got float"),
        ((True,), TypeError, r"L must be an int; got bool"),
    ],
)
def test_causal_mask_rejects_bad_lengths(args, error, match):
    with pytest.raises(error, match=match):
        causal_mask(*args)


# --- padding_mask --------------------------------------------------------------------------


def test_padding_mask_marks_real_tokens():
    mask = padding_mask([3, 0, 4], 4)
    assert mask.dtype == torch.bool and mask.shape == (3, 1, 1, 4)
    expected = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask[:, 0, 0], expected)


def test_padding_mask_accepts_a_tensor_of_lengths():
    assert torch.equal(padding_mask(torch.tensor([2, 1]), 3), padding_mask([2, 1], 3))


def test_padding_mask_of_an_empty_batch():
    assert padding_mask([], 3).shape == (0, 1, 1, 3)
    assert padding_mask(torch.tensor([], dtype=torch.long), 3).shape == (0, 1, 1, 3)


@pytest.mark.parametrize(
    "lengths, S, error, match",
    [
        ([1, 5], 4, ValueError, r"lengths must lie in \[0, S=4\]"),
        ([-1, 2], 4, ValueError, r"lengths must lie in \[0, S=4\]"),
        ([1.0, 2.0], 4, TypeError, r"lengths must be a 1-D integer tensor"),
        ([[1, 2]], 4, TypeError, r"lengths must be a 1-D integer tensor"),
        ([1, 2], -1, ValueError, r"S must be non-negative"),
    ],
)
def test_padding_mask_rejects_bad_input(lengths, S, error, match):
    with pytest.raises(error, match=match):
        padding_mask(lengths, S)


# --- converters ----------------------------------------------------------------------------


def test_to_torch_attn_mask_flips_polarity_and_round_trips():
    mask = random_mask(5, 7)
    blocked = to_torch_attn_mask(mask)
    assert torch.equal(blocked, ~mask)
    assert torch.equal(from_torch_masks(blocked), mask)


@pytest.mark.parametrize("shape", [(3, 1, 1, 6), (3, 6)])
def test_to_torch_key_padding_mask_flips_polarity_and_round_trips(shape):
    mask = padding_mask([6, 2, 0], 6).reshape(shape)
    key_padding = to_torch_key_padding_mask(mask)
    assert key_padding.shape == (3, 6)
    assert torch.equal(key_padding, ~mask.reshape(3, 6))
    assert torch.equal(from_torch_masks(key_padding_mask=key_padding), mask.reshape(3, 1, 1, 6))


def test_to_torch_key_padding_mask_refuses_a_mask_that_varies_over_queries():
    with pytest.raises(ValueError, match=r"mask must have shape \(N, 1, 1, S\) or \(N, S\)"):
        to_torch_key_padding_mask(random_mask(2, 1, 3, 4))


@pytest.mark.parametrize("converter", [to_torch_attn_mask, to_torch_key_padding_mask])
def test_converters_refuse_non_bool_masks(converter):
    with pytest.raises(TypeError, match=r"mask must be a bool.*use mask\.bool\(\)"):
        converter(torch.ones(2, 3))


def test_from_torch_masks_of_nothing_is_nothing():
    assert from_torch_masks() is None


def test_from_torch_masks_reads_additive_float_masks():
    blocked = random_mask(4, 5)
    additive = torch.zeros(4, 5).masked_fill(blocked, -torch.inf)
    assert torch.equal(from_torch_masks(additive), ~blocked)
    key_padding = torch.tensor([[0.0, 0.0, -torch.inf, -torch.inf, -torch.inf]])
    assert torch.equal(from_torch_masks(key_padding_mask=key_padding)[0, 0, 0], key_padding[0] == 0)


def test_from_torch_masks_reads_torchs_own_causal_mask():
    square = nn.Transformer.generate_square_subsequent_mask(5)  # float, 0 and -inf
    assert torch.equal(from_torch_masks(square), causal_mask(5))


def test_from_torch_masks_combines_attn_mask_and_key_padding_mask():
    attn_blocked = random_mask(3, 4)
    key_blocked = random_mask(2, 4)
    combined = from_torch_masks(attn_blocked, key_blocked)
    assert combined.shape == (2, 1, 3, 4)
    expected = ~attn_blocked[None, None] & ~key_blocked[:, None, None, :]
    assert torch.equal(combined, expected)


def test_from_torch_masks_keeps_a_3d_attn_mask():
    blocked = random_mask(6, 3, 4)
    assert torch.equal(from_torch_masks(blocked), ~blocked)


@pytest.mark.parametrize("bool_masks", [True, False], ids=["bool", "additive"])
def test_converted_masks_give_nn_multihead_attentions_result(bool_masks):
    # The converter's meaning is torch's meaning: the same masks, given to nn.MultiheadAttention
    # as they are and to our module through from_torch_masks, give the same output.
    N, L, S, E, H = 2, 4, 5, 8, 2
    torch_mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    ours = MultiHeadAttention.from_torch(torch_mha)
    attn_blocked = torch_causal_blocked(L, S)
    key_blocked = torch.tensor([[False] * S, [False, False, False, True, True]])
    if not bool_masks:
        attn_blocked = torch.zeros(L, S, dtype=torch.float64).masked_fill(attn_blocked, -torch.inf)
        key_blocked = torch.zeros(N, S, dtype=torch.float64).masked_fill(key_blocked, -torch.inf)
    query, memory = randn(N, L, E), randn(N, S, E)
    expected, expected_weights = torch_mha(
        query, memory, memory, attn_mask=attn_blocked, key_padding_mask=key_blocked,
        average_attn_weights=False,
    )  # fmt: skip
    out, weights = ours(query, memory, mask=from_torch_masks(attn_blocked, key_blocked))
    assert_close(out, expected)
    assert_close(weights, expected_weights)


_BLOCKED3D = torch.zeros(4, 2, 3, dtype=torch.bool)
_KEYS = torch.zeros(2, 3, dtype=torch.bool)


@pytest.mark.parametrize(
    "attn_mask, key_padding_mask, error, match",
    [
        (torch.tensor([[0.0, 0.5]]), None, ValueError, r"attn_mask must hold only 0 and"),
        (torch.tensor([[0.0, torch.nan]]), None, ValueError, r"attn_mask must hold only 0 and"),
        (torch.tensor([[0.0, torch.inf]]), None, ValueError, r"attn_mask must hold only 0 and"),
        (torch.tensor([[0, 1]]), None, TypeError, r"attn_mask must be a bool or float"),
        ([[True]], None, TypeError, r"attn_mask must be a torch.Tensor"),
        (None, torch.tensor([0.0, 0.25]), ValueError, r"key_padding_mask must be 2-D"),
        (None, [[True, False]], TypeError, r"key_padding_mask must be a torch.Tensor"),
        (_BLOCKED3D, _KEYS, ValueError, r"3-D \(N\*H, L, S\) attn_mask.*key_padding_mask"),
    ],
    ids=["finite-bias", "nan", "posinf", "int", "list", "kpm-1d", "kpm-list", "3d-and-kpm"],
)
def test_from_torch_masks_rejects_what_has_no_bool_equivalent(
    attn_mask, key_padding_mask, error, match
):
    with pytest.raises(error, match=match):
        from_torch_masks(attn_mask, key_padding_mask)


# --- hardening: inputs without values, complex lengths -------------------------------------


@pytest.mark.parametrize(
    "lengths, error, match",
    [
        (torch.tensor([1, 2], device="meta"), ValueError, r"lengths must hold values; got .*meta"),
        (torch.tensor([1j]), TypeError, r"lengths must be a 1-D integer tensor.*complex64"),
    ],
    ids=["meta", "complex"],
)
def test_padding_mask_refuses_lengths_without_integer_values(lengths, error, match):
    with pytest.raises(error, match=match):
        padding_mask(lengths, 4)


def test_padding_mask_still_reads_small_integer_dtypes():
    lengths = torch.tensor([3, 1], dtype=torch.uint8)
    assert torch.equal(padding_mask(lengths, 4), padding_mask([3, 1], 4))


def test_from_torch_masks_refuses_a_float_mask_without_values():
    # A bool mask on meta converts (~mask needs no values); a float one must be read.
    assert from_torch_masks(torch.ones(2, 2, dtype=torch.bool, device="meta")).device.type == "meta"
    with pytest.raises(ValueError, match=r"attn_mask must hold values; got .*meta"):
        from_torch_masks(torch.zeros(2, 2, device="meta"))


@pytest.mark.parametrize("converter", [to_torch_attn_mask, to_torch_key_padding_mask])
def test_converters_refuse_a_mask_that_is_not_a_tensor(converter):
    # A list used to fail with an AttributeError (no .shape).
    with pytest.raises(TypeError, match=r"mask must be a bool torch.Tensor .*; got list"):
        converter([[True, False]])
