"""PagedKVCache: attention through block tables equals attention over a contiguous cache, for
ragged rows, grouped key/value heads and shared prefixes; the blocks it takes, shares, copies
and frees; and every bad use refused."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention.paged import PagedKVCache

from .helpers import DECODER_OPTIONS as OPTIONS
from .helpers import DECODER_SIZES, KV_HEADS, assert_close, randn
from .helpers import small_causal_attention as _attn
from .helpers import small_lm as _lm

E, H, N, L = DECODER_SIZES


def _pool(attn, num_blocks=16, block_size=3, max_len=16):
    return PagedKVCache(
        1, num_blocks=num_blocks, block_size=block_size, num_kv_heads=attn.num_kv_heads,
        head_dim=attn.head_dim, max_len=max_len, dtype=torch.float64,
    )  # fmt: skip


def _call(attn, cache, seqs, xs):
    """One call of ``attn`` over the rows ``seqs``, row i taking ``xs[i]`` (L_i, E)."""
    lengths = [len(x) for x in xs]
    batch = torch.zeros(len(xs), max(lengths), E, dtype=torch.float64)  # (N, L, E), padded
    for i, x in enumerate(xs):
        batch[i, : len(x)] = x
    cache.select(seqs, lengths)
    with cache.step(len(xs), max(lengths)):
        out, _ = attn(batch, cache=cache)  # (N, L, E)
    return [out[i, :n] for i, n in enumerate(lengths)]


@pytest.mark.parametrize("name", OPTIONS)
@pytest.mark.parametrize("num_kv_heads", KV_HEADS)
@torch.no_grad()
def test_paged_attention_equals_each_row_alone_over_ragged_lengths(name, num_kv_heads):
    attn = _attn(num_kv_heads, max_len=16, **OPTIONS[name])
    texts = [randn(n, E) for n in (9, 4, 13)]
    cache = _pool(attn)
    for seq in range(3):
        cache.add(seq)
    chunks = [(4, 1, 5), (1, 1, 3), (1, 1, 1), (3, 1, 4)]  # a ragged prefill, then mixed calls
    start = [0, 0, 0]
    for sizes in chunks:
        xs = [texts[i][start[i] : start[i] + n] for i, n in enumerate(sizes)]
        outs = _call(attn, cache, [0, 1, 2], xs)
        for i, n in enumerate(sizes):  # row i equals its text attended alone, without a cache
            full, _ = attn(texts[i][None, : start[i] + n])
            assert_close(outs[i], full[0, start[i] :], atol=1e-12, rtol=1e-12)
            start[i] += n
    assert [cache.lengths[s] for s in range(3)] == start == [9, 4, 13]
    assert [len(cache.tables[s]) for s in range(3)] == [3, 2, 5]  # blocks of 3 positions
    assert cache.used_blocks == 10 and cache.free_blocks == 6


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rotary", "alibi", "none"])
@pytest.mark.parametrize("num_kv_heads", [4, 1])
@torch.no_grad()
def test_model_over_pages_equals_the_contiguous_cache(positions, num_kv_heads):
    model = _lm(positions, num_kv_heads)
    prompts = [torch.tensor(p) for p in ([1, 2, 3, 4, 5], [6], [7, 8, 9, 10, 1, 2, 3])]
    cache = PagedKVCache.for_model(model, num_blocks=12, block_size=2)
    contiguous = [model.new_cache(1) for _ in prompts]
    feeds = list(prompts)
    for seq in range(3):
        cache.add(seq)
    for _ in range(4):
        lengths = [len(f) for f in feeds]
        tokens = torch.zeros(3, max(lengths), dtype=torch.int64)  # (N, L), right-padded
        for i, f in enumerate(feeds):
            tokens[i, : len(f)] = f
        cache.select([0, 1, 2], lengths)
        logits, _ = model(tokens, cache=cache)  # (N, L, V)
        for i, f in enumerate(feeds):
            alone, _ = model(f[None], cache=contiguous[i])  # (1, L_i, V)
            assert_close(logits[i, : len(f)], alone[0], atol=1e-12, rtol=1e-12)
        feeds = [logits[i, n - 1].argmax()[None] for i, n in enumerate(lengths)]


@torch.no_grad()
def test_shared_prefix_copy_on_write_equals_unshared():
    model = _lm("rotary", 2)
    prompt = torch.tensor([1, 2, 3, 4, 5])  # two full blocks of 2 and one position in a third
    shared = PagedKVCache.for_model(model, num_blocks=12, block_size=2)
    apart = PagedKVCache.for_model(model, num_blocks=12, block_size=2)
    shared.add(0)
    shared.select([0], [5])
    first, _ = model(prompt[None], cache=shared)
    shared.fork(0, 1)
    shared.fork(0, 2)
    assert shared.refs[shared.tables[0]].tolist() == [3, 3, 3] and shared.used_blocks == 3
    for seq in range(3):
        apart.add(seq)
    apart.select([0, 1, 2], [5, 5, 5])
    again, _ = model(prompt.expand(3, -1), cache=apart)
    assert_close(again, first.expand(3, -1, -1), atol=1e-12, rtol=1e-12)
    tokens = torch.tensor([[6], [7], [8]])
    for _ in range(3):  # every sample writes after the shared prompt: each copies the last block
        outs = []
        for cache in (shared, apart):
            cache.select([0, 1, 2], [1, 1, 1])
            outs.append(model(tokens, cache=cache)[0])
        assert_close(outs[0], outs[1], atol=1e-12, rtol=1e-12)
        tokens = outs[0][:, -1].argmax(-1, keepdim=True)  # (3, 1)
    assert shared.tables[0][:2] == shared.tables[1][:2] == shared.tables[2][:2]
    assert shared.refs[shared.tables[0][:2]].tolist() == [3, 3]
    assert len({shared.tables[s][2] for s in range(3)}) == 3  # the third block, copied
    assert shared.used_blocks == 2 + 3 * 2 and apart.used_blocks == 3 * 4  # 8 against 12
    for seq in (0, 1):
        shared.free(seq)
    assert shared.refs[shared.tables[2][:2]].tolist() == [1, 1] and shared.used_blocks == 4
    shared.free(2)
    assert shared.used_blocks == 0 and shared.refs.sum() == 0


@given(st.lists(st.integers(1, 7), min_size=1, max_size=6), st.integers(1, 4))
def test_each_sequence_wastes_less_than_one_block(lengths, block_size):
    cache = PagedKVCache(1, num_blocks=64, block_size=block_size, num_kv_heads=1, head_dim=1,
                         max_len=8, dtype=torch.float64)  # fmt: skip
    for seq, n in enumerate(lengths):
        cache.add(seq)
        cache.select([seq], [n])
        with cache.step(1, n):
            cache.update(0, torch.ones(1, 1, n, 1, dtype=torch.float64), torch.ones(1, 1, n, 1,
                         dtype=torch.float64))  # fmt: skip
    for seq, n in enumerate(lengths):
        assert 0 <= len(cache.tables[seq]) * block_size - n < block_size
    assert cache.used_blocks == sum(-(-n // block_size) for n in lengths)
    assert cache.nbytes == 2 * 64 * block_size * 8 and cache.block_nbytes == 2 * block_size * 8


@torch.no_grad()
def test_a_failed_call_gives_its_blocks_back(monkeypatch):
    model = _lm("rotary", 1)
    cache = PagedKVCache.for_model(model, num_blocks=4, block_size=2)
    cache.add(0)
    cache.select([0], [3])
    model(torch.tensor([[1, 2, 3]]), cache=cache)
    cache.fork(0, 1)
    state = (
        {s: list(t) for s, t in cache.tables.items()},
        cache.refs.clone(),
        list(cache.free_list),
        dict(cache.lengths),
    )
    cache.select([0, 1], [1, 1])

    def fail(*args, **kwargs):
        raise RuntimeError("the second layer fails")

    monkeypatch.setattr(model.blocks[1].self_attn, "forward", fail)
    with pytest.raises(RuntimeError, match="second layer"):  # after the first layer wrote
        model(torch.tensor([[1], [2]]), cache=cache)  # both rows copy the shared last block
    assert (dict(cache.tables), dict(cache.lengths)) == (state[0], state[3])
    assert torch.equal(cache.refs, state[1]) and cache.free_list == state[2]


@torch.no_grad()
def test_bad_use_is_refused():
    model = _lm("rotary", 1)
    cache = PagedKVCache.for_model(model, num_blocks=3, block_size=2)
    with pytest.raises(ValueError, match="unknown sequence 5"):
        cache.select([5], [1])
    cache.add(0)
    with pytest.raises(ValueError, match="already exists"):
        cache.add(0)
    with pytest.raises(ValueError, match="select"):
        model(torch.tensor([[1]]), cache=cache)  # no rows named
    cache.select([0], [2])
    with pytest.raises(ValueError, match="L=2"):
        model(torch.tensor([[1]]), cache=cache)
    cache.select([0], [7])
    with pytest.raises(ValueError, match="the pool is full: the call needs 4 blocks and 3"):
        model(torch.tensor([[1] * 7]), cache=cache)
    assert cache.free_blocks == 3 and cache.lengths[0] == 0  # refused before any write
    cache.select([0], [5])
    model(torch.tensor([[1] * 5]), cache=cache)
    cache.add(1)
    cache.select([0, 1], [1, 1])
    with pytest.raises(ValueError, match="the pool is full"):
        model(torch.tensor([[1], [2]]), cache=cache)
    cache.free(0)
    for call in (lambda: cache.select([0], [1]), lambda: cache.free(0),
                 lambda: cache.fork(0, 2), lambda: cache.add(0)):  # fmt: skip
        with pytest.raises(ValueError, match="freed|already exists"):
            call()
    with pytest.raises(ValueError, match="distinct"):
        cache.select([1, 1], [1, 1])
    with pytest.raises(ValueError, match="lengths"):
        cache.select([1], [0])
    roomy = PagedKVCache.for_model(model, num_blocks=9, block_size=2)
    roomy.add(0)
    roomy.select([0], [10])
    model(torch.tensor([[1] * 10]), cache=roomy)
    roomy.select([0], [3])
    with pytest.raises(ValueError, match="sequence 0 holds 10 positions; 3 more exceed max_len"):
        model(torch.tensor([[1] * 3]), cache=roomy)
    with pytest.raises(TypeError, match="fork"):
        cache.reorder(torch.tensor([0]))
    cache.select([1], [1])
    with pytest.raises(ValueError, match="inside a model call"):
        cache.update(0, torch.ones(1, 1, 1, 4, dtype=torch.float64), torch.ones(1, 1, 1, 4,
                     dtype=torch.float64))  # fmt: skip
    with pytest.raises(ValueError, match="num_blocks"):
        PagedKVCache(1, num_blocks=0, block_size=2, num_kv_heads=1, head_dim=1, max_len=4)
