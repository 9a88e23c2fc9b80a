"""FeedForward and TransformerBlock against nn.TransformerEncoderLayer, post-LN and pre-LN."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention import (
    FeedForward,
    TransformerBlock,
    causal_mask,
    padding_mask,
)

from .helpers import assert_close, randn

N, E, H = 3, 16, 4


def _lengths(S):
    """Padding lengths for S keys: one full sequence, one short, one in between."""
    return [S, 2, max(S - 1, 1)]


def test_feed_forward_is_linear_relu_linear():
    ffn = FeedForward(E, 32, dtype=torch.float64)
    x = randn(2, 5, E)
    expected = ffn.linear2(torch.relu(ffn.linear1(x)))
    assert_close(ffn(x), expected)


def _block_masks(name, L):
    """(our mask, torch's src_mask, torch's src_key_padding_mask)."""
    if name == "none":
        return None, None, None
    if name == "causal":
        return causal_mask(L), nn.Transformer.generate_square_subsequent_mask(L), None
    if name == "padding":
        blocked_keys = torch.arange(L) >= torch.tensor(_lengths(L))[:, None]
        return padding_mask(_lengths(L), L), None, blocked_keys
    blocked_causal = torch.ones(L, L, dtype=torch.bool).triu(1)
    blocked_keys = torch.arange(L) >= torch.tensor(_lengths(L))[:, None]
    return causal_mask(L) & padding_mask(_lengths(L), L), blocked_causal, blocked_keys


@pytest.mark.parametrize("mask_case", ["none", "causal", "padding", "both"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_transformer_block_matches_torch_in_eval_mode(norm_first, mask_case, dtype):
    layer = nn.TransformerEncoderLayer(
        E, H, dim_feedforward=32, dropout=0.1, batch_first=True, norm_first=norm_first,
        dtype=dtype,
    ).eval()  # fmt: skip
    block = TransformerBlock.from_torch(layer)
    assert not block.training
    L = 5
    x = torch.randn(N, L, E, dtype=dtype)
    mask, src_mask, src_key_padding_mask = _block_masks(mask_case, L)
    if src_mask is not None:
        src_mask = src_mask.to(dtype) if src_mask.is_floating_point() else src_mask
    expected = layer(x, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
    out, weights = block(x, mask)
    assert weights is None
    assert_close(out, expected)
    out, weights = block(x, mask, need_weights=True)
    assert_close(out, expected)
    assert weights.shape == (N, H, L, L)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_transformer_block_from_torch_keeps_options(norm_first, bias, training):
    layer = nn.TransformerEncoderLayer(
        E, H, 32, dropout=0.2, batch_first=True, norm_first=norm_first, bias=bias,
        layer_norm_eps=1e-3, dtype=torch.float64,
    ).train(training)  # fmt: skip
    block = TransformerBlock.from_torch(layer)
    assert block.training == training and block.self_attn.training == training
    assert block.norm_first == norm_first
    assert block.norm1.eps == 1e-3 and block.norm2.eps == 1e-3
    assert block.self_attn.dropout == 0.2
    assert block.dropout1.p == block.dropout2.p == block.ffn.dropout.p == 0.2
    assert {p.dtype for p in block.parameters()} == {torch.float64}
    assert sum(p.numel() for p in block.parameters()) == sum(p.numel() for p in layer.parameters())
    x = randn(2, 4, E)
    assert_close(block.eval()(x)[0], layer.eval()(x))


@pytest.mark.parametrize(
    "activation", ["relu", F.relu, torch.relu, nn.ReLU()], ids=["string", "F", "torch", "module"]
)
def test_transformer_block_from_torch_accepts_every_spelling_of_relu(activation):
    # torch.relu is the same function as F.relu; it used to be refused.
    layer = nn.TransformerEncoderLayer(
        E, H, 32, activation=activation, batch_first=True, dtype=torch.float64
    ).eval()
    block = TransformerBlock.from_torch(layer)
    x = randn(2, 4, E)
    assert_close(block(x)[0], layer(x))


@pytest.mark.parametrize("activation", ["gelu", nn.GELU()], ids=["string", "module"])
def test_transformer_block_from_torch_refuses_gelu(activation):
    layer = nn.TransformerEncoderLayer(E, H, 32, activation=activation, batch_first=True)
    with pytest.raises(ValueError, match=r"relu.*(?i:gelu)"):
        TransformerBlock.from_torch(layer)


FACTORY_CASES = [
    ({"dtype": torch.int32}, TypeError, r"dtype must be a floating-point dtype; got torch.int32"),
    ({"dtype": "float32"}, TypeError, r"dtype must be a torch.dtype"),
    ({"device": "bogus"}, ValueError, r"device must name a device such as 'cpu'; got 'bogus'"),
]


@pytest.mark.parametrize("kwargs, error, message", FACTORY_CASES)
@pytest.mark.parametrize("make", [lambda **kw: TransformerBlock(16, 4, **kw),
                                  lambda **kw: FeedForward(16, 32, **kw)],
                         ids=["TransformerBlock", "FeedForward"])  # fmt: skip
def test_a_bad_dtype_or_device_is_refused_by_name(make, kwargs, error, message):
    # "Only Tensors of floating point and complex dtype can require gradients" and torch's raw
    # device error came from inside nn.Linear (TransformerDecoderBlock already checked both).
    with pytest.raises(error, match=message):
        make(**kwargs)
