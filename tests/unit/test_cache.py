"""KVCache: cached attention equals uncached, the layout and its bytes, a rolling cache with sink
tokens, and every bad use refused."""

import pytest
import torch

from attention import CausalSelfAttention, DecoderLM, KVCache, causal_mask

from .helpers import DECODER_OPTIONS as OPTIONS
from .helpers import DECODER_SIZES, KV_HEADS, assert_close, randn
from .helpers import small_causal_attention as _attn
from .helpers import small_lm as _lm

E, H, N, L = DECODER_SIZES


@pytest.mark.parametrize("name", OPTIONS)
@pytest.mark.parametrize("num_kv_heads", KV_HEADS)
@torch.no_grad()
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


@torch.no_grad()
def _filled(attn, prefix):
    """A fresh cache holding ``prefix``'s keys and values."""
    cache = KVCache(
        1, batch_size=N, num_kv_heads=attn.num_kv_heads, head_dim=attn.head_dim, max_len=10,
        dtype=prefix.dtype,
    )  # fmt: skip
    if prefix.shape[1]:
        attn(prefix, cache=cache)
    return cache


@torch.no_grad()
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


@torch.no_grad()
def test_cache_refuses_to_grow_past_max_len():
    cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
    cache.update(0, torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
    with pytest.raises(ValueError, match=r"KVCache is full: it holds 3 of max_len=4.*2 more"):
        cache.update(0, torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))
    assert cache.length == 3  # nothing was written
    attn = CausalSelfAttention(4, 2, num_kv_heads=1)
    with pytest.raises(ValueError, match=r"KVCache is full"):
        attn(torch.randn(1, 2, 4), cache=cache)


@torch.no_grad()
def test_bad_cache_use_is_refused():
    model = _lm(dtype=torch.float32)
    cache = model.new_cache(2)
    model(torch.zeros(2, 10, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"the cache holds 10 positions; 3 more would exceed"):
        model(torch.zeros(2, 3, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"the cache holds batch_size=2 sequences; got .* 1"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
    with pytest.raises(TypeError, match=r"cache must be a DecodingState or None; got dict"):
        model(torch.zeros(2, 1, dtype=torch.long), cache={})
    other = KVCache(3, batch_size=2, num_kv_heads=4, head_dim=4, max_len=12)
    with pytest.raises(ValueError, match=r"the cache has 3 layers; this model has 2"):
        model(torch.zeros(2, 1, dtype=torch.long), cache=other)
    attn = CausalSelfAttention(E, H, num_kv_heads=2)
    with pytest.raises(ValueError, match=r"the cache holds 4 heads of D=4; expected 2 heads"):
        attn(torch.randn(2, 1, E), cache=other)
    with pytest.raises(ValueError, match=r"layer must be in \[0, 3\); got 3"):
        CausalSelfAttention(E, H)(torch.randn(2, 1, E), cache=other, layer=3)
    with pytest.raises(TypeError, match=r"the cache holds torch.float32; got torch.float64"):
        CausalSelfAttention(E, H, dtype=torch.float64)(randn(2, 1, E), cache=other)
    with pytest.raises(ValueError, match=r"length must be at most the cache's length 10"):
        cache.crop(11)


# --- a rolling cache -------------------------------------------------------------------------


def _rolling(attn, window, sinks, batch=N):
    return KVCache(
        1, batch_size=batch, num_kv_heads=attn.num_kv_heads, head_dim=attn.head_dim,
        window=window, sinks=sinks, dtype=torch.float64,
    )  # fmt: skip


@pytest.mark.parametrize("sinks", [0, 1, 4])
@pytest.mark.parametrize("name", ["plain", "rotary", "alibi"])
@torch.no_grad()
def test_rolling_cache_equals_uncached_attention_over_the_kept_positions(sinks, name):
    attn = _attn(2, max_len=32, **OPTIONS[name])
    window = 5
    x = randn(N, 20, E)
    cache = _rolling(attn, window, sinks)
    kept = []  # the positions of x the cache holds, in order
    for t, size in enumerate((3, 1, 2, 1, 1, 3, 1, 2, 1, 1, 1, 2, 1)):
        start = sum((3, 1, 2, 1, 1, 3, 1, 2, 1, 1, 1, 2, 1)[:t])
        new = list(range(start, start + size))
        out, weights = attn(x[:, start : start + size], cache=cache, need_weights=True)
        overflow = max(0, len(kept) + size - (sinks + window))
        kept = kept[:sinks] + kept[sinks + overflow :] + new
        assert cache.length == len(kept) <= sinks + window
        # Without a cache: the kept positions as one sequence; the new ones are its last.
        full, full_weights = attn(x[:, kept], need_weights=True)
        assert_close(out, full[:, -size:])
        assert_close(weights, full_weights[:, :, -size:])


def test_rolling_cache_keeps_the_sinks_and_the_most_recent():
    cache = KVCache(2, batch_size=1, num_kv_heads=1, head_dim=1, window=3, sinks=2)
    assert cache.max_len == 5 and cache.offset(1) == 0
    for t in range(9):
        if t == 7:
            assert cache.dropped(1) == 1 and cache.offset(1) == 4
        for layer in range(2):
            keys, _ = cache.update(
                layer, torch.full((1, 1, 1, 1), float(t)), torch.zeros(1, 1, 1, 1)
            )
    assert keys.flatten().tolist() == [0.0, 1.0, 6.0, 7.0, 8.0]
    assert cache.length == 5
    with pytest.raises(ValueError, match=r"a rolling cache takes at most window=3 new positions"):
        cache.update(0, torch.zeros(1, 1, 4, 1), torch.zeros(1, 1, 4, 1))


@pytest.mark.parametrize("positions", ["rotary", "alibi", "none"])
@torch.no_grad()
def test_a_one_layer_model_reads_past_its_context_as_over_the_kept_tokens(positions):
    # One layer: a cached key depends on its own token only, so the rolling cache equals a full
    # pass over the kept tokens. (In deeper models a cached key also carries the context its
    # token saw when it was written, including tokens dropped since: no full pass over the kept
    # tokens reproduces that, and StreamingLLM is an approximation there.)
    model = DecoderLM(11, embed_dim=E, num_heads=H, num_layers=1, max_len=12, positions=positions)
    model = model.double().eval()
    tokens = torch.randint(11, (1, 30))
    cache = model.new_cache(1, window=6, sinks=2)
    kept = []
    for t in range(30):  # token by token, far past max_len
        logits, _ = model(tokens[:, t : t + 1], cache=cache)
        kept = (kept[:2] + kept[3:] if len(kept) == 8 else kept) + [t]
        expected, _ = model(tokens[:, kept])
        assert_close(logits, expected[:, -1:])


@pytest.mark.parametrize("positions", ["rotary", "alibi", "none"])
@torch.no_grad()
def test_a_rolling_cache_equals_the_plain_one_until_it_drops_a_position(positions):
    model = _lm(positions)
    tokens = torch.randint(11, (2, 12))
    plain, rolling = model.new_cache(2), model.new_cache(2, window=10, sinks=2)
    for t in range(12):
        a, _ = model(tokens[:, t : t + 1], cache=plain)
        b, _ = model(tokens[:, t : t + 1], cache=rolling)
        assert_close(a, b)


def test_a_rolling_cache_is_checked_when_made():
    with pytest.raises(ValueError, match=r"max_len = sinks \+ window = 6 positions; got max_len=5"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1, window=4, sinks=2, max_len=5)
    with pytest.raises(ValueError, match=r"sinks are kept by a rolling cache: give window too"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1, max_len=4, sinks=2)
    with pytest.raises(TypeError, match=r"max_len is required for a cache without a window"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1)
    with pytest.raises(ValueError, match=r"window must be at least 1; got 0"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1, window=0)
    with pytest.raises(ValueError, match=r"sinks must be non-negative; got -1"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1, window=2, sinks=-1)


# --- bad use ---------------------------------------------------------------------------------


def test_the_cache_refuses_what_it_would_otherwise_cast_or_misplace():
    cache = KVCache(1, batch_size=1, num_kv_heads=2, head_dim=4, max_len=8)
    good = torch.zeros(1, 2, 3, 4)
    with pytest.raises(
        TypeError, match=r"value must have the cache's dtype \(torch.float32\); got"
    ):
        cache.update(0, good, good.double())
    with pytest.raises(ValueError, match=r"key must be on the cache's device \(cpu\); got meta"):
        cache.update(0, good.to("meta"), good)
    with pytest.raises(ValueError, match=r"key must have shape \(N=1, H_kv=2, L, D=4\)"):
        cache.update(0, torch.zeros(1, 2, 3, 5), good)
    with pytest.raises(TypeError, match=r"dtype must be a torch.dtype .*; got 'float32'"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1, max_len=2, dtype="float32")
    with pytest.raises(TypeError, match=r"dtype must be a floating-point dtype; got torch.int64"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=1, max_len=2, dtype=torch.long)
    attn = CausalSelfAttention(8, 2)
    with pytest.raises(ValueError, match=r"the cache lives on cpu; got inputs on meta"):
        attn.to("meta")(torch.zeros(1, 3, 8, device="meta"), cache=KVCache(
            1, batch_size=1, num_kv_heads=2, head_dim=4, max_len=8))  # fmt: skip


def test_the_cache_refuses_autograd_and_says_why():
    attn = CausalSelfAttention(8, 2)
    cache = KVCache(1, batch_size=1, num_kv_heads=2, head_dim=4, max_len=8)
    with pytest.raises(ValueError, match=r"key requires grad: KVCache is for inference"):
        attn(torch.randn(1, 3, 8), cache=cache)
    assert cache.length == 0
    with torch.no_grad():
        attn(torch.randn(1, 3, 8), cache=cache)
    assert cache.length == 3


def test_reorder_copies_each_sequences_keys_and_values_from_the_row_it_continues():
    cache = KVCache(2, batch_size=3, num_kv_heads=1, head_dim=1, max_len=4)
    for layer in range(2):
        keys = torch.arange(3.0).view(3, 1, 1, 1) + 10 * layer
        cache.update(layer, keys, -keys)
    cache.reorder(torch.tensor([2, 0, 0]))
    assert cache.keys[:, :, 0, 0, 0].tolist() == [[2.0, 0.0, 0.0], [12.0, 10.0, 10.0]]
    assert cache.values[1, :, 0, 0, 0].tolist() == [-12.0, -10.0, -10.0]
    with pytest.raises(ValueError, match=r"rows must have shape \(3,\); got \(2,\)"):
        cache.reorder(torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 3\)"):
        cache.reorder(torch.tensor([0, 1, 3]))
    with pytest.raises(TypeError, match=r"rows must be an int64 or int32 tensor"):
        cache.reorder([0, 1, 2])


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_a_rolling_cache_is_refused_for_positions_added_to_the_embeddings(positions):
    # Kept positions are read at their slots: exact for rotary, ALiBi and none (above), silently
    # off for positions added to the embeddings, so those models refuse a window.
    model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=1, max_len=4, positions=positions)
    with pytest.raises(ValueError, match=rf"positions='{positions}' \(added to the embeddings\)"):
        model.new_cache(1, window=3)


@pytest.mark.parametrize("positions", ["rotary", "alibi", "none"])
def test_a_rolling_cache_longer_than_max_len_is_refused_before_any_work(positions):
    model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=1, max_len=4, positions=positions)
    with pytest.raises(ValueError, match=r"sinks \+ window = 6 exceeds the model's max_len=4"):
        model.new_cache(1, window=6)
    with pytest.raises(ValueError, match=r"max_len must be at most the model's 4; got 5"):
        model.new_cache(1, max_len=5)


@torch.no_grad()
def test_a_refused_step_leaves_the_cache_as_it_was():
    torch.manual_seed(0)
    model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=6, positions="rotary")
    tokens = torch.randint(10, (1, 6))
    cache = model.new_cache(1, window=4)
    model(tokens[:, :4], cache=cache)
    keys, values = cache.keys.clone(), cache.values.clone()
    with pytest.raises(ValueError, match=r"a rolling cache takes at most window=4"):
        model(tokens.repeat(1, 1)[:, :5], cache=cache)  # more than the window at once
    assert cache.length == 4
    assert torch.equal(cache.keys, keys) and torch.equal(cache.values, values)
    cache.crop(3)
    fresh = model.new_cache(1, window=4)
    model(tokens[:, :3], cache=fresh)
    assert_close(model(tokens[:, 4:5], cache=cache)[0], model(tokens[:, 4:5], cache=fresh)[0])


def test_the_cache_checks_its_own_arguments():
    cache = KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
    with pytest.raises(ValueError, match=r"length must be non-negative; got -1"):
        cache.check_append(0, 1, -1)
    with pytest.raises(TypeError, match=r"length must be an int"):
        cache.check_append(0, 1, 1.5)
    with pytest.raises(ValueError, match=r"device must name a device such as 'cpu'; got 'bogus'"):
        KVCache(1, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4, device="bogus")
    with pytest.raises(ValueError, match=r"rows must hold values: got a tensor on the meta"):
        cache.reorder(torch.zeros(1, dtype=torch.long, device="meta"))
