"""Decoder-only attention: CausalSelfAttention (grouped-query, rotary, ALiBi, window), KVCache,
DecoderLM and its generation, the repeated-sequence data and the language-model training loop.

Golden tests run in float64 against torch.nn.functional.scaled_dot_product_attention (with
``enable_gqa=True``), this package's MultiHeadAttention and nn.MultiheadAttention; cached and
uncached computations must agree position by position.
"""

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
    KVCache,
    MultiHeadAttention,
    alibi_bias,
    causal_mask,
)
from attention.data import make_repeated_sequences
from attention.decoder import grouped_attention
from attention.masks import sliding_window_mask
from attention.training import fit_repeat_model, next_token_losses, train_lm

from .helpers import assert_close, check_module_gradients, randn

E, H, N, L = 16, 4, 2, 7
KV_HEADS = [4, 2, 1]  # H, H/2 and 1: multi-head, grouped-query and multi-query attention
OPTIONS = {
    "plain": {},
    "rotary": {"rotary": True},
    "alibi": {"alibi": True},
    "window": {"window": 3},
    "all": {"rotary": True, "alibi": True, "window": 3},
}


def _attn(num_kv_heads=None, dtype=torch.float64, **kwargs):
    return CausalSelfAttention(E, H, num_kv_heads=num_kv_heads, dtype=dtype, **kwargs).eval()


def _projections(attn, x):
    """q (N, H, L, D), k and v (N, H_kv, L, D), projected as the module does, by hand."""
    D = attn.head_dim
    q = (x @ attn.q_proj.weight.T).view(N, -1, H, D).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T).view(N, -1, attn.num_kv_heads, D).transpose(1, 2)
    v = (x @ attn.v_proj.weight.T).view(N, -1, attn.num_kv_heads, D).transpose(1, 2)
    return q, k, v


def _lm(positions="learned", num_kv_heads=None, dtype=torch.float64, **kwargs):
    model = DecoderLM(
        11, embed_dim=E, num_heads=H, num_layers=2, max_len=12, num_kv_heads=num_kv_heads,
        positions=positions, **kwargs,
    )  # fmt: skip
    return model.to(dtype).eval()


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


def test_grouped_attention_serves_consecutive_query_heads_from_one_key_head():
    q, k, v = randn(1, 4, 3, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8)
    mask = causal_mask(3, 5)
    out, weights = grouped_attention(q, k, v, mask)
    for h in range(4):
        expected = F.scaled_dot_product_attention(q[:, h], k[:, h // 2], v[:, h // 2], mask)
        assert_close(out[:, h], expected)
    assert_close(weights.sum(-1), torch.ones(1, 4, 3, dtype=torch.float64))


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


# --- the cache -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", OPTIONS)
@pytest.mark.parametrize("num_kv_heads", KV_HEADS)
def test_cached_attention_equals_uncached_chunk_by_chunk(name, num_kv_heads):
    attn = _attn(num_kv_heads, max_len=16, **OPTIONS[name])
    x = randn(N, 10, E)
    full, full_weights = attn(x, need_weights=True)
    cache = KVCache(
        1, batch_size=N, num_kv_heads=num_kv_heads, head_dim=attn.head_dim, max_len=10,
        dtype=torch.float64,
    )  # fmt: skip
    start = 0
    for size in (3, 1, 1, 2, 1, 2):  # a prompt, then tokens one or two at a time
        out, weights = attn(x[:, start : start + size], cache=cache, need_weights=True)
        S = start + size
        assert cache.length == S and weights.shape == (N, H, size, S)
        assert_close(out, full[:, start:S])
        assert_close(weights, full_weights[:, :, start:S, :S])
        fast, _ = attn(x[:, start:S], cache=_filled(attn, x[:, :start]))
        assert_close(fast, full[:, start:S])
        start = S


def _filled(attn, prefix):
    """A fresh cache holding ``prefix``'s keys and values."""
    cache = KVCache(
        1, batch_size=N, num_kv_heads=attn.num_kv_heads, head_dim=attn.head_dim, max_len=10,
        dtype=prefix.dtype,
    )  # fmt: skip
    if prefix.shape[1]:
        attn(prefix, cache=cache)
    return cache


def test_causal_mask_is_bottom_right_aligned_with_a_cache():
    attn = _attn(2)
    x = randn(N, 6, E)
    cache = _filled(attn, x[:, :4])
    _, weights = attn(x[:, 4:], cache=cache, need_weights=True)  # L = 2 queries, S = 6 keys
    allowed = weights != 0  # (N, H, 2, 6)
    assert torch.equal(allowed, causal_mask(2, 6).expand(N, H, 2, 6))
    assert allowed[..., 0, :5].all() and not allowed[..., 0, 5].any()


def test_cache_layout_bytes_reset_and_crop():
    cache = KVCache(3, batch_size=2, num_kv_heads=2, head_dim=4, max_len=5, dtype=torch.float16)
    assert cache.keys[0].shape == (2, 2, 5, 4)  # (N, H_kv, max_len, D) per layer
    assert cache.nbytes == 2 * 3 * 2 * 2 * 5 * 4 * 2
    new = torch.ones(2, 2, 3, 4, dtype=torch.float16)
    for layer in range(3):
        assert cache.length == 0  # grows when the last layer has written
        keys, values = cache.update(layer, new, 2 * new)
        assert keys.shape == (2, 2, 3, 4) and torch.equal(values, 2 * new)
    assert cache.length == 3
    cache.crop(1)
    assert cache.length == 1
    keys, _ = cache.update(0, 3 * new[:, :, :2], new[:, :, :2])
    assert torch.equal(keys[:, :, 1:], 3 * new[:, :, :2]) and torch.equal(
        keys[:, :, :1], new[:, :, :1]
    )
    cache.reset()
    assert cache.length == 0 and cache.nbytes == 2 * 3 * 2 * 2 * 5 * 4 * 2


def test_cache_refuses_to_grow_past_max_len():
    cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
    cache.update(0, torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
    with pytest.raises(ValueError, match=r"KVCache is full: it holds 3 of max_len=4.*2 more"):
        cache.update(0, torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))
    assert cache.length == 3  # nothing was written
    attn = CausalSelfAttention(4, 2, num_kv_heads=1)
    with pytest.raises(ValueError, match=r"KVCache is full"):
        attn(torch.randn(1, 2, 4), cache=cache)


# --- the language model ----------------------------------------------------------------------


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rotary", "alibi", "none"])
@pytest.mark.parametrize("num_kv_heads", [4, 1])
def test_lm_logits_with_a_cache_equal_the_full_pass_token_by_token(positions, num_kv_heads):
    model = _lm(positions, num_kv_heads, window=4 if positions == "rotary" else None)
    tokens = torch.randint(11, (N, 9))
    full, full_weights = model(tokens, need_weights=True)
    cache = model.new_cache(N)
    logits, weights = model(tokens[:, :5], cache=cache, need_weights=True)
    assert_close(logits, full[:, :5])
    for t in range(5, 9):
        logits, weights = model(tokens[:, t : t + 1], cache=cache, need_weights=True)
        assert_close(logits, full[:, t : t + 1])
        for w, fw in zip(weights, full_weights, strict=True):
            assert_close(w, fw[:, :, t : t + 1, : t + 1])
    assert cache.length == 9


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rotary", "alibi", "none"])
def test_generation_with_and_without_the_cache_gives_the_same_tokens(positions):
    torch.manual_seed(1)
    model = _lm(positions, 2, dtype=torch.float32, window=3 if positions == "alibi" else None)
    prompt = torch.randint(11, (3, 4))
    cached = model.generate(prompt, 8)
    assert cached.shape == (3, 12) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, model.generate(prompt, 8, use_cache=False))
    # Greedy: each new token is the argmax of the full pass over the tokens before it.
    logits, _ = model(cached[:, :-1])
    assert torch.equal(logits[:, 3:].argmax(-1), cached[:, 4:])


def test_sampling_is_reproducible_from_the_generator_and_top_k_1_is_greedy():
    model = _lm(dtype=torch.float32)
    prompt = torch.randint(11, (4, 2))

    def sample(seed, **kwargs):
        g = torch.Generator().manual_seed(seed)
        return model.generate(prompt, 9, temperature=1.0, generator=g, **kwargs)

    assert torch.equal(sample(0), sample(0))
    assert torch.equal(sample(0, use_cache=False), sample(0))
    assert not torch.equal(sample(0), sample(1))
    assert torch.equal(sample(3, top_k=1), model.generate(prompt, 9))
    top_2 = sample(5, top_k=2)
    logits, _ = model(top_2[:, :-1])
    ranks = (logits[:, 1:] > logits[:, 1:].gather(-1, top_2[:, 2:, None])).sum(-1)
    assert (ranks < 2).all()  # every sampled token is one of the 2 most likely


def test_generate_restores_the_training_mode():
    model = _lm(dtype=torch.float32).train()
    model.generate(torch.zeros(1, 1, dtype=torch.long), 2)
    assert model.training


def test_output_head_is_not_tied_and_sizes_follow_the_key_value_heads():
    model = _lm(num_kv_heads=1)
    assert model.head.weight.data_ptr() != model.embedding.weight.data_ptr()
    attn = model.blocks[0].self_attn
    assert attn.k_proj.weight.shape == (attn.head_dim, E) and attn.num_kv_heads == 1
    cache = model.new_cache(3)
    assert cache.nbytes == 2 * 2 * 3 * 1 * 12 * attn.head_dim * 8


def test_lm_gradients_reach_every_parameter():
    model = _lm("rotary", 2).train()
    logits, _ = model(torch.randint(11, (2, 6)))
    logits.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@pytest.mark.parametrize("name", ["plain", "all"])
@pytest.mark.parametrize("num_kv_heads", [4, 2])
def test_gradcheck_float64(name, num_kv_heads):
    attn = _attn(num_kv_heads, max_len=16, bias=True, **OPTIONS[name])
    check_module_gradients(attn, randn(1, 5, E), gradgrad=False)
    check_module_gradients(attn, randn(1, 5, E), gradgrad=False, need_weights=True)


# --- bad input -------------------------------------------------------------------------------


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


def test_bad_tokens_are_refused():
    model = _lm(dtype=torch.float32)
    with pytest.raises(TypeError, match=r"tokens must be an integer tensor; got torch.float32"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"tokens must be 2-D \(N, L\); got shape \(3,\)"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, vocab_size=11\).*max 11"):
        model(torch.tensor([[1, 11]]))
    with pytest.raises(ValueError, match=r"tokens length 13 is longer than max_len=12"):
        model(torch.zeros(1, 13, dtype=torch.long))
    with pytest.raises(TypeError, match=r"prompt must be an integer tensor"):
        model.generate(torch.zeros(1, 3), 2)


def test_bad_cache_use_is_refused():
    model = _lm(dtype=torch.float32)
    cache = model.new_cache(2)
    model(torch.zeros(2, 10, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"the cache holds 10 positions; 3 more would exceed"):
        model(torch.zeros(2, 3, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"the cache holds batch_size=2 sequences; got .* 1"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
    with pytest.raises(TypeError, match=r"cache must be a KVCache or None; got dict"):
        model(torch.zeros(2, 1, dtype=torch.long), cache={})
    other = KVCache(3, batch_size=2, num_kv_heads=4, head_dim=4, max_len=12)
    with pytest.raises(ValueError, match=r"the cache has 3 layers; this model has 2"):
        model(torch.zeros(2, 1, dtype=torch.long), cache=other)
    attn = CausalSelfAttention(E, H, num_kv_heads=2)
    with pytest.raises(ValueError, match=r"the cache holds H_kv=4 heads of D=4; .* H_kv=2"):
        attn(torch.randn(2, 1, E), cache=other)
    with pytest.raises(ValueError, match=r"layer must be in \[0, 3\); got 3"):
        CausalSelfAttention(E, H)(torch.randn(2, 1, E), cache=other, layer=3)
    with pytest.raises(TypeError, match=r"the cache holds torch.float32; got torch.float64"):
        CausalSelfAttention(E, H, dtype=torch.float64)(randn(2, 1, E), cache=other)
    with pytest.raises(ValueError, match=r"length must be at most the cache's length 10"):
        cache.crop(11)


def test_bad_generation_arguments_are_refused():
    model = _lm(dtype=torch.float32)
    prompt = torch.zeros(1, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"prompt length 5 \+ max_new_tokens 8 exceeds max_len"):
        model.generate(prompt, 8)
    with pytest.raises(ValueError, match=r"temperature must be >= 0; got -1"):
        model.generate(prompt, 2, temperature=-1.0)
    with pytest.raises(ValueError, match=r"top_k must be at least 1; got 0"):
        model.generate(prompt, 2, temperature=1.0, top_k=0)
    with pytest.raises(ValueError, match=r"prompt must hold at least one token"):
        model.generate(prompt[:, :0], 2)


# --- data and training -----------------------------------------------------------------------


def test_repeated_sequences_repeat_distinct_tokens_and_follow_the_seed():
    tokens = make_repeated_sequences(200, length=6, vocab_size=9, seed=3)
    assert tokens.shape == (200, 12) and tokens.dtype == torch.long
    assert torch.equal(tokens[:, :6], tokens[:, 6:])
    assert all(len(set(row.tolist())) == 6 for row in tokens[:, :6])
    assert 0 <= tokens.min() and tokens.max() < 9
    assert torch.equal(tokens, make_repeated_sequences(200, length=6, vocab_size=9, seed=3))
    assert not torch.equal(tokens, make_repeated_sequences(200, length=6, vocab_size=9, seed=4))
    with pytest.raises(ValueError, match=r"length must be at most vocab_size.*=10, .*=9"):
        make_repeated_sequences(2, length=10, vocab_size=9)
    with pytest.raises(TypeError, match=r"length must be an int; got float"):
        make_repeated_sequences(2, length=2.0, vocab_size=9)


@given(
    length=st.integers(2, 12),
    extra=st.integers(0, 4),
    min_period=st.integers(2, 12),
    seed=st.integers(0, 100),
)
def test_repeated_sequences_with_a_varying_period_continue_the_last_d_tokens(
    length, extra, min_period, seed
):
    min_period = min(min_period, length)
    tokens = make_repeated_sequences(
        40, length=length, vocab_size=length + extra, seed=seed, min_period=min_period
    )
    assert tokens.shape == (40, 2 * length)
    assert all(len(set(row.tolist())) == length for row in tokens[:, :length])
    for row in tokens.tolist():
        # The period: the distance back to the first token of the second half.
        d = length - row[:length].index(row[length])
        assert min_period <= d <= length
        assert all(row[t] == row[t - d] for t in range(length, 2 * length))
    again = make_repeated_sequences(
        40, length=length, vocab_size=length + extra, seed=seed, min_period=min_period
    )
    assert torch.equal(tokens, again)


def test_repeated_sequences_draw_every_period_and_refuse_bad_ones():
    tokens = make_repeated_sequences(400, length=6, vocab_size=9, seed=0, min_period=3)
    d = 6 - (tokens[:, :6] == tokens[:, 6:7]).int().argmax(dim=1)  # (N,)
    assert sorted(set(d.tolist())) == [3, 4, 5, 6]
    # With min_period=length every sequence repeats at distance length, as by default.
    fixed = make_repeated_sequences(5, length=6, vocab_size=9, seed=0, min_period=6)
    assert torch.equal(fixed[:, :6], fixed[:, 6:])
    for bad in (1, 7):
        with pytest.raises(ValueError, match=rf"min_period must lie in \[2, length=6\].*got {bad}"):
            make_repeated_sequences(2, length=6, vocab_size=9, min_period=bad)
    with pytest.raises(TypeError, match=r"min_period must be an int; got float"):
        make_repeated_sequences(2, length=6, vocab_size=9, min_period=3.0)


def test_train_lm_reports_both_halves_and_restores_the_threads():
    threads = torch.get_num_threads()
    data = make_repeated_sequences(64, length=4, vocab_size=8, seed=0)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
        lines = []
        runs.append(train_lm(model, data, steps=4, batch_size=8, log_every=2, log=lines.append))
    history = runs[0]
    assert [row["step"] for row in history] == [1, 2, 3, 4] and len(lines) == 2
    assert [r["loss"] for r in runs[0]] == [r["loss"] for r in runs[1]]
    assert torch.get_num_threads() == threads
    # Of the 7 targets, the halves hold targets 1-3 and 5-7: target 4, the repeat's first token,
    # is copyable only at a fixed period. Replay step 1's batch to check both means.
    torch.manual_seed(0)
    model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
    g = torch.Generator().manual_seed(0)
    batch = data[torch.randint(len(data), (8,), generator=g)]
    logits, _ = model(batch)
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), batch[:, 1:], reduction="none")
    row = history[0]
    assert math.isclose(row["loss"], losses.mean().item(), rel_tol=1e-6)  # float32 means
    assert math.isclose(row["first_half"], losses[:, :3].mean().item(), rel_tol=1e-6)
    assert math.isclose(row["second_half"], losses[:, 4:].mean().item(), rel_tol=1e-6)
    losses = next_token_losses(model, data)
    assert losses.shape == (7,) and model.training


def test_fit_repeat_model_trains_on_the_period_asked_for():
    model, history, held_out = fit_repeat_model(steps=2, batch_size=4, log=None)
    assert len(history) == 2 and not model.training
    assert held_out.shape == (512, 32) and torch.equal(held_out[:, :16], held_out[:, 16:])
    _, history, varied = fit_repeat_model(steps=1, batch_size=4, min_period=8, lr=1e-3, log=None)
    assert varied.shape == (512, 32) and len(history) == 1
    assert torch.equal(
        varied, make_repeated_sequences(512, length=16, vocab_size=32, seed=2, min_period=8)
    )
    assert not torch.equal(varied[:, :16], varied[:, 16:])
    with pytest.raises(ValueError, match=r"min_period must lie in \[2, length=16\].*got 17"):
        fit_repeat_model(min_period=17, log=None)
    with pytest.raises(ValueError, match=r"lr must be a positive finite number; got 0"):
        fit_repeat_model(lr=0, log=None)
    with pytest.raises(TypeError, match=r"batch_size must be an int; got float"):
        fit_repeat_model(batch_size=4.0, log=None)
