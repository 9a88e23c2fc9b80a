"""Property tests (hypothesis) over N, L, S, E, H and random masks, in float64.

Each property holds for any shapes and any mask, including masks that leave a query row with no
key: weights are a distribution over the allowed keys (or all 0), causal attention never looks
ahead, attention is a set operation over key/value pairs, and the weights path and the fast path
compute the same output.
"""

import torch
from hypothesis import given
from hypothesis import strategies as st

from attention import (
    FusedMultiHeadAttention,
    MultiHeadAttention,
    SelfAttention,
    TransformerBlock,
    causal_mask,
    scaled_dot_product_attention,
    tiled_attention,
)

from .helpers import assert_close

MHA_CLASSES = [MultiHeadAttention, FusedMultiHeadAttention]
MASK_SHAPES = ["none", "LS", "keys", "per-query", "per-head"]


@st.composite
def problems(draw, *, cross=True):
    """Sizes, a random mask of a random broadcastable shape, and a seed for the tensors."""
    N = draw(st.integers(1, 3))
    L = draw(st.integers(1, 6))
    S = draw(st.integers(1, 6)) if cross else L
    H = draw(st.integers(1, 3))
    D = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(MASK_SHAPES))
    density = draw(st.sampled_from([0.2, 0.5, 0.9]))
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    shape = {
        "LS": (L, S),
        "keys": (N, 1, 1, S),
        "per-query": (N, 1, L, S),
        "per-head": (N, H, L, S),
    }
    mask = None if kind == "none" else torch.rand(*shape[kind], generator=generator) < density
    torch.manual_seed(seed)
    return {"N": N, "L": L, "S": S, "H": H, "E": H * D, "mask": mask}


def _inputs(p):
    return (
        torch.randn(p["N"], p["L"], p["E"], dtype=torch.float64),
        torch.randn(p["N"], p["S"], p["E"], dtype=torch.float64),
    )


def _qkv(p, *, value_dim):
    """Float64 q, k (N, H, L|S, D) and v (N, H, S, value_dim) for the functional paths."""
    N, L, S, H, D = p["N"], p["L"], p["S"], p["H"], p["E"] // p["H"]
    q = torch.randn(N, H, L, D, dtype=torch.float64)
    k = torch.randn(N, H, S, D, dtype=torch.float64)
    v = torch.randn(N, H, S, value_dim, dtype=torch.float64)
    return q, k, v


def _full(mask, N, H, L, S):
    return torch.ones(N, H, L, S, dtype=torch.bool) if mask is None else mask.expand(N, H, L, S)


@given(p=problems(), cls=st.sampled_from(MHA_CLASSES))
def test_weight_rows_sum_to_one_or_are_all_zero(p, cls):
    N, L, S, H = p["N"], p["L"], p["S"], p["H"]
    query, memory = _inputs(p)
    _, weights = cls(p["E"], H, dtype=torch.float64)(query, memory, mask=p["mask"])
    allowed = _full(p["mask"], N, H, L, S)
    has_key = allowed.any(dim=-1)  # (N, H, L)
    assert (weights >= 0).all()
    assert torch.equal(weights[~allowed], torch.zeros_like(weights[~allowed]))
    sums = weights.sum(dim=-1)
    assert_close(sums[has_key], torch.ones_like(sums[has_key]))
    assert torch.equal(sums[~has_key], torch.zeros_like(sums[~has_key]))


@given(p=problems(), scale=st.one_of(st.none(), st.floats(0.05, 3.0)))
def test_functional_path_matches_torch(p, scale):
    import torch.nn.functional as F

    q, k, v = _qkv(p, value_dim=3)
    out, _ = scaled_dot_product_attention(q, k, v, p["mask"], scale=scale)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=p["mask"], scale=scale))


@given(p=problems(), block_size=st.integers(1, 8), causal=st.booleans())
def test_tiled_attention_matches_the_reference_path(p, block_size, causal):
    q, k, v = _qkv(p, value_dim=2)
    L, S = p["L"], p["S"]
    out = tiled_attention(q, k, v, causal=causal, block_size=block_size)
    expected, _ = scaled_dot_product_attention(q, k, v, causal_mask(L, S) if causal else None)
    assert_close(out, expected)


def _causal_modules(E, H):
    """Every causal self-attention path, as functions of x (N, L, E) returning (N, L, E)."""
    mha = MultiHeadAttention(E, H, dtype=torch.float64)
    fused = FusedMultiHeadAttention(E, H, dtype=torch.float64)
    single = SelfAttention(E, dtype=torch.float64)
    post = TransformerBlock(E, H, ffn_dim=8, norm_first=False, dtype=torch.float64).eval()
    pre = TransformerBlock(E, H, ffn_dim=8, norm_first=True, dtype=torch.float64).eval()

    def heads(x):  # (N, L, E) -> (N, H, L, E / H)
        return x.unflatten(-1, (H, E // H)).transpose(1, 2)

    return {
        "functional": lambda x, m: scaled_dot_product_attention(x, x, x, m)[0],
        "tiled": lambda x, m: tiled_attention(heads(x), heads(x), heads(x), causal=True),
        "SelfAttention": lambda x, m: single(x, m)[0],
        "MultiHeadAttention": lambda x, m: mha(x, mask=m)[0],
        "Fused-weights": lambda x, m: fused(x, mask=m)[0],
        "Fused-sdpa": lambda x, m: fused(x, mask=m, need_weights=False)[0],
        "Block-post-LN": lambda x, m: post(x, m)[0],
        "Block-pre-LN": lambda x, m: pre(x, m)[0],
    }


@given(p=problems(cross=False), data=st.data())
def test_causal_attention_never_looks_ahead(p, data):
    # Changing the tokens from position t on leaves every output before t unchanged.
    N, L, E, H = p["N"], p["L"], p["E"], p["H"]
    t = data.draw(st.integers(0, L - 1), label="t")
    x = torch.randn(N, L, E, dtype=torch.float64)
    changed = x.clone()
    changed[:, t:] = torch.randn(N, L - t, E, dtype=torch.float64) * 10
    mask = causal_mask(L)
    for name, f in _causal_modules(E, H).items():
        before, after = f(x, mask), f(changed, mask)
        if name == "tiled":  # (N, H, L, D)
            before, after = before.transpose(1, 2), after.transpose(1, 2)
        assert_close(after[:, :t], before[:, :t], msg=lambda m, name=name: f"{name}: {m}")
        # ...while the change is visible from t on, so the property is not vacuous (not checked
        # for the blocks: LayerNorm over E <= 2 numbers takes a few values, whatever its input).
        if not name.startswith("Block"):
            assert not torch.allclose(after[:, t:], before[:, t:]), name


@given(p=problems(), cls=st.sampled_from(MHA_CLASSES), need_weights=st.booleans())
def test_permuting_keys_and_values_together_changes_nothing(p, cls, need_weights):
    S, H = p["S"], p["H"]
    query, memory = _inputs(p)
    value = torch.randn_like(memory)
    perm = torch.randperm(S)
    mha = cls(p["E"], H, dtype=torch.float64)
    mask = p["mask"]
    permuted_mask = None if mask is None else mask[..., perm]
    out, weights = mha(query, memory, value, mask=mask, need_weights=need_weights)
    out_p, weights_p = mha(
        query, memory[:, perm], value[:, perm], mask=permuted_mask, need_weights=need_weights
    )
    assert_close(out_p, out)
    if need_weights:
        assert_close(weights_p, weights[..., perm])


@given(p=problems(), causal=st.booleans())
def test_permuting_keys_and_values_in_the_functional_paths(p, causal):
    q, k, v = _qkv(p, value_dim=2)
    perm = torch.randperm(p["S"])
    mask = p["mask"]
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    permuted_mask = None if mask is None else mask[..., perm]
    assert_close(
        scaled_dot_product_attention(q, k[..., perm, :], v[..., perm, :], permuted_mask)[0], out
    )
    if not causal:  # tiled has no mask, only causality, which fixes the order of the keys
        assert_close(
            tiled_attention(q, k[..., perm, :], v[..., perm, :], block_size=2),
            tiled_attention(q, k, v, block_size=2),
        )


@given(p=problems(), cls=st.sampled_from(MHA_CLASSES))
def test_need_weights_does_not_change_the_output(p, cls):
    query, memory = _inputs(p)
    mha = cls(p["E"], p["H"], dtype=torch.float64)
    with_weights, weights = mha(query, memory, mask=p["mask"], need_weights=True)
    without, none = mha(query, memory, mask=p["mask"], need_weights=False)
    assert weights is not None and none is None
    assert_close(without, with_weights)


@given(p=problems(cross=False), norm_first=st.booleans())
def test_need_weights_does_not_change_the_block_output(p, norm_first):
    block = TransformerBlock(p["E"], p["H"], ffn_dim=8, norm_first=norm_first, dtype=torch.float64)
    x, _ = _inputs(p)
    block.eval()
    assert_close(block(x, p["mask"], need_weights=True)[0], block(x, p["mask"])[0])


@given(p=problems(), cls=st.sampled_from(MHA_CLASSES))
def test_each_sequence_of_the_batch_is_independent(p, cls):
    query, memory = _inputs(p)
    mha = cls(p["E"], p["H"], dtype=torch.float64)
    mask = p["mask"]
    out, weights = mha(query, memory, mask=mask)
    n = p["N"] - 1
    mask_n = mask if mask is None or mask.dim() == 2 else mask[n : n + 1]
    out_n, weights_n = mha(query[n : n + 1], memory[n : n + 1], mask=mask_n)
    assert_close(out_n, out[n : n + 1])
    assert_close(weights_n, weights[n : n + 1])
