"""MultiHeadAttention and FusedMultiHeadAttention (which differs only in its packed projection)
against nn.MultiheadAttention, with weights copied by ``from_torch``.

Masks for torch are built here in torch's polarity (True = blocked), independently of the
package's converters. Gradients stay enabled so torch's modules take their ordinary path rather
than the inference fast path.
"""

import pytest
import torch
from torch import nn

from attention import (
    FusedMultiHeadAttention,
    MultiHeadAttention,
    TransformerBlock,
    causal_mask,
    padding_mask,
)

from .helpers import assert_close, blocked_for_torch, near_range, randn, random_mask

MHA_CLASSES = [MultiHeadAttention, FusedMultiHeadAttention]
N, E, H = 3, 16, 4


def _lengths(S):
    """Padding lengths for S keys: one full sequence, one short, one in between (every
    sequence keeps key 0, so padding alone leaves no query with nothing to attend to)."""
    return [S, 2, max(S - 1, 1)]


def _case(name, L, S):
    """(our mask, torch's attn_mask, torch's key_padding_mask) for a named mask case."""
    no = (None, None, None)
    if name == "none":
        return no
    blocked_causal = torch.ones(L, S, dtype=torch.bool).triu(S - L + 1)  # True = blocked
    blocked_keys = torch.arange(S) >= torch.tensor(_lengths(S))[:, None]  # (N, S)
    if name == "causal":
        return causal_mask(L, S), blocked_causal, None
    if name == "padding":
        return padding_mask(_lengths(S), S), None, blocked_keys
    if name == "both":
        return causal_mask(L, S) & padding_mask(_lengths(S), S), blocked_causal, blocked_keys
    if name == "per-head":  # (N, H, L, S), given to torch as (N * H, L, S)
        mask = random_mask(N, H, L, S)
        mask[..., 0] = True
        return mask, blocked_for_torch(mask, N, H), None
    raise ValueError(name)


MASK_CASES = ["none", "causal", "padding", "both", "per-head"]
# (L, S): self-attention (key = value = query) and cross-attention with L < S and L > S.
LENGTH_CASES = [(5, None), (4, 5), (5, 3)]
LENGTH_IDS = ["self", "cross-L<S", "cross-L>S"]


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "no-weights"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("mask_case", MASK_CASES)
@pytest.mark.parametrize("L, S", LENGTH_CASES, ids=LENGTH_IDS)
@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_multi_head_attention_matches_torch(cls, L, S, mask_case, bias, need_weights, dtype):
    torch_mha = nn.MultiheadAttention(E, H, bias=bias, batch_first=True, dtype=dtype)
    ours = cls.from_torch(torch_mha)
    query = torch.randn(N, L, E, dtype=dtype)
    memory = query if S is None else torch.randn(N, S, E, dtype=dtype)
    mask, attn_mask, key_padding_mask = _case(mask_case, L, memory.shape[1])

    expected, expected_weights = torch_mha(
        query, memory, memory, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
        need_weights=need_weights, average_attn_weights=False,
    )  # fmt: skip
    key = None if S is None else memory
    out, weights = ours(query, key, mask=mask, need_weights=need_weights)

    # Causal cross-attention with L > S leaves the first queries with no key: torch's weights
    # path gives NaN there (see test_masked_rows.py), so compare the rows that have a key and
    # check that ours gives the output projection of 0 in the others.
    S = memory.shape[1]
    has_key = torch.ones(N, H, L, S, dtype=torch.bool) if mask is None else mask.expand(N, H, L, S)
    rows = has_key.any(dim=-1)  # (N, H, L)
    assert_close(out[rows.all(dim=1)], expected[rows.all(dim=1)])
    bias_row = ours.out_proj.bias if bias else torch.zeros(E, dtype=dtype)
    assert_close(out[~rows.all(dim=1)], bias_row.detach().expand_as(out[~rows.all(dim=1)]))
    if need_weights:
        assert weights.shape == (N, H, L, S)
        assert_close(weights[rows], expected_weights[rows])
        assert torch.equal(weights[~rows], torch.zeros_like(weights[~rows]))
    else:
        assert weights is None


@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_from_torch_of_a_sequence_first_module(cls):
    # nn.MultiheadAttention's default batch_first=False: the weights mean the same, only the
    # layout of its inputs differs; ours is always batch first.
    torch_mha = nn.MultiheadAttention(E, H, dtype=torch.float64)
    ours = cls.from_torch(torch_mha)
    x = randn(N, 5, E)
    expected, _ = torch_mha(*(x.transpose(0, 1),) * 3)
    assert_close(ours(x)[0], expected.transpose(0, 1))


def test_key_defaults_to_query_and_value_to_key():
    mha = MultiHeadAttention(E, H, dtype=torch.float64)
    x, memory = randn(2, 4, E), randn(2, 6, E)
    assert_close(mha(x)[0], mha(x, x, x)[0])
    assert_close(mha(x, memory)[0], mha(x, memory, memory)[0])


def test_fused_and_separate_projections_compute_the_same_thing():
    separate = MultiHeadAttention(E, H, dtype=torch.float64)
    fused = FusedMultiHeadAttention(E, H, dtype=torch.float64)
    with torch.no_grad():
        projections = (separate.q_proj, separate.k_proj, separate.v_proj)
        fused.qkv_proj.weight.copy_(torch.cat([p.weight for p in projections]))
        fused.qkv_proj.bias.copy_(torch.cat([p.bias for p in projections]))
        fused.out_proj.load_state_dict(separate.out_proj.state_dict())
    x, memory, value = randn(2, 4, E), randn(2, 6, E), randn(2, 6, E)
    # Self-attention (one packed matmul), and cross-attention (three slices of it).
    for args, mask in (((x,), causal_mask(4)), ((x, memory), None), ((x, memory, value), None)):
        expected, expected_weights = separate(*args, mask=mask)
        for need_weights in (True, False):
            out, weights = fused(*args, mask=mask, need_weights=need_weights)
            assert_close(out, expected)
            if need_weights:
                assert_close(weights, expected_weights)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype_", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_from_torch_keeps_dtype_bias_dropout_and_mode(cls, dtype_, bias, training):
    source = nn.MultiheadAttention(E, H, dropout=0.25, bias=bias, batch_first=True, dtype=dtype_)
    source.train(training)
    ours = cls.from_torch(source)
    assert {p.dtype for p in ours.parameters()} == {dtype_}
    assert ours.training == training
    assert ours.dropout == 0.25
    assert (ours.out_proj.bias is not None) == bias
    ours_params = sum(p.numel() for p in ours.parameters())
    assert ours_params == sum(p.numel() for p in source.parameters())


@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_from_torch_copies_every_weight(cls):
    source = nn.MultiheadAttention(E, H, batch_first=True)
    ours = cls.from_torch(source)
    ours_flat = torch.cat([p.detach().flatten() for p in ours.parameters()]).sort().values
    theirs_flat = torch.cat([p.detach().flatten() for p in source.parameters()]).sort().values
    assert torch.equal(ours_flat, theirs_flat)


@pytest.mark.parametrize("cls", [*MHA_CLASSES, TransformerBlock])
def test_from_torch_keeps_the_device(cls):
    # The meta device stands for "not the default device": every parameter must follow it.
    if cls is TransformerBlock:
        source = nn.TransformerEncoderLayer(E, H, 32, batch_first=True, device="meta")
    else:
        source = nn.MultiheadAttention(E, H, batch_first=True, device="meta")
    ours = cls.from_torch(source)
    assert {p.device.type for p in ours.parameters()} == {"meta"}


@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_fused_is_a_multi_head_attention_that_differs_only_in_the_projection(cls):
    # FusedMultiHeadAttention subclasses MultiHeadAttention: same checks, same forward.
    assert issubclass(cls, MultiHeadAttention)
    torch_mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    names = {name for name, _ in cls.from_torch(torch_mha).named_parameters()}
    packed = {"qkv_proj.weight", "qkv_proj.bias"}
    split = {f"{p}_proj.{kind}" for p in "qkv" for kind in ("weight", "bias")}
    out = {"out_proj.weight", "out_proj.bias"}
    assert names == (packed if cls is FusedMultiHeadAttention else split) | out


@pytest.mark.parametrize(
    "source, match",
    [
        (lambda: nn.MultiheadAttention(E, H, kdim=8, vdim=8), r"kdim and vdim"),
        (lambda: nn.MultiheadAttention(E, H, add_bias_kv=True), r"add_bias_kv"),
        (lambda: nn.MultiheadAttention(E, H, add_zero_attn=True), r"add_zero_attn"),
    ],
    ids=["kdim-vdim", "add_bias_kv", "add_zero_attn"],
)
@pytest.mark.parametrize("cls", MHA_CLASSES)
def test_from_torch_refuses_options_it_does_not_have(cls, source, match):
    with pytest.raises(ValueError, match=match):
        cls.from_torch(source())


@pytest.mark.parametrize("cls", [*MHA_CLASSES, TransformerBlock])
def test_from_torch_refuses_other_modules(cls):
    with pytest.raises(TypeError, match=r"expected an nn\.\w+; got Linear"):
        cls.from_torch(nn.Linear(E, E))


@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_every_module_path_agrees_near_the_range_of_the_format(low):
    # FusedMultiHeadAttention in float16 gave NaN with need_weights=True and a finite output
    # with False: the readable path multiplied q @ k^T by the scale after it had overflowed.
    E = 64
    torch_mha = nn.MultiheadAttention(E, 1, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # identity projections: q = k = v = x, whose q . k overflows
        torch_mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        torch_mha.out_proj.weight.copy_(torch.eye(E))
    x = near_range(low)
    expected, _ = torch_mha(x.double(), x.double(), x.double())
    for cls in MHA_CLASSES:
        module = cls.from_torch(torch_mha).to(low)
        for need_weights in (True, False):
            out, _ = module(x, need_weights=need_weights)
            assert out.isfinite().all(), (cls.__name__, need_weights)
            torch.testing.assert_close(out.double(), expected, rtol=2e-2, atol=0.0)


@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"dtype": torch.int32}, TypeError, r"dtype must be a floating-point dtype"),
        ({"device": "bogus"}, ValueError, r"device must name a device such as 'cpu'"),
    ],
)
def test_a_bad_dtype_or_device_is_refused_by_name(cls, kwargs, error, message):
    # Both failed inside nn.Linear with torch's own words, naming neither argument.
    with pytest.raises(error, match=message):
        cls(16, 4, **kwargs)
