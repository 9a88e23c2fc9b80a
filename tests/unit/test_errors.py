"""Bad input: a TypeError or ValueError, raised before any arithmetic, whose message names the
argument, what was expected and what arrived. And the empty sequence, which is not bad input.

Each message is matched on the argument's name and the expectation, not on exact wording.
"""

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from attention import (
    AttentionClassifier,
    FeedForward,
    FusedMultiHeadAttention,
    MultiHeadAttention,
    PositionalEncoding,
    SelfAttention,
    TransformerBlock,
    padding_mask,
    plot_attention,
    scaled_dot_product_attention,
    tiled_attention,
)
from attention.data import decode, make_dataset
from attention.masks import from_torch_masks, to_torch_attn_mask, to_torch_key_padding_mask
from attention.recipes import fit_sentiment_classifier
from attention.training import accuracy, count_parameters, train_classifier

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
# PositionalEncoding has no parameters: it adds its table in the input's dtype.
WITH_PARAMETERS = {k: v for k, v in SEQUENCE_MODULES.items() if k != "PositionalEncoding"}
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


def test_self_attention_embed_dim_below_one():
    with pytest.raises(ValueError, match=r"embed_dim must be at least 1; got 0"):
        SelfAttention(0)


@pytest.mark.parametrize("embed_dim", [2.5, "8", True])
def test_self_attention_embed_dim_not_an_int(embed_dim):
    # One rule for every module: a wrong type is a TypeError, as in MultiHeadAttention('8', 2).
    with pytest.raises(TypeError, match=r"embed_dim must be an int; got (float|str|bool)"):
        SelfAttention(embed_dim)
    with pytest.raises(TypeError, match=r"embed_dim must be an int"):
        MultiHeadAttention(embed_dim, 2)


@pytest.mark.parametrize(
    "pad_id, error, match",
    [
        (-1, ValueError, r"pad_id must be non-negative; got -1"),
        (10, ValueError, r"pad_id must be in \[0, vocab_size=10\); got 10"),
        (None, TypeError, r"pad_id must be an int; got NoneType"),
        (1.5, TypeError, r"pad_id must be an int; got float"),
    ],
)
def test_classifier_pad_id(pad_id, error, match):
    with pytest.raises(error, match=match):
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.uint8, torch.int16, torch.int8])
def test_token_ids_of_a_dtype_nn_embedding_refuses(dtype):
    # uint8 and int16 are integers, but nn.Embedding takes int64 and int32 only.
    with pytest.raises(
        TypeError, match=rf"tokens must be an integer tensor \(int64 or int32\); got {dtype}"
    ):
        _classifier()(torch.ones(2, 3, dtype=dtype))


def test_int32_token_ids_are_accepted():
    tokens = torch.tensor([[1, 2, 0]])
    model = _classifier().eval()
    assert torch.equal(model(tokens.int())[0], model(tokens)[0])


def test_token_ids_on_another_device():
    with pytest.raises(ValueError, match=r"tokens must be on the model's device \(cpu\); got meta"):
        _classifier()(torch.ones(2, 3, dtype=torch.long, device="meta"))


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


# --- dtypes and devices --------------------------------------------------------------------


@pytest.mark.parametrize("which", ["key", "value"])
@pytest.mark.parametrize("fn", [scaled_dot_product_attention, tiled_attention])
def test_functional_mixed_dtypes(fn, which):
    q = torch.randn(2, 3, 4)
    inputs = {"query": q, "key": q, "value": q, which: q.double()}
    with pytest.raises(
        TypeError,
        match=rf"{which} must have the same dtype as query \(torch.float32\); got "
        r"torch.float64",
    ):
        fn(**inputs)


@pytest.mark.parametrize("fn", [scaled_dot_product_attention, tiled_attention])
def test_functional_inputs_on_different_devices(fn):
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"key must be on the same device as query \(cpu\)"):
        fn(q, q.to("meta"), q)


@pytest.mark.parametrize("make, arg", WITH_PARAMETERS.values(), ids=WITH_PARAMETERS.keys())
def test_module_input_of_another_dtype(make, arg):
    # float64 into a float32 module used to fail inside matmul ("expected scalar type Float").
    with pytest.raises(
        TypeError,
        match=rf"\b{arg} must have the same dtype as the module's parameters \(torch.float32\); "
        r"got torch.float64",
    ):
        make()(torch.randn(2, 3, E, dtype=torch.float64))


@pytest.mark.parametrize("cls", [MultiHeadAttention, FusedMultiHeadAttention])
def test_module_key_of_another_dtype(cls):
    x = torch.randn(2, 3, E)
    with pytest.raises(TypeError, match=r"key must have the same dtype as the module's"):
        cls(E, 2)(x, x.double(), x)


def test_module_input_under_autocast_may_differ_in_dtype():
    # Autocast feeds bfloat16 activations into float32 modules: that is not an error.
    block = TransformerBlock(E, 2, ffn_dim=16, dropout=0.0).eval()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = block(torch.randn(2, 3, E, dtype=torch.bfloat16))
    assert out.shape == (2, 3, E) and out.isfinite().all()


@pytest.mark.parametrize("make, arg", MASKED_MODULES.values(), ids=MASKED_MODULES.keys())
def test_module_mask_on_another_device(make, arg):
    mask = torch.ones(3, 3, dtype=torch.bool, device="meta")
    with pytest.raises(ValueError, match=r"mask must be on the same device as the inputs \(cpu\)"):
        make()(torch.randn(2, 3, E), mask=mask)


def test_fused_fast_path_mask_on_another_device():
    # A meta mask on the need_weights=False path used to return uninitialised memory silently.
    mask = torch.ones(3, 3, dtype=torch.bool, device="meta")
    with pytest.raises(ValueError, match=r"mask must be on the same device as the inputs \(cpu\)"):
        FusedMultiHeadAttention(E, 2)(torch.randn(2, 3, E), mask=mask, need_weights=False)


def test_functional_mask_on_another_device():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"mask must be on the same device as the inputs"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 3, dtype=torch.bool, device="meta"))


# --- numbers: scale, eps, norm_first, max_len ----------------------------------------------


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), 0.0, -1.0])
@pytest.mark.parametrize("fn", [scaled_dot_product_attention, tiled_attention])
def test_scale_not_a_positive_finite_number(fn, scale):
    # nan used to pass the "positive" check (nan <= 0 is False) and give all-NaN output.
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=rf"scale must be a positive finite number; got {scale}"):
        fn(q, q, q, scale=scale)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"layer_norm_eps": -1}, ValueError, r"layer_norm_eps must be a positive finite number"),
        ({"layer_norm_eps": 0.0}, ValueError, r"layer_norm_eps must be a positive finite number"),
        ({"layer_norm_eps": float("nan")}, ValueError, r"layer_norm_eps .* got nan"),
        ({"layer_norm_eps": "1e-5"}, TypeError, r"layer_norm_eps .*; got str"),
        ({"norm_first": "no"}, TypeError, r"norm_first must be a bool; got str"),
        ({"norm_first": 0}, TypeError, r"norm_first must be a bool; got int"),
        ({"bias": None}, TypeError, r"bias must be a bool; got NoneType"),
    ],
)
def test_transformer_block_arguments(kwargs, error, match):
    # Checked at construction: eps=-1 used to give NaN and norm_first='no' the pre-LN branch.
    with pytest.raises(error, match=match):
        TransformerBlock(E, 2, ffn_dim=16, **kwargs)


@pytest.mark.parametrize(
    "max_len, error, match",
    [
        (-1, ValueError, r"max_len must be at least 1; got -1"),
        (0, ValueError, r"max_len must be at least 1; got 0"),
        (2.5, TypeError, r"max_len must be an int; got float"),
    ],
)
def test_positional_encoding_max_len(max_len, error, match):
    with pytest.raises(error, match=match):
        PositionalEncoding(E, max_len=max_len)


# --- mask helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lengths, error, match",
    [
        (None, TypeError, r"lengths must be a 1-D integer tensor or a list of ints; got NoneType"),
        ("ab", TypeError, r"lengths must be a 1-D integer tensor or a list of ints; got str"),
        ([1.5], TypeError, r"lengths must be .* a list of ints; got \[1.5\]"),
    ],
)
def test_padding_mask_lengths_of_the_wrong_type(lengths, error, match):
    with pytest.raises(error, match=match):
        padding_mask(lengths, 4)


@pytest.mark.parametrize("convert", [to_torch_key_padding_mask, to_torch_attn_mask])
def test_mask_converters_refuse_none(convert):
    with pytest.raises(TypeError, match=r"mask must be a bool torch.Tensor .*; got None"):
        convert(None)


def test_from_torch_masks_that_do_not_broadcast():
    attn_mask = torch.zeros(3, 4, dtype=torch.bool)  # (L, S) with S = 4
    key_padding_mask = torch.zeros(2, 5, dtype=torch.bool)  # (N, S) with S = 5
    with pytest.raises(
        ValueError,
        match=r"attn_mask of shape \(3, 4\) and key_padding_mask of shape \(2, 5\) "
        r"do not broadcast",
    ):
        from_torch_masks(attn_mask, key_padding_mask)


# --- plot_attention ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (0, 3, 4), (2, 0, 4)])
def test_plot_attention_with_nothing_to_draw(shape):
    with pytest.raises(ValueError, match=r"weights has nothing to draw; got shape"):
        plot_attention(torch.rand(*shape))


def test_plot_attention_title_not_a_string():
    with pytest.raises(TypeError, match=r"title must be a str or None; got int"):
        plot_attention(torch.rand(2, 3), title=3)
    plt.close("all")


# --- data and training helpers -------------------------------------------------------------


@pytest.mark.parametrize(
    "ids, error, match",
    [
        ([1, -1], ValueError, r"ids must lie in \[0, len\(VOCAB\)=24\); got \[-1\]"),
        (torch.tensor([1, 99]), ValueError, r"ids must lie in .*; got \[99\]"),
        ([1.0], TypeError, r"ids must be a 1-D integer tensor or a list of ints"),
        (torch.tensor([1.0]), TypeError, r"ids must be a 1-D integer tensor or a list of ints"),
    ],
)
def test_decode_bad_ids(ids, error, match):
    # A negative id used to index VOCAB from the end and return a word silently.
    with pytest.raises(error, match=match):
        decode(ids)


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((-1,), {}, ValueError, r"n must be non-negative; got -1"),
        ((2.0,), {}, TypeError, r"n must be an int; got float"),
        ((4,), {"seed": "1"}, TypeError, r"seed must be an int; got str"),
        ((4,), {"min_len": 2}, ValueError, r"need 3 <= min_len <= max_len; got min_len=2"),
    ],
)
def test_make_dataset_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        make_dataset(*args, **kwargs)


def _tiny_model():
    return AttentionClassifier(25, 2, embed_dim=8, num_heads=2, num_layers=1, max_len=12)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"epochs": 0}, ValueError, r"epochs must be at least 1; got 0"),
        ({"batch_size": 0}, ValueError, r"batch_size must be at least 1; got 0"),
        ({"batch_size": -4}, ValueError, r"batch_size must be at least 1; got -4"),
        ({"batch_size": 8.0}, TypeError, r"batch_size must be an int; got float"),
        ({"lr": float("nan")}, ValueError, r"lr must be a positive finite number; got nan"),
    ],
)
def test_train_classifier_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        train_classifier(_tiny_model(), *make_dataset(8), **kwargs)


def test_train_classifier_labels_of_another_length():
    tokens, labels = make_dataset(8)
    with pytest.raises(ValueError, match=r"labels must be 1-D with one label per sequence .*\(8\)"):
        train_classifier(_tiny_model(), tokens, labels[:5])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"epochs": 0}, ValueError, r"epochs must be at least 1; got 0"),
        ({"seed": "0"}, TypeError, r"seed must be an int; got str"),
    ],
)
def test_fit_sentiment_classifier_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        fit_sentiment_classifier(**kwargs)


def test_accuracy_on_an_empty_set():
    # Used to return NaN.
    empty = torch.zeros(0, 12, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    with pytest.raises(ValueError, match=r"tokens must hold at least one sequence; got 0"):
        accuracy(_tiny_model(), *empty)


def test_accuracy_restores_the_training_flag_when_forward_raises():
    model = _tiny_model().train()
    tokens = torch.full((2, 12), 99)  # ids outside the vocabulary: forward raises
    with pytest.raises(ValueError, match=r"token ids must lie in"):
        accuracy(model, tokens, torch.zeros(2, dtype=torch.long))
    assert model.training


def test_count_parameters_of_something_else():
    with pytest.raises(TypeError, match=r"module must be an nn.Module; got list"):
        count_parameters([nn.Linear(2, 2)])


def test_sampling_distribution_over_no_tokens_is_refused():
    # amax over an empty last dimension raised IndexError from inside torch.
    from attention.language_model import sampling_distribution

    with pytest.raises(ValueError, match=r"logits must score at least one token \(V >= 1\)"):
        sampling_distribution(torch.zeros(2, 0))
