"""gradcheck and gradgradcheck in float64 on every module and both functional paths.

Modules are checked with respect to their inputs and every parameter at once (through
``torch.func.functional_call``); masks include a query row with no key, whose gradients must
be right too, not merely finite. Sizes are small: gradcheck perturbs every element.
"""

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention import (
    AttentionClassifier,
    FeedForward,
    FusedMultiHeadAttention,
    MultiHeadAttention,
    PositionalEncoding,
    SelfAttention,
    TransformerBlock,
    causal_mask,
    scaled_dot_product_attention,
    tiled_attention,
)

from .helpers import check_module_gradients, randn

F64 = {"dtype": torch.float64}


def _mask(N, L, S):
    """(N, 1, L, S): causal (bottom-right) for batch 0, and one query with no key in batch 1."""
    mask = causal_mask(L, S).repeat(N, 1, 1, 1)
    mask[1, 0, 0] = False
    return mask


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
def test_scaled_dot_product_attention(masked):
    q, k, v = (
        randn(2, 3, 4, requires_grad=True),
        randn(2, 5, 4, requires_grad=True),
        randn(2, 5, 3, requires_grad=True),
    )
    mask = _mask(2, 3, 5)[:, 0] if masked else None

    def f(q, k, v):
        return scaled_dot_product_attention(q, k, v, mask, scale=0.8)

    assert gradcheck(f, (q, k, v))
    assert gradgradcheck(f, (q, k, v))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tiled_attention(causal):
    # L > S with causal: the first queries have no key; block_size 2 splits S = 5 unevenly.
    q, k, v = (
        randn(2, 6, 3, requires_grad=True),
        randn(2, 5, 3, requires_grad=True),
        randn(2, 5, 4, requires_grad=True),
    )

    def f(q, k, v):
        return tiled_attention(q, k, v, causal=causal, block_size=2)

    assert gradcheck(f, (q, k, v))
    # Its backward recomputes the weights and is not differentiable itself: it says so.
    with pytest.raises(RuntimeError, match=r"tiled_attention has first derivatives only"):
        gradgradcheck(f, (q, k, v))


def test_self_attention():
    check_module_gradients(SelfAttention(4, bias=True, **F64), randn(2, 3, 4), _mask(2, 3, 3))


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_attention(cross):
    x, memory = randn(2, 3, 4), randn(2, 5, 4)
    inputs = (x, memory) if cross else (x,)
    mask = _mask(2, 3, 5 if cross else 3)
    check_module_gradients(MultiHeadAttention(4, 2, **F64), *inputs, mask=mask)


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "sdpa"])
def test_fused_multi_head_attention(need_weights):
    module = FusedMultiHeadAttention(4, 2, **F64)
    x, mask = randn(2, 3, 4), _mask(2, 3, 3)
    kwargs = {"mask": mask, "need_weights": need_weights}
    # First with whichever SDPA kernel torch picks. For need_weights=False on the CPU that is
    # flash attention, whose backward has no derivative of its own (no double backward; see the
    # note in FusedMultiHeadAttention's docstring), so gradgradcheck is skipped here...
    check_module_gradients(module, x, gradgrad=False, **kwargs)
    # ...and the second derivatives are checked through the math kernel, which has them.
    with sdpa_kernel(SDPBackend.MATH):
        check_module_gradients(module, x, **kwargs)


def test_feed_forward():
    check_module_gradients(FeedForward(4, 6, **F64), randn(2, 3, 4))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_transformer_block(norm_first):
    block = TransformerBlock(4, 2, ffn_dim=6, dropout=0.0, norm_first=norm_first, **F64)
    check_module_gradients(block, randn(2, 3, 4), _mask(2, 3, 3), need_weights=True)


def test_positional_encoding():
    # No parameters: check the input alone.
    pe = PositionalEncoding(5, max_len=4)
    x = randn(2, 3, 5, requires_grad=True)
    assert gradcheck(pe, (x,))
    assert gradgradcheck(pe, (x,))


def test_attention_classifier_with_respect_to_its_parameters():
    # Token ids are integers; the float inputs are the parameters, the embeddings among them.
    # The logits only: the weights of a padding *query* row depend on the padding embedding,
    # whose gradient nn.Embedding(padding_idx=...) sets to 0 by design (it is never trained),
    # and no logit depends on those rows.
    model = AttentionClassifier(
        6, 2, embed_dim=4, num_heads=2, num_layers=2, max_len=5, dropout=0.0
    ).double()
    tokens = torch.tensor([[1, 2, 3, 4, 0], [5, 1, 0, 0, 0]])
    check_module_gradients(model, tokens)
