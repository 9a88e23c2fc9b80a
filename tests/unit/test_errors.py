"""Bad input: a TypeError or ValueError, raised before any arithmetic, whose message names the
argument, what was expected and what arrived. And the empty sequence, which is not bad input.

Each message is matched on the argument's name and the expectation, not on exact wording.
"""

import pytest
import torch

from attention import (
    AttentionClassifier,
    FeedForward,
    FusedMultiHeadAttention,
    MultiHeadAttention,
    PositionalEncoding,
    SelfAttention,
    TransformerBlock,
    scaled_dot_product_attention,
    tiled_attention,
)

E = 8

# Every module that takes a batch-first (N, L, E) float sequence, with the name of the argument
# that sequence is passed as.
SEQUENCE_MODULES = {
    "SelfAttention": (lambda: SelfAttention(E), "x"),
    "MultiHeadAttention": (lambda: MultiHeadAttention(E, 2), "query"),
    "FusedMultiHeadAttention": (lambda: FusedMultiHeadAttention(E, 2), "query"),
    "FeedForward": (lambda: FeedForward(E, 16), "x"),
    "TransformerBlock-post-LN": (lambda: TransformerBlock(E, 2, ffn_dim=16), "x"),
    "TransformerBlock-pre-LN": (lambda: TransformerBlock(E, 2, ffn_dim=16, norm_first=True), "x"),
    "PositionalEncoding": (lambda: PositionalEncoding(E, max_len=8), "x"),
}
# The modules whose input must be exactly 3-D (FeedForward, like nn.Linear, is position-wise).
THREE_D_MODULES = {k: v for k, v in SEQUENCE_MODULES.items() if k != "FeedForward"}
MASKED_MODULES = {
    k: v for k, v in SEQUENCE_MODULES.items() if k.startswith(("Self", "Multi", "Fused", "Trans"))
}
# Constructors taking embed_dim and num_heads.
HEADED = {
    "MultiHeadAttention": lambda e, h, **kw: MultiHeadAttention(e, h, **kw),
    "FusedMultiHeadAttention": lambda e, h, **kw: FusedMultiHeadAttention(e, h, **kw),
    "TransformerBlock": lambda e, h, **kw: TransformerBlock(e, h, **kw),
    "AttentionClassifier": lambda e, h, **kw: AttentionClassifier(
        10, 2, embed_dim=e, num_heads=h, num_layers=1, max_len=8, **kw
    ),
}
# Constructors taking a dropout probability.
WITH_DROPOUT = {
    **HEADED,
    "FeedForward": lambda e, h, **kw: FeedForward(e, 16, **kw),
    "PositionalEncoding": lambda e, h, **kw: PositionalEncoding(e, **kw),
}


def _classifier():
    return AttentionClassifier(10, 2, embed_dim=E, num_heads=2, num_layers=1, max_len=4)


# --- constructors --------------------------------------------------------------------------


@pytest.mark.parametrize("make", HEADED.values(), ids=HEADED.keys())
def test_embed_dim_not_divisible_by_num_heads(make):
    with pytest.raises(ValueError, match=r"embed_dim must be divisible by num_heads.*=10.*=3"):
        make(10, 3)


@pytest.mark.parametrize("num_heads", [0, -2])
@pytest.mark.parametrize("make", HEADED.values(), ids=HEADED.keys())
def test_num_heads_below_one(make, num_heads):
    with pytest.raises(ValueError, match=rf"num_heads must be at least 1; got {num_heads}"):
        make(E, num_heads)


@pytest.mark.parametrize("make", HEADED.values(), ids=HEADED.keys())
def test_num_heads_not_an_int(make):
    with pytest.raises(TypeError, match=r"num_heads must be an int; got float"):
        make(E, 2.0)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
@pytest.mark.parametrize("make", WITH_DROPOUT.values(), ids=WITH_DROPOUT.keys())
def test_dropout_outside_zero_one(make, p):
    with pytest.raises(ValueError, match=rf"dropout must be in \[0, 1\); got {p}"):
        make(E, 2, dropout=p)


@pytest.mark.parametrize("make", WITH_DROPOUT.values(), ids=WITH_DROPOUT.keys())
def test_dropout_not_a_number(make):
    with pytest.raises(TypeError, match=r"dropout must be a float in \[0, 1\); got str"):
        make(E, 2, dropout="0.1")


def test_functional_dropout_outside_zero_one():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\); got 1.0"):
        scaled_dot_product_attention(q, q, q, dropout_p=1.0)


@pytest.mark.parametrize("embed_dim", [0, 2.5])
def test_self_attention_embed_dim_not_a_positive_int(embed_dim):
    with pytest.raises(ValueError, match=rf"embed_dim must be a positive int; got {embed_dim}"):
        SelfAttention(embed_dim)


@pytest.mark.parametrize("pad_id", [-1, 10])
def test_classifier_pad_id_outside_the_vocabulary(pad_id):
    with pytest.raises(ValueError, match=rf"pad_id must be in \[0, vocab_size=10\); got {pad_id}"):
        AttentionClassifier(10, 2, embed_dim=E, num_heads=2, num_layers=1, max_len=4, pad_id=pad_id)


# --- sequences -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, E), (1, 2, 3, E)], ids=["2d", "4d"])
@pytest.mark.parametrize("make, arg", THREE_D_MODULES.values(), ids=THREE_D_MODULES.keys())
def test_input_not_3d(make, arg, shape):
    got = f"{len(shape)}-D"
    with pytest.raises(ValueError, match=rf"\b{arg} must be 3-D; got {got}"):
        make()(torch.randn(*shape))


@pytest.mark.parametrize("make, arg", SEQUENCE_MODULES.values(), ids=SEQUENCE_MODULES.keys())
def test_last_dim_not_embed_dim(make, arg):
    with pytest.raises(ValueError, match=rf"\b{arg}\b.*last dimension.*embed_dim=8.*\(2, 3, 9\)"):
        make()(torch.randn(2, 3, E + 1))


@pytest.mark.parametrize("make, arg", SEQUENCE_MODULES.values(), ids=SEQUENCE_MODULES.keys())
def test_input_not_floating_point(make, arg):
    with pytest.raises(
        TypeError, match=rf"\b{arg} must be a floating-point tensor; got torch.int64"
    ):
        make()(torch.ones(2, 3, E, dtype=torch.long))


@pytest.mark.parametrize("make, arg", SEQUENCE_MODULES.values(), ids=SEQUENCE_MODULES.keys())
def test_input_not_a_tensor(make, arg):
    with pytest.raises(TypeError, match=rf"\b{arg} must be a torch.Tensor; got list"):
        make()([[[0.0] * E]])


@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
def test_key_last_dim_not_embed_dim(cls):
    with pytest.raises(ValueError, match=r"key's last dimension must equal embed_dim=8"):
        cls(E, 2)(torch.randn(2, 3, E), torch.randn(2, 4, E + 1))


@pytest.mark.parametrize("which", ["key", "value"])
@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
def test_key_or_value_batch_mismatch(cls, which):
    query, memory, other = torch.randn(2, 3, E), torch.randn(2, 4, E), torch.randn(5, 4, E)
    key, value = (other, memory) if which == "key" else (memory, other)
    with pytest.raises(ValueError, match=rf"{which} must have the same batch size as query \(2\)"):
        cls(E, 2)(query, key, value)


@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
def test_key_value_length_mismatch(cls):
    query, key, value = torch.randn(2, 3, E), torch.randn(2, 4, E), torch.randn(2, 6, E)
    with pytest.raises(ValueError, match=r"key and value must have the same length S"):
        cls(E, 2)(query, key, value)


@pytest.mark.parametrize("fn", [scaled_dot_product_attention, tiled_attention])
def test_functional_query_key_head_dim_mismatch(fn):
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 6), torch.randn(2, 5, 6)
    with pytest.raises(ValueError, match=r"query and key must have the same head dimension D"):
        fn(q, k, v)


@pytest.mark.parametrize("fn", [scaled_dot_product_attention, tiled_attention])
def test_functional_key_value_length_mismatch(fn):
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 6, 4)
    with pytest.raises(ValueError, match=r"key and value must have the same length S"):
        fn(q, k, v)


@pytest.mark.parametrize("fn", [scaled_dot_product_attention, tiled_attention])
def test_functional_batch_dims_do_not_broadcast(fn):
    q, k, v = torch.randn(2, 3, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 4)
    with pytest.raises(ValueError, match=r"batch dimensions.*do not broadcast"):
        fn(q, k, v)


@pytest.mark.parametrize("fn", [scaled_dot_product_attention, tiled_attention])
def test_functional_input_with_fewer_than_two_dims(fn):
    with pytest.raises(
        ValueError, match=r"query must have at least 2 dimensions; got shape \(4,\)"
    ):
        fn(torch.randn(4), torch.randn(3, 4), torch.randn(3, 4))


# --- masks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_dtype", [torch.float32, torch.int64, torch.uint8])
@pytest.mark.parametrize("make, arg", MASKED_MODULES.values(), ids=MASKED_MODULES.keys())
def test_module_mask_not_bool(make, arg, mask_dtype):
    mask = torch.ones(3, 3, dtype=mask_dtype)
    with pytest.raises(TypeError, match=rf"mask must be a bool.*got {mask_dtype}.*mask\.bool\(\)"):
        make()(torch.randn(2, 3, E), mask=mask)


@pytest.mark.parametrize("need_weights", [True, False])
def test_fused_fast_path_mask_not_bool(need_weights):
    # need_weights=False hands the mask to torch's SDPA, which would add a float mask to the
    # scores: it must be refused first.
    with pytest.raises(TypeError, match=r"mask must be a bool.*mask\.bool\(\)"):
        FusedMultiHeadAttention(E, 2)(
            torch.randn(2, 3, E), mask=torch.zeros(3, 3), need_weights=need_weights
        )


def test_functional_mask_not_bool():
    q = torch.randn(2, 3, 4)
    with pytest.raises(TypeError, match=r"mask must be a bool.*mask\.bool\(\)"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 3))


def test_mask_not_a_tensor():
    with pytest.raises(TypeError, match=r"mask must be a bool torch.Tensor"):
        MultiHeadAttention(E, 2)(torch.randn(2, 3, E), mask=[[True] * 3] * 3)


@pytest.mark.parametrize("shape", [(4, 3), (3, 2), (3, 2, 3, 3), (2, 3, 3, 3), (1, 2, 2, 3, 3)])
@pytest.mark.parametrize("make, arg", MASKED_MODULES.values(), ids=MASKED_MODULES.keys())
def test_module_mask_not_broadcastable(make, arg, shape):
    mask = torch.ones(*shape, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"mask of shape .* does not broadcast to \(2, \d, 3, 3\)"):
        make()(torch.randn(2, 3, E), mask=mask)


def test_cross_attention_mask_must_be_L_by_S():
    query, memory = torch.randn(2, 3, E), torch.randn(2, 5, E)
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3\) does not broadcast to"):
        MultiHeadAttention(E, 2)(query, memory, mask=torch.ones(3, 3, dtype=torch.bool))


def test_functional_mask_not_broadcastable():
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    with pytest.raises(
        ValueError, match=r"mask of shape \(3, 3\) does not broadcast to \(2, 3, 5\)"
    ):
        scaled_dot_product_attention(q, k, k, torch.ones(3, 3, dtype=torch.bool))


# --- tokens and lengths --------------------------------------------------------------------


def test_float_token_ids():
    with pytest.raises(TypeError, match=r"tokens must be an integer tensor; got torch.float32"):
        _classifier()(torch.ones(2, 3))


def test_bool_token_ids():
    with pytest.raises(TypeError, match=r"tokens must be an integer tensor; got torch.bool"):
        _classifier()(torch.ones(2, 3, dtype=torch.bool))


def test_token_ids_not_2d():
    with pytest.raises(ValueError, match=r"tokens must be 2-D \(N, L\); got shape \(3,\)"):
        _classifier()(torch.ones(3, dtype=torch.long))


@pytest.mark.parametrize("bad_id", [10, -1])
def test_token_ids_outside_the_vocabulary(bad_id):
    tokens = torch.tensor([[1, 2, bad_id]])
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, vocab_size=10\)"):
        _classifier()(tokens)


def test_classifier_sequence_longer_than_max_len():
    with pytest.raises(ValueError, match=r"sequence length 5 is longer than max_len=4"):
        _classifier()(torch.ones(2, 5, dtype=torch.long))


def test_positional_encoding_sequence_longer_than_max_len():
    with pytest.raises(ValueError, match=r"sequence length 9 is longer than max_len=8"):
        PositionalEncoding(E, max_len=8)(torch.randn(2, 9, E))


# --- the empty sequence is not an error ----------------------------------------------------


@pytest.mark.parametrize("make, arg", SEQUENCE_MODULES.values(), ids=SEQUENCE_MODULES.keys())
def test_empty_sequence_gives_an_empty_output(make, arg):
    out = make()(torch.randn(2, 0, E))
    out = out[0] if isinstance(out, tuple) else out
    assert out.shape == (2, 0, E)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
def test_empty_query_sequence_in_cross_attention(cls, need_weights):
    out, weights = cls(E, 2)(torch.randn(2, 0, E), torch.randn(2, 4, E), need_weights=need_weights)
    assert out.shape == (2, 0, E)
    assert weights is None if not need_weights else weights.shape == (2, 2, 0, 4)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
def test_empty_key_sequence_gives_zero_attention(cls, need_weights):
    mha = cls(E, 2, bias=False)
    out, weights = mha(torch.randn(2, 3, E), torch.randn(2, 0, E), need_weights=need_weights)
    assert torch.equal(out, torch.zeros(2, 3, E))


def test_empty_sequence_in_the_functional_paths():
    q, k = torch.randn(2, 0, 4), torch.randn(2, 5, 4)
    out, weights = scaled_dot_product_attention(q, k, k)
    assert out.shape == (2, 0, 4) and weights.shape == (2, 0, 5)
    assert tiled_attention(q, k, k, block_size=2).shape == (2, 0, 4)
    assert tiled_attention(q, k, k, causal=True).shape == (2, 0, 4)
    # No keys at all: every query row has nothing to attend to, so the output is 0.
    out, weights = scaled_dot_product_attention(k, q, q)
    assert torch.equal(out, torch.zeros(2, 5, 4)) and weights.shape == (2, 5, 0)
    assert torch.equal(tiled_attention(k, q, q), torch.zeros(2, 5, 4))


@pytest.mark.parametrize("need_weights", [True, False])
def test_empty_sequence_in_the_classifier(need_weights):
    model = _classifier()
    logits, weights = model(torch.zeros(2, 0, dtype=torch.long), need_weights=need_weights)
    assert logits.shape == (2, 2) and logits.isfinite().all()
    if need_weights:
        assert [w.shape for w in weights] == [(2, 2, 0, 0)]
