"""The layers of a decoder: CausalSelfAttention (grouped-query, rotary, ALiBi, window) against
PyTorch in float64, DecoderConfig, and DecoderBlock with an attention plugged in."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from attention import (
    CausalSelfAttention,
    DecoderLM,
    MultiHeadAttention,
    alibi_bias,
    causal_mask,
)
from attention.config import DecoderConfig
from attention.decoder import DecoderBlock
from attention.masks import sliding_window_mask

from .helpers import DECODER_OPTIONS as OPTIONS
from .helpers import DECODER_SIZES, KV_HEADS, assert_close, check_module_gradients, randn
from .helpers import small_causal_attention as _attn

E, H, N, L = DECODER_SIZES


def _projections(attn, x):
    """q (N, H, L, D), k and v (N, H_kv, L, D), projected as the module does, by hand."""
    D = attn.head_dim
    q = (x @ attn.q_proj.weight.T).view(N, -1, H, D).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T).view(N, -1, attn.num_kv_heads, D).transpose(1, 2)
    v = (x @ attn.v_proj.weight.T).view(N, -1, attn.num_kv_heads, D).transpose(1, 2)
    return q, k, v


# --- CausalSelfAttention against PyTorch -----------------------------------------------------


@pytest.mark.parametrize("num_kv_heads", KV_HEADS)
@pytest.mark.parametrize("need_weights", [False, True])
def test_equals_sdpa_with_enable_gqa(num_kv_heads, need_weights):
    attn = _attn(num_kv_heads)
    x = randn(N, L, E)
    q, k, v = _projections(attn, x)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = attn.out_proj(expected.transpose(1, 2).reshape(N, L, E))
    out, weights = attn(x, need_weights=need_weights)
    assert_close(out, expected)
    assert (weights is None) != need_weights


@pytest.mark.parametrize("num_kv_heads", KV_HEADS)
def test_equals_multi_head_attention_with_repeated_key_value_heads(num_kv_heads):
    attn = _attn(num_kv_heads)
    mha = MultiHeadAttention(E, H, bias=False, dtype=torch.float64)
    G, D = H // num_kv_heads, attn.head_dim
    with torch.no_grad():
        mha.q_proj.weight.copy_(attn.q_proj.weight)
        mha.out_proj.weight.copy_(attn.out_proj.weight)
        for ours, theirs in ((attn.k_proj, mha.k_proj), (attn.v_proj, mha.v_proj)):
            # Key/value head g serves query heads g G .. g G + G - 1: repeat its rows G times.
            w = ours.weight.view(num_kv_heads, D, E).repeat_interleave(G, dim=0)  # (H, D, E)
            theirs.weight.copy_(w.reshape(E, E))
    x = randn(N, L, E)
    out, weights = attn(x, need_weights=True)
    expected, expected_weights = mha(x, mask=causal_mask(L))
    assert_close(out, expected)
    assert_close(weights, expected_weights)


def test_equals_nn_multihead_attention_under_a_causal_mask():
    attn = _attn(H, bias=True)
    torch_mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        projections = (attn.q_proj, attn.k_proj, attn.v_proj)
        for proj, w, b in zip(
            projections,
            torch_mha.in_proj_weight.chunk(3),
            torch_mha.in_proj_bias.chunk(3),
            strict=True,
        ):
            proj.weight.copy_(w)
            proj.bias.copy_(b)
        attn.out_proj.load_state_dict(torch_mha.out_proj.state_dict())
    x = randn(N, L, E)
    blocked = torch.ones(L, L, dtype=torch.bool).triu(1)  # nn.MHA's polarity, written by hand
    expected, expected_weights = torch_mha(x, x, x, attn_mask=blocked, average_attn_weights=False)
    out, weights = attn(x, need_weights=True)
    assert_close(out, expected)
    assert_close(weights, expected_weights)
    assert_close(attn(x)[0], expected)


@pytest.mark.parametrize("name", OPTIONS)
@pytest.mark.parametrize("num_kv_heads", KV_HEADS)
def test_both_paths_agree_and_match_sdpa_with_the_options(name, num_kv_heads):
    attn = _attn(num_kv_heads, max_len=16, **OPTIONS[name])
    x = randn(N, L, E)
    q, k, v = _projections(attn, x)
    if attn.rotary is not None:
        q, k = attn.rotary(q), attn.rotary(k)
    mask = sliding_window_mask(L, 3) if attn.window else causal_mask(L)
    attn_mask = mask
    if attn.alibi:
        attn_mask = alibi_bias(H, L, dtype=x.dtype).masked_fill(~mask, -math.inf)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=True)
    expected = attn.out_proj(expected.transpose(1, 2).reshape(N, L, E))
    assert_close(attn(x)[0], expected)
    out, weights = attn(x, need_weights=True)
    assert_close(out, expected)
    assert torch.equal(weights != 0, mask.expand(N, H, L, L))


@given(
    heads=st.sampled_from([(1, 1), (2, 1), (4, 2), (6, 3), (6, 1)]),
    L=st.integers(1, 9),
    window=st.one_of(st.none(), st.integers(1, 10)),
)
def test_property_matches_sdpa_for_any_heads_and_lengths(heads, L, window):
    H_, H_kv = heads
    attn = CausalSelfAttention(
        6 * H_, H_, num_kv_heads=H_kv, window=window, dtype=torch.float64
    ).eval()
    x = randn(1, L, 6 * H_)
    k = attn.k_proj(x).view(1, L, H_kv, 6).transpose(1, 2)
    q = attn.q_proj(x).view(1, L, H_, 6).transpose(1, 2)
    v = attn.v_proj(x).view(1, L, H_kv, 6).transpose(1, 2)
    mask = causal_mask(L) if window is None else sliding_window_mask(L, window)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    expected = attn.out_proj(expected.transpose(1, 2).reshape(1, L, 6 * H_))
    out, weights = attn(x, need_weights=True)
    assert_close(out, expected)
    assert_close(weights.sum(-1), torch.ones(1, H_, L, dtype=torch.float64))


@pytest.mark.parametrize("name", OPTIONS)
def test_later_tokens_never_change_earlier_outputs(name):
    attn = _attn(2, max_len=16, **OPTIONS[name])
    x = randn(N, L, E)
    changed = x.clone()
    changed[:, 4:] = randn(N, L - 4, E)
    assert_close(attn(changed)[0][:, :4], attn(x)[0][:, :4])


def test_masking_does_not_depend_on_training_mode():
    attn = _attn(2)
    x = randn(N, L, E)
    assert_close(attn.train()(x)[0], attn.eval()(x)[0])


@pytest.mark.parametrize("name", ["plain", "all"])
@pytest.mark.parametrize("num_kv_heads", [4, 2])
def test_gradcheck_float64(name, num_kv_heads):
    attn = _attn(num_kv_heads, max_len=16, bias=True, **OPTIONS[name])
    check_module_gradients(attn, randn(1, 5, E), gradgrad=False)
    check_module_gradients(attn, randn(1, 5, E), gradgrad=False, need_weights=True)


def test_num_kv_heads_must_divide_num_heads():
    with pytest.raises(ValueError, match=r"num_kv_heads must divide num_heads.*=4.*=3"):
        CausalSelfAttention(16, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match=r"num_kv_heads must be at least 1; got 0"):
        CausalSelfAttention(16, 4, num_kv_heads=0)
    with pytest.raises(TypeError, match=r"num_kv_heads must be an int; got float"):
        CausalSelfAttention(16, 4, num_kv_heads=2.0)
    with pytest.raises(ValueError, match=r"num_kv_heads must divide"):
        DecoderLM(5, embed_dim=16, num_heads=4, num_layers=1, max_len=4, num_kv_heads=3)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match=r"window must be at least 1; got 0"):
        CausalSelfAttention(16, 4, window=0)
    with pytest.raises(TypeError, match=r"rotary must be a bool; got int"):
        CausalSelfAttention(16, 4, rotary=1)
    with pytest.raises(ValueError, match=r"head_dim must be even"):
        CausalSelfAttention(12, 4, rotary=True)
    with pytest.raises(ValueError, match=r"positions must be one of .*'rotary'.*; got 'rope'"):
        DecoderLM(5, embed_dim=16, num_heads=4, num_layers=1, max_len=4, positions="rope")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"dtype": torch.long},
            TypeError,
            r"dtype must be a floating-point dtype; got torch.int64",
        ),
        ({"dtype": "float32"}, TypeError, r"dtype must be a torch.dtype .*; got 'float32'"),
        ({"bias": "no"}, TypeError, r"bias must be a bool; got str"),
        ({"dropout": "a"}, TypeError, r"dropout must be a float in \[0, 1\); got str"),
        ({"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\); got 1.0"),
        ({"max_len": 0}, ValueError, r"max_len must be at least 1; got 0"),
    ],
)
def test_bad_constructor_arguments_are_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        CausalSelfAttention(16, 4, **kwargs)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"ffn_dim": 0}, ValueError, r"ffn_dim must be at least 1; got 0"),
        ({"dropout": "a"}, TypeError, r"dropout must be a float in \[0, 1\); got str"),
        ({"window": True}, TypeError, r"window must be an int; got bool"),
        ({"positions": None}, ValueError, r"positions must be one of"),
    ],
)
def test_bad_config_is_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        DecoderConfig(5, embed_dim=16, num_heads=4, num_layers=1, max_len=4, **kwargs)
    with pytest.raises(error, match=message):
        DecoderLM(5, embed_dim=16, num_heads=4, num_layers=1, max_len=4, **kwargs)


def test_config_fills_in_its_defaults_once():
    config = DecoderConfig(5, embed_dim=16, num_heads=4, num_layers=2, max_len=4)
    assert (config.num_kv_heads, config.ffn_dim, config.positions) == (4, 64, "learned")
    model = DecoderLM(5, embed_dim=16, num_heads=4, num_layers=2, max_len=4, ffn_dim=24)
    assert model.config.ffn_dim == 24 and model.blocks[1].ffn.linear1.out_features == 24
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_len = 8


@pytest.mark.parametrize(
    "x, error, message",
    [
        (torch.randn(2, 3, E, dtype=torch.float64), TypeError, r"x must have the same dtype"),
        (torch.randn(2, 3, E, dtype=torch.float16), TypeError, r"x must have the same dtype"),
        (torch.randn(2, 3, E, dtype=torch.bfloat16), TypeError, r"x must have the same dtype"),
        (torch.randn(2, 3, E, device="meta"), ValueError, r"x must be on the same device"),
        (torch.randn(2, 3, E + 1), ValueError, r"x's last dimension must equal embed_dim=16"),
        (torch.randn(3, E), ValueError, r"x must be 3-D"),
        (torch.ones(2, 3, E, dtype=torch.long), TypeError, r"x must be a floating-point tensor"),
    ],
)
def test_bad_inputs_are_refused_by_the_attention_and_the_block(x, error, message):
    attn = CausalSelfAttention(E, H)
    with pytest.raises(error, match=message):
        attn(x)
    with pytest.raises(error, match=message):
        DecoderBlock(attn, 32)(x)


def test_need_weights_must_be_a_bool():
    with pytest.raises(TypeError, match=r"need_weights must be a bool; got str"):
        CausalSelfAttention(E, H)(torch.randn(1, 2, E), need_weights="no")


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("num_kv_heads", [2, 1])
def test_float16_near_the_top_of_its_range_stays_finite(need_weights, num_kv_heads):
    # Queries and keys of 40 in every one of D = 64 features: q . k = 102400 overflows float16
    # (largest 65504), q . k / sqrt(D) = 12800 does not. Scaling the queries first keeps it
    # finite, as PyTorch's own kernel does.
    attn = CausalSelfAttention(128, 2, num_kv_heads=num_kv_heads, dtype=torch.float16)
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight.zero_()
            proj.weight[:, : proj.out_features].fill_diagonal_(1.0)
    x = torch.full((1, 3, 128), 40.0, dtype=torch.float16)
    q = attn.q_proj(x).view(1, 3, 2, 64).transpose(1, 2)
    k = attn.k_proj(x).view(1, 3, num_kv_heads, 64).transpose(1, 2)
    v = attn.v_proj(x).view(1, 3, num_kv_heads, 64).transpose(1, 2)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert expected.isfinite().all()
    out, weights = attn(x, need_weights=need_weights)
    assert out.isfinite().all()
    if need_weights:
        assert weights.isfinite().all()


class _LinearAttention(nn.Module):
    """A stand-in for a new attention variant, written outside the package: causal attention
    whose weights are a running average (no softmax). It keeps no cache."""

    positions = "none"

    def __init__(self, embed_dim):
        super().__init__()
        self.embed_dim, self.num_kv_heads, self.head_dim = embed_dim, 1, embed_dim
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    @classmethod
    def from_config(cls, config):
        return cls(config.embed_dim)

    def forward(self, x, *, cache=None, layer=0, need_weights=False):
        L = x.shape[1]
        weights = causal_mask(L).to(x.dtype) / torch.arange(1, L + 1, dtype=x.dtype)[:, None]
        out = self.out_proj(weights @ self.v_proj(x))  # (L, L) @ (N, L, E) -> (N, L, E)
        return out, (weights.expand(x.shape[0], 1, L, L) if need_weights else None)


def test_a_new_attention_plugs_into_the_block_and_the_model_unchanged():
    model = DecoderLM(
        7, embed_dim=8, num_heads=2, num_layers=2, max_len=6, attention=_LinearAttention.from_config
    )
    assert all(isinstance(block.self_attn, _LinearAttention) for block in model.blocks)
    logits, weights = model(torch.randint(7, (2, 5)), need_weights=True)
    assert logits.shape == (2, 5, 7) and weights[0].shape == (2, 1, 5, 5)
    assert model.generate(torch.tensor([[1, 2]]), 3, use_cache=False).shape == (1, 5)
    with pytest.raises(
        TypeError, match=r"attention must be a registered name or callable; got int"
    ):
        DecoderLM(7, embed_dim=8, num_heads=2, num_layers=1, max_len=6, attention=3)
    with pytest.raises(TypeError, match=r"_LinearAttention has no new_state\(\).*use_cache=False"):
        model.generate(torch.tensor([[1, 2]]), 3)
    with pytest.raises(TypeError, match=r"self_attn must be an nn.Module; got int"):
        DecoderBlock(3, 16)


class _IgnoresItsCache(CausalSelfAttention):
    """A variant that makes a state but never writes to it: without the contract's check,
    cached generation attends to a stale past and gives other tokens, silently."""

    def forward(self, x, *, cache=None, layer=0, need_weights=False):
        return super().forward(x, need_weights=need_weights)


@pytest.mark.parametrize("seed", range(3))
def test_a_layer_that_ignores_its_state_is_an_error_not_other_tokens(seed):
    torch.manual_seed(seed)
    model = DecoderLM(
        11, embed_dim=16, num_heads=4, num_layers=2, max_len=12, positions="rotary",
        attention=lambda config: _IgnoresItsCache.from_config(config),
    )  # fmt: skip
    prompt = torch.randint(11, (2, 3))
    assert model.generate(prompt, 5, use_cache=False).shape == (2, 8)
    with pytest.raises(ValueError, match=r"layer 0 of 2 did not write to the KVCache"):
        model.generate(prompt, 5)
    cache = model.new_cache(2)
    with pytest.raises(ValueError, match=r"did not write"):
        model(prompt, cache=cache)
    assert cache.length == 0  # the refused call left the cache as it was


def test_a_variant_must_apply_the_positions_the_config_names():
    class NoRotary(CausalSelfAttention):
        @classmethod
        def from_config(cls, config):
            return cls(config.embed_dim, config.num_heads)  # drops positions="rotary"

    with pytest.raises(ValueError, match=r"positions='rotary' needs each layer's attention to "
                       r"apply 'rotary' itself; NoRotary applies 'none'"):  # fmt: skip
        DecoderLM(11, embed_dim=16, num_heads=4, num_layers=1, max_len=8, positions="rotary",
                  attention=NoRotary.from_config)  # fmt: skip


def test_a_variant_is_chosen_by_its_registered_name_with_its_own_options():
    from attention.config import ATTENTIONS, DecoderConfig, register_attention

    assert ATTENTIONS["causal"] == CausalSelfAttention.from_config
    with pytest.raises(ValueError, match=r"attention must be one of \[.*'causal'.*\]"):
        DecoderConfig(11, embed_dim=16, num_heads=4, num_layers=1, max_len=8, attention="nope")
    with pytest.raises(ValueError, match=r"CausalSelfAttention takes its settings from the"):
        DecoderLM(11, embed_dim=16, num_heads=4, num_layers=1, max_len=8,
                  attention_options={"latent_dim": 4})  # fmt: skip
    with pytest.raises(TypeError, match=r"attention_options must be a mapping of names"):
        DecoderConfig(11, embed_dim=16, num_heads=4, num_layers=1, max_len=8, attention_options=3)
    with pytest.raises(ValueError, match=r"an attention named 'causal' is already registered"):
        register_attention("causal", lambda config: None)


@pytest.mark.parametrize("layer", ["x", -1, 1.5])
def test_the_layer_is_checked_without_a_cache_too(layer):
    attn = CausalSelfAttention(8, 2)
    with pytest.raises((TypeError, ValueError), match=r"layer must be"):
        attn(torch.zeros(1, 3, 8), layer=layer)
