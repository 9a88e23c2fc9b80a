"""Positions: rotary embeddings (RoPE) and ALiBi against loop-built references, in float64."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck

import attention
from attention import RotaryEmbedding, alibi_bias, causal_mask
from attention.positions import PositionalEncoding, alibi_slopes

from .helpers import assert_close, randn


def test_positional_encoding_is_importable_from_its_old_module():
    from attention.classifier import PositionalEncoding as Old

    assert Old is PositionalEncoding is attention.PositionalEncoding


# --- RotaryEmbedding -----------------------------------------------------------------------


def _rope_reference(x, offset=0, base=10000.0):
    """Half-split RoPE written as complex multiplication: pair i is x[i] + 1j * x[i + D/2]."""
    L, D = x.shape[-2:]
    out = torch.empty_like(x)
    for p in range(L):
        for i in range(D // 2):
            angle = (offset + p) * base ** (-2 * i / D)
            z = complex(1.0, 0.0) * math.cos(angle) + 1j * math.sin(angle)
            rotated = (x[..., p, i] + 1j * x[..., p, i + D // 2]) * z
            out[..., p, i], out[..., p, i + D // 2] = rotated.real, rotated.imag
    return out


@pytest.mark.parametrize("D, offset, base", [(2, 0, 10000.0), (8, 0, 10000.0), (6, 5, 100.0)])
def test_rope_follows_the_rotation_formula(D, offset, base):
    x = randn(2, 3, 4, D)
    rope = RotaryEmbedding(D, base=base)
    assert_close(rope(x, offset=offset), _rope_reference(x, offset, base))


def test_rope_half_split_is_su_et_al_interleaved_rotation_with_features_permuted():
    D, L = 8, 5
    x = randn(L, D)
    # Su et al. rotate neighbours (2i, 2i+1) by p * theta_i.
    interleaved = torch.empty_like(x)
    for p in range(L):
        for i in range(D // 2):
            c, s = math.cos(p * 10000 ** (-2 * i / D)), math.sin(p * 10000 ** (-2 * i / D))
            a, b = x[p, 2 * i], x[p, 2 * i + 1]
            interleaved[p, 2 * i], interleaved[p, 2 * i + 1] = a * c - b * s, a * s + b * c
    to_half = torch.cat((torch.arange(0, D, 2), torch.arange(1, D, 2)))  # evens, then odds
    assert_close(RotaryEmbedding(D)(x[:, to_half]), interleaved[:, to_half])


@settings(max_examples=40, deadline=None)
@given(
    half=st.integers(1, 8),
    m=st.integers(0, 200),
    n=st.integers(0, 200),
    shift=st.integers(0, 300),
    seed=st.integers(0, 2**16),
)
def test_rope_score_depends_only_on_the_offset(half, m, n, shift, seed):
    torch.manual_seed(seed)
    rope = RotaryEmbedding(2 * half, max_len=600)
    q, k = randn(3, 1, 2 * half), randn(3, 1, 2 * half)
    score = (rope(q, offset=m) * rope(k, offset=n)).sum(-1)
    shifted = (rope(q, offset=m + shift) * rope(k, offset=n + shift)).sum(-1)
    assert_close(shifted, score)
    # ... and equals the key alone rotated by the offset n - m when n >= m.
    if n >= m:
        assert_close((q * rope(k, offset=n - m)).sum(-1), score)


def test_rope_preserves_norms_and_position_zero_is_the_identity():
    x = randn(2, 4, 7, 16)
    rope = RotaryEmbedding(16)
    assert_close(rope(x).norm(dim=-1), x.norm(dim=-1))
    assert_close(rope(x)[..., 0, :], x[..., 0, :])


def test_rope_offset_rotates_like_the_later_rows_of_a_longer_sequence():
    x = randn(2, 3, 9, 8)
    rope = RotaryEmbedding(8)
    assert_close(rope(x[..., 6:, :], offset=6), rope(x)[..., 6:, :])


def test_rope_keeps_dtype_shape_and_has_no_state():
    rope = RotaryEmbedding(4)
    x = torch.randn(5, 4)
    assert rope(x).dtype == torch.float32 and rope(x).shape == (5, 4)
    assert not list(rope.parameters()) and not list(rope.buffers())
    assert rope.angles(2, offset=3).shape == (2, 2)


def test_rope_gradcheck():
    rope = RotaryEmbedding(6)
    assert gradcheck(lambda x: rope(x, offset=2), (randn(2, 3, 6, requires_grad=True),))


def test_rope_last_position_is_max_len_minus_one():
    rope = RotaryEmbedding(4, max_len=8)
    assert rope(randn(3, 4), offset=5).shape == (3, 4)
    with pytest.raises(ValueError, match=r"positions 6\.\.8 reach past max_len=8"):
        rope(randn(3, 4), offset=6)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"head_dim": 5}, ValueError, r"head_dim must be even.*got 5"),
        ({"head_dim": 0}, ValueError, r"head_dim must be at least 2; got 0"),
        ({"head_dim": 4.0}, TypeError, r"head_dim must be an int; got float"),
        ({"head_dim": 4, "base": 1.0}, ValueError, r"base must be greater than 1; got 1.0"),
        ({"head_dim": 4, "base": "10"}, TypeError, r"base must be a float; got str"),
        ({"head_dim": 4, "max_len": 0}, ValueError, r"max_len must be at least 1; got 0"),
    ],
)
def test_rope_bad_construction(kwargs, error, match):
    head_dim = kwargs.pop("head_dim")
    with pytest.raises(error, match=match):
        RotaryEmbedding(head_dim, **kwargs)


@pytest.mark.parametrize(
    "x, kwargs, error, match",
    [
        (torch.randn(3, 6), {}, ValueError, r"last dimension must equal head_dim=4.*\(3, 6\)"),
        (torch.randn(4), {}, ValueError, r"x must have at least 2 dimensions"),
        (torch.ones(3, 4, dtype=torch.long), {}, TypeError, r"x must be a floating-point"),
        ([[1.0] * 4], {}, TypeError, r"x must be a torch.Tensor; got list"),
        (torch.randn(3, 4), {"offset": -1}, ValueError, r"offset must be non-negative; got -1"),
        (torch.randn(3, 4), {"offset": 1.0}, TypeError, r"offset must be an int; got float"),
    ],
)
def test_rope_bad_input(x, kwargs, error, match):
    with pytest.raises(error, match=match):
        RotaryEmbedding(4)(x, **kwargs)


# --- ALiBi ---------------------------------------------------------------------------------


def _paper_slopes(n):
    """The slopes as the ALiBi paper's reference code computes them (Press et al., 2022)."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _paper_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("H", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20])
def test_alibi_slopes_match_the_papers_code(H):
    expected = torch.tensor(_paper_slopes(H), dtype=torch.float64)
    assert_close(alibi_slopes(H), expected, atol=0.0, rtol=1e-14)


@pytest.mark.parametrize("H", [1, 2, 4, 8, 16])
def test_alibi_slopes_for_a_power_of_two_are_two_to_the_minus_8h_over_H(H):
    h = torch.arange(1, H + 1, dtype=torch.float64)
    assert_close(alibi_slopes(H), 2.0 ** (-8 * h / H))


@pytest.mark.parametrize("H, L, S", [(1, 1, 1), (4, 5, 5), (3, 2, 6), (2, 6, 3), (2, 0, 3)])
def test_alibi_bias_is_minus_slope_times_distance_bottom_right(H, L, S):
    bias = alibi_bias(H, L, S, dtype=torch.float64)
    slopes = _paper_slopes(H)
    expected = torch.zeros(H, L, S, dtype=torch.float64)
    for h in range(H):
        for i in range(L):
            for j in range(S):
                expected[h, i, j] = -slopes[h] * abs((S - L + i) - j)
    assert bias.shape == (H, L, S)
    assert_close(bias, expected)


def test_alibi_bias_is_zero_on_the_bottom_right_diagonal_and_falls_with_distance():
    bias = alibi_bias(4, 3, 7, dtype=torch.float64)
    diagonal = torch.arange(3) + 4
    assert torch.equal(bias[:, torch.arange(3), diagonal], torch.zeros(4, 3, dtype=torch.float64))
    allowed = bias.masked_fill(~causal_mask(3, 7), float("nan"))
    steps = allowed[..., 1:] - allowed[..., :-1]  # rising towards the diagonal
    assert (steps[~steps.isnan()] > 0).all()


def test_alibi_bias_dtype_and_device():
    assert alibi_bias(2, 3).dtype == torch.get_default_dtype()
    assert alibi_bias(2, 3, dtype=torch.float16).dtype == torch.float16
    assert alibi_bias(2, 3, device="meta").device.type == "meta"


def test_alibi_added_to_the_scores_matches_torch_sdpa_with_a_float_mask():
    import torch.nn.functional as F

    q, k, v = randn(2, 4, 5, 8), randn(2, 4, 5, 8), randn(2, 4, 5, 8)
    bias = alibi_bias(4, 5, dtype=torch.float64)  # (H, L, S)
    blocked = torch.full((5, 5), float("-inf"), dtype=torch.float64).triu(1)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias + blocked)
    scores = q @ k.mT / math.sqrt(8) + bias  # (N, H, L, S)
    weights = scores.masked_fill(~causal_mask(5), float("-inf")).softmax(-1)
    assert_close(weights @ v, expected)
    unbiased = F.scaled_dot_product_attention(q, k, v, attn_mask=blocked)
    assert not torch.allclose(unbiased, expected)  # the bias does change the result


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((0, 3), ValueError, r"num_heads must be at least 1; got 0"),
        ((2.0, 3), TypeError, r"num_heads must be an int; got float"),
        ((2, -1), ValueError, r"L must be non-negative; got -1"),
        ((2, 3, -2), ValueError, r"S must be non-negative; got -2"),
        ((2, True), TypeError, r"L must be an int; got bool"),
    ],
)
def test_alibi_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        alibi_bias(*args)


def test_alibi_slopes_bad_input():
    with pytest.raises(ValueError, match=r"num_heads must be at least 1; got -3"):
        alibi_slopes(-3)


# --- hardening ------------------------------------------------------------------------------


def test_positional_encoding_refuses_an_input_on_another_device():
    pe = PositionalEncoding(8, max_len=4)
    with pytest.raises(ValueError, match=r"x must be on the module's device \(.*\); got meta"):
        pe(torch.zeros(1, 2, 8, device="meta"))


@pytest.mark.parametrize("dtype", [torch.long, torch.bool, torch.complex64])
def test_positional_encoding_refuses_a_non_floating_input(dtype):
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor"):
        PositionalEncoding(8, max_len=4)(torch.zeros(1, 2, 8, dtype=dtype))


@pytest.mark.parametrize("base", [math.inf, math.nan, -math.inf])
def test_rope_refuses_a_base_that_is_not_finite(base):
    # base=inf used to give theta = 0 for every pair but the first: no rotation at all.
    with pytest.raises(ValueError, match=rf"base must be finite; got {base}"):
        RotaryEmbedding(4, base=base)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"dtype": torch.long}, TypeError, r"dtype must be a floating-point dtype; got .*int64"),
        ({"dtype": torch.bool}, TypeError, r"dtype must be a floating-point dtype; got torch.bool"),
        ({"dtype": "float32"}, TypeError, r"dtype must be a torch.dtype .*; got 'float32'"),
        ({"device": "bogus"}, ValueError, r"device must name a device such as 'cpu'; got 'bogus'"),
        ({"offset": 2**70}, ValueError, r"offset must fit in int64 \(below 2\*\*63\)"),
    ],
)
def test_rope_angles_refuse_bad_input(kwargs, error, match):
    # angles(dtype=torch.long) used to compute in the default float dtype, ignoring it.
    with pytest.raises(error, match=match):
        RotaryEmbedding(4).angles(2, **kwargs)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"dtype": torch.long}, TypeError, r"dtype must be a floating-point dtype; got .*int64"),
        ({"dtype": torch.complex64}, TypeError, r"dtype must be a floating-point dtype"),
        ({"dtype": "float32"}, TypeError, r"dtype must be a torch.dtype .*; got 'float32'"),
        ({"device": "bogus"}, ValueError, r"device must name a device such as 'cpu'; got 'bogus'"),
        ({"device": torch.float16}, TypeError, r"device must be a torch.device or a str"),
    ],
)
def test_alibi_bias_refuses_a_bad_dtype_or_device(kwargs, error, match):
    # dtype=torch.long used to give an all-zero bias; dtype="float32" was read as a device.
    with pytest.raises(error, match=match):
        alibi_bias(2, 3, **kwargs)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: alibi_bias(2, 2**70), r"L must fit in int64"),
        (lambda: alibi_bias(2, 3, 2**64), r"S must fit in int64"),
        (lambda: RotaryEmbedding(4, max_len=2**70), r"max_len must fit in int64"),
    ],
)
def test_sizes_beyond_int64_are_refused(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("embed_dim", [8, 7])
def test_positional_encoding_follows_the_sinusoid_formula(embed_dim):
    pe = PositionalEncoding(embed_dim, max_len=20)
    x = randn(2, 11, embed_dim)
    table = torch.zeros(11, embed_dim, dtype=torch.float64)
    for p in range(11):
        for i in range(embed_dim):
            angle = p / 10000 ** (2 * (i // 2) / embed_dim)
            table[p, i] = math.sin(angle) if i % 2 == 0 else math.cos(angle)
    # The table is computed in float32 and cast, so compare at float32 precision.
    assert_close(pe(x), x + table, atol=1e-5, rtol=1e-5)
