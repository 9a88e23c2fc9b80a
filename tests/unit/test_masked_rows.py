"""A query row with no key to attend to: output 0, weights 0, finite gradients, on every path.

PyTorch's own nn.MultiheadAttention returns NaN for such a row on its weights path; the first
test pins that behaviour down (for the torch version this project pins), the others show that
this package never does.
"""

import pytest
import torch
from torch import nn

from attention import (
    AttentionClassifier,
    FusedMultiHeadAttention,
    MultiHeadAttention,
    SelfAttention,
    TransformerBlock,
    scaled_dot_product_attention,
    tiled_attention,
)

from .helpers import randn

N, L, S, E, H = 2, 4, 5, 8, 2


def _mask_with_empty_rows(L=L, S=S):
    """(N, 1, L, S): query 1 of batch 0 and every query of batch 1 may attend to nothing."""
    mask = torch.ones(N, 1, L, S, dtype=torch.bool)
    mask[0, 0, 1] = False
    mask[1] = False
    return mask


def _empty_rows(mask):
    """(N, L) True where a query row has no key, for a mask shaped (N, 1, L, S)."""
    return ~mask[:, 0].any(dim=-1)


def _assert_finite_gradients(*tensors):
    for t in tensors:
        assert t.grad is not None and t.grad.isfinite().all(), "a gradient is missing or not finite"


def test_torch_multihead_attention_gives_nan_for_an_empty_row_on_its_weights_path():
    torch_mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    x = randn(N, L, E)
    blocked = ~_mask_with_empty_rows()[0, 0]  # (L, S) torch polarity: row 1 fully blocked
    memory = randn(N, S, E)
    out, weights = torch_mha(x, memory, memory, attn_mask=blocked, average_attn_weights=False)
    assert out[:, 1].isnan().all() and weights[:, :, 1].isnan().all()
    assert not out[:, [0, 2, 3]].isnan().any()
    # Its need_weights=False path (SDPA) gives 0 for the row in this torch version.
    out, _ = torch_mha(x, memory, memory, attn_mask=blocked, need_weights=False)
    assert not out.isnan().any()
    # The same through key_padding_mask: a sequence made only of padding.
    padding = torch.tensor([[False] * S, [True] * S])
    out, weights = torch_mha(x, memory, memory, key_padding_mask=padding)
    assert out[1].isnan().all() and weights[1].isnan().all()


@pytest.mark.parametrize("dropout_p", [0.0, 0.5])
def test_functional_reference_path(dropout_p):
    mask = _mask_with_empty_rows()[:, None, 0]  # (N, 1, L, S) with H = 1
    q, k, v = (
        randn(N, 1, L, 3, requires_grad=True),
        randn(N, 1, S, 3, requires_grad=True),
        randn(N, 1, S, 6, requires_grad=True),
    )
    out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p)
    empty = _empty_rows(mask[:, 0])
    assert torch.equal(out[:, 0][empty], torch.zeros_like(out[:, 0][empty]))
    assert torch.equal(weights[:, 0][empty], torch.zeros_like(weights[:, 0][empty]))
    (out.sum() + weights.sum()).backward()
    _assert_finite_gradients(q, k, v)


def test_tiled_path():
    # Bottom-right causal with L > S: the first L - S queries see no key.
    q, k, v = (
        randn(N, 7, 4, requires_grad=True),
        randn(N, 3, 4, requires_grad=True),
        randn(N, 3, 4, requires_grad=True),
    )
    out = tiled_attention(q, k, v, causal=True, block_size=2)
    assert torch.equal(out[:, :4], torch.zeros(N, 4, 4, dtype=torch.float64))
    out.sum().backward()
    _assert_finite_gradients(q, k, v)


def test_self_attention():
    attn = SelfAttention(E, dtype=torch.float64)
    x = randn(N, L, E, requires_grad=True)
    mask = _mask_with_empty_rows(L, L)
    out, weights = attn(x, mask)
    empty = _empty_rows(mask)
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))
    assert torch.equal(weights[empty], torch.zeros_like(weights[empty]))
    assert torch.allclose(weights[~empty].sum(-1), torch.ones(1, dtype=torch.float64))
    (out.sum() + weights.sum()).backward()
    _assert_finite_gradients(x, *attn.parameters())


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "no-weights"])
@pytest.mark.parametrize("training", [True, False], ids=["train-dropout", "eval"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
def test_multi_head_attention(cls, bias, training, need_weights):
    mha = cls(E, H, dropout=0.5, bias=bias, dtype=torch.float64).train(training)
    x, memory = randn(N, L, E, requires_grad=True), randn(N, S, E, requires_grad=True)
    mask = _mask_with_empty_rows()
    out, weights = mha(x, memory, mask=mask, need_weights=need_weights)
    empty = _empty_rows(mask)
    # Attention gives 0 for the row, so the module gives its output projection of 0: the bias.
    expected = mha.out_proj.bias.detach() if bias else torch.zeros(E, dtype=torch.float64)
    assert torch.equal(out[empty], expected.expand_as(out[empty]))
    assert out.isfinite().all()
    loss = out.sum()
    if need_weights:
        assert weights.transpose(1, 2)[empty].eq(0).all()  # (rows, H, S)
        assert weights.isfinite().all()
        loss = loss + weights.sum()
    else:
        assert weights is None
    loss.backward()
    _assert_finite_gradients(x, memory, *mha.parameters())


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("training", [True, False], ids=["train-dropout", "eval"])
def test_transformer_block(training, norm_first):
    block = TransformerBlock(E, H, ffn_dim=16, dropout=0.3, norm_first=norm_first)
    block = block.double().train(training)
    x = randn(N, L, E, requires_grad=True)
    mask = _mask_with_empty_rows(L, L)
    out, weights = block(x, mask, need_weights=True)
    empty = _empty_rows(mask)
    assert out.isfinite().all()
    assert weights.transpose(1, 2)[empty].eq(0).all()  # (rows, H, L)
    (out.sum() + weights.sum()).backward()
    _assert_finite_gradients(x, *block.parameters())


@pytest.mark.parametrize("training", [True, False], ids=["train-dropout", "eval"])
def test_classifier_on_a_sequence_of_padding_only(training):
    model = AttentionClassifier(10, 3, embed_dim=8, num_heads=2, num_layers=2, max_len=6)
    model = model.double().train(training)
    tokens = torch.tensor([[4, 5, 6, 0, 0], [0, 0, 0, 0, 0]])
    logits, weights = model(tokens, need_weights=True)
    assert logits.isfinite().all()
    for w in weights:
        assert torch.equal(w[1], torch.zeros_like(w[1]))  # every key of sequence 1 is padding
        assert torch.equal(w[0, :, :, 3:], torch.zeros_like(w[0, :, :, 3:]))  # padded keys
    logits.sum().backward()
    _assert_finite_gradients(*(p for p in model.parameters() if p.requires_grad))
