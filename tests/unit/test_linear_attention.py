"""LinearAttention: the parallel form equals the recurrent one and the formula written out, cached
generation equals uncached, gradcheck, a RecurrentState whose size does not depend on the
length, and bad input refused."""

import pytest
import torch

from attention import DecoderLM, LatentCache, LinearAttention, RecurrentState
from attention.linear_attention import elu_feature_map

from .helpers import DECODER_SIZES, assert_close, check_module_gradients, randn
from .helpers import small_lm as _lm

E, H, N, L = DECODER_SIZES
D = E // H


def _attn(**options):
    return LinearAttention(E, H, dtype=torch.float64, **options).eval()


def _formula(attn, x):
    """o_i = sum_{j<=i} phi(q_i).phi(k_j) v_j / sum_{j<=i} phi(q_i).phi(k_j), one i at a time."""
    N, L, _ = x.shape
    q, k, v = (p(x).view(N, L, H, D) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    q, k = elu_feature_map(q), elu_feature_map(k)  # (N, L, H, D)
    rows = []
    for i in range(L):
        w = torch.einsum("nhd,njhd->nhj", q[:, i], k[:, : i + 1])  # (N, H, i + 1)
        o = torch.einsum("nhj,njhd->nhd", w, v[:, : i + 1]) / w.sum(-1, keepdim=True)
        rows.append(o.reshape(N, E))
    return attn.out_proj(torch.stack(rows, dim=1))  # (N, L, E)


@pytest.mark.parametrize("bias", [False, True])
@torch.no_grad()
def test_parallel_equals_the_formula_and_the_recurrent_form(bias):
    attn = _attn(bias=bias)
    x = randn(N, 10, E)
    parallel, weights = attn(x, need_weights=True)
    assert_close(parallel, _formula(attn, x))
    assert_close(weights.sum(-1), torch.ones(N, H, 10, dtype=torch.float64))
    assert not weights.triu(1).any()  # causal
    state = attn.new_state(1, batch_size=N)
    recurrent = torch.cat([attn(x[:, t : t + 1], cache=state)[0] for t in range(10)], dim=1)
    assert_close(recurrent, parallel)  # one token at a time: S_t, z_t carried
    state.reset()
    chunks = [attn(x[:, a:b], cache=state)[0] for a, b in ((0, 4), (4, 5), (5, 8), (8, 10))]
    assert_close(torch.cat(chunks, dim=1), parallel)  # parallel within a call, recurrent across
    assert state.length == 10


@pytest.mark.parametrize("positions", ["none", "learned", "sinusoidal"])
def test_cached_generation_equals_uncached(positions):
    model = _lm(positions, attention="linear")
    for seed in range(3):
        torch.manual_seed(seed)
        prompt = torch.randint(11, (N, 3))
        cached = model.generate(prompt, 8)
        assert torch.equal(cached, model.generate(prompt, 8, use_cache=False))


def test_gradcheck():
    check_module_gradients(_attn(bias=True), randn(2, 4, E))


@torch.no_grad()
def test_the_state_does_not_grow_with_the_length():
    attn = _attn()
    state = attn.new_state(2, batch_size=N, max_len=4)
    size = state.nbytes
    assert size == (D * D + D) * H * 2 * N * 8  # (D D_v + D) H layers N bytes
    assert attn.new_state(2, batch_size=N, max_len=4096).nbytes == size
    for _ in range(40):  # ten times max_len: a sum never fills
        for layer in range(2):
            attn(randn(N, 1, E), cache=state, layer=layer)
    assert state.length == 40 and state.nbytes == size
    assert state.kv_sums.shape == (2, N, H, D, D) and state.k_sums.shape == (2, N, H, D)


@torch.no_grad()
def test_reorder_and_crop_of_a_recurrent_state():
    attn = _attn()
    x = randn(N, 5, E)
    state = attn.new_state(1, batch_size=N)
    attn(x, cache=state)
    swapped = state.kv_sums.flip(1).clone()
    state.reorder(torch.tensor([1, 0]))
    assert torch.equal(state.kv_sums, swapped)
    with pytest.raises(ValueError, match="cannot forget"):
        state.crop(3)
    state.crop(5)
    assert state.length == 5
    state.crop(0)
    assert state.length == 0 and not state.kv_sums.any() and not state.k_sums.any()


def test_bad_input_is_refused():
    attn = _attn()
    with pytest.raises(ValueError, match="divisible"):
        LinearAttention(E, 3)
    with pytest.raises(TypeError, match="bias"):
        LinearAttention(E, H, bias="no")
    with pytest.raises(TypeError, match="cache must be a RecurrentState"):
        attn(randn(N, 2, E), cache=LatentCache(1, batch_size=N, latent_dim=4, rope_dim=2,
                                                max_len=4))  # fmt: skip
    with pytest.raises(ValueError, match="heads"):
        attn(randn(N, 2, E), cache=RecurrentState(1, batch_size=N, num_heads=2, head_dim=8))
    with pytest.raises(ValueError, match="rolling"):
        attn.new_state(1, batch_size=N, window=4)
    state = attn.new_state(1, batch_size=N)
    with torch.no_grad():
        attn(randn(N, 2, E), cache=state)
        with pytest.raises(ValueError, match="need_weights=True needs every key"):
            attn(randn(N, 1, E), cache=state, need_weights=True)
    with pytest.raises(ValueError, match="requires grad"):
        attn(randn(N, 1, E), cache=state)  # autograd on: the state keeps no graph
    with pytest.raises(ValueError, match="value must have shape"):
        state.update(0, torch.ones(N, H, 1, D, dtype=torch.float64), torch.ones(N, H, 2, D))
    for kwargs, words in [
        (dict(positions="rotary"), "positions"),
        (dict(num_kv_heads=2), "num_kv_heads"),
        (dict(window=3), "window must be None"),
        (dict(attention_options={"rank": 2}), "attention_options"),
    ]:
        with pytest.raises(ValueError, match=words):
            DecoderLM(11, embed_dim=E, num_heads=H, num_layers=1, max_len=8, attention="linear",
                      **kwargs)  # fmt: skip


def test_the_feature_map_is_positive_and_checks_its_input():
    x = torch.tensor([-800.0, -1.0, 0.0, 3.0], dtype=torch.float64)
    assert (elu_feature_map(x) >= 0).all() and elu_feature_map(x)[1:].gt(0).all()
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        elu_feature_map(torch.tensor([1, 2]))
