"""MultiHeadLatentAttention: absorbed equals naive, cached equals uncached, its LatentCache holds
each token's latent and rotary key once, the decoding state's bytes per token of every variant
equal their formulas, equal to Hugging Face transformers' DeepSeek-V3 attention with copied
weights, and bad input refused."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from attention import (
    DecoderLM,
    LatentCache,
    MultiHeadLatentAttention,
    RecurrentState,
)

from .helpers import DECODER_SIZES, assert_close, check_module_gradients, randn
from .helpers import small_lm as _lm

E, H, N, L = DECODER_SIZES
SETTINGS = {  # the sizes of DeepSeek-V2 scaled down, and the options one by one
    "plain": dict(latent_dim=8, rope_dim=2),
    "query_latent": dict(latent_dim=8, rope_dim=2, query_latent_dim=6),
    "sizes": dict(latent_dim=5, rope_dim=4, head_dim=3, value_dim=6),
    "window": dict(latent_dim=8, rope_dim=2, window=3),
    "bias": dict(latent_dim=8, rope_dim=2, bias=True, query_latent_dim=6),
}


def _mla(**options):
    return MultiHeadLatentAttention(E, H, dtype=torch.float64, **options).eval()


@pytest.mark.parametrize("name", SETTINGS)
def test_absorbed_equals_naive(name):
    mla = _mla(**SETTINGS[name])
    x = randn(N, L, E)
    naive, naive_weights = mla(x, need_weights=True, absorb=False)
    absorbed, absorbed_weights = mla(x, need_weights=True, absorb=True)
    assert_close(absorbed, naive)
    assert_close(absorbed_weights, naive_weights)
    assert_close(mla(x, absorb=True)[0], naive)  # PyTorch's kernel, without the weights


@pytest.mark.parametrize("name", SETTINGS)
@torch.no_grad()
def test_cached_attention_equals_uncached_chunk_by_chunk(name):
    mla = _mla(**SETTINGS[name])
    x = randn(N, 10, E)
    full, full_weights = mla(x, need_weights=True)
    cache = mla.new_state(1, batch_size=N, max_len=10)
    start = 0
    for size in (3, 1, 1, 2, 1, 2):  # a prompt, then tokens one or two at a time
        for absorb in (True, False):
            if absorb is False:
                cache.crop(start)  # the same positions again, through the naive form
            out, weights = mla(
                x[:, start : start + size], cache=cache, need_weights=True, absorb=absorb
            )
            assert_close(out, full[:, start : start + size])
            assert_close(weights, full_weights[:, :, start : start + size, : start + size])
        start += size
        assert cache.length == start


@pytest.mark.parametrize("window", [None, 4])
def test_cached_generation_equals_uncached(window):
    model = _lm("rotary", attention="latent", window=window, attention_options={"rope_dim": 2})
    for seed in range(3):
        torch.manual_seed(seed)
        prompt = torch.randint(11, (N, 3))
        cached = model.generate(prompt, 8)
        assert torch.equal(cached, model.generate(prompt, 8, use_cache=False))


@torch.no_grad()
def test_a_rolling_latent_cache_equals_attention_over_the_kept_positions():
    mla = _mla(latent_dim=8, rope_dim=2)
    x = randn(N, 9, E)
    cache = mla.new_state(1, batch_size=N, window=4, sinks=1)
    for t in range(9):
        out, _ = mla(x[:, t : t + 1], cache=cache)
    kept = torch.cat((x[:, :1], x[:, 5:]), dim=1)  # the sink and the 4 most recent
    assert_close(out, mla(kept)[0][:, -1:])


def test_the_cache_holds_each_tokens_latent_and_rotary_key_once():
    model = _lm("rotary", attention="latent", attention_options={"latent_dim": 6, "rope_dim": 2})
    cache = model.new_cache(N)
    assert isinstance(cache, LatentCache)
    assert cache.latents.shape == (2, N, 12, 6) and cache.rope_keys.shape == (2, N, 12, 2)
    assert cache.nbytes == (6 + 2) * 2 * N * 12 * 8  # (d_c + d_h^R) x layers x N x len x bytes
    tokens = torch.randint(11, (N, 5))
    with torch.no_grad():
        model(tokens, cache=cache)
        mla = model.blocks[0].self_attn
        h = model.blocks[0].norm1(model.embedding(tokens))  # (N, 5, E): what layer 0 reads
        assert_close(cache.latents[0, :, :5], mla.kv_norm(mla.kv_down(h)))
        assert_close(cache.rope_keys[0, :, :5], mla.k_rope_proj(h))  # stored before rotation


def test_gradcheck():
    mla = _mla(latent_dim=4, rope_dim=2, query_latent_dim=3, bias=True)
    check_module_gradients(mla, randn(1, 3, E), gradgrad=False)
    check_module_gradients(mla, randn(1, 3, E), gradgrad=False, absorb=True)


@pytest.mark.parametrize("variant", ["multi-head", "grouped-2", "grouped-1", "latent", "linear"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bytes_per_token_of_each_decoding_state_equal_the_formula(variant, dtype):
    """Counted from nbytes: 2 H_kv D per token and layer for keys and values; d_c + d_h^R for
    MLA (DeepSeek-V2's Table 1); for linear attention a constant (D D_v + D) H per layer."""
    layers, D, size = 3, E // H, torch.finfo(dtype).bits // 8
    options = {
        "multi-head": dict(num_kv_heads=H), "grouped-2": dict(num_kv_heads=2),
        "grouped-1": dict(num_kv_heads=1), "linear": dict(attention="linear"),
        "latent": dict(attention="latent", attention_options={"latent_dim": 4 * D, "rope_dim": 2}),
    }[variant]  # fmt: skip
    positions = {"latent": "rotary", "linear": "none"}.get(variant, "learned")
    model = DecoderLM(
        11, embed_dim=E, num_heads=H, num_layers=layers, max_len=64, positions=positions,
        **options,
    ).to(dtype)  # fmt: skip
    short, long = model.new_cache(1, max_len=16).nbytes, model.new_cache(1, max_len=64).nbytes
    if variant == "linear":
        assert short == long == (D * D + D) * H * layers * size  # O(1) in the length
        return
    per_token = {"latent": 4 * D + 2}.get(variant, 2 * options.get("num_kv_heads", H) * D)
    assert short == per_token * layers * 16 * size and long == per_token * layers * 64 * size
    if variant == "latent":  # 4.5 d_h per token and layer, against 2 n_h d_h = 8 d_h
        assert per_token == 4.5 * D


def test_bad_input_is_refused():
    for options, error, words in [
        (dict(latent_dim=8, rope_dim=3), ValueError, "rope_dim must be even"),
        (dict(latent_dim=0, rope_dim=2), ValueError, "latent_dim"),
        (dict(latent_dim=8.0, rope_dim=2), TypeError, "latent_dim"),
        (dict(latent_dim=8, rope_dim=2, query_latent_dim=0), ValueError, "query_latent_dim"),
        (dict(latent_dim=8, rope_dim=2, eps=0.0), ValueError, "eps"),
        (dict(latent_dim=8, rope_dim=2, rope_base=1.0), ValueError, "rope_base"),
        (dict(latent_dim=8, rope_dim=2, bias=1), TypeError, "bias"),
    ]:
        with pytest.raises(error, match=words):
            MultiHeadLatentAttention(E, H, **options)
    mla = _mla(latent_dim=8, rope_dim=2)
    with pytest.raises(TypeError, match="cache must be a LatentCache"):
        mla(randn(N, 2, E), cache=RecurrentState(1, batch_size=N, num_heads=H, head_dim=4))
    with pytest.raises(ValueError, match="latents of 4"):
        mla(randn(N, 2, E), cache=LatentCache(1, batch_size=N, latent_dim=4, rope_dim=2,
                                               max_len=4, dtype=torch.float64))  # fmt: skip
    with pytest.raises(TypeError, match="absorb must be a bool"):
        mla(randn(N, 2, E), absorb="yes")
    for call in (mla, mla.query):
        with pytest.raises(ValueError, match="last dimension"):
            call(randn(N, 2, E + 1))
    cache = LatentCache(1, batch_size=N, latent_dim=8, rope_dim=2, max_len=4)
    with pytest.raises(ValueError, match="rope_key must have shape"):
        cache.update(0, torch.zeros(N, 2, 8), torch.zeros(N, 3, 2))
    for kwargs, words in [
        (dict(positions="learned"), "positions='rotary'"),
        (dict(positions="rotary", num_kv_heads=2), "num_kv_heads"),
        (dict(positions="rotary", attention_options={"heads": 2}), "attention_options"),
    ]:
        with pytest.raises(ValueError, match=words):
            DecoderLM(11, embed_dim=E, num_heads=H, num_layers=1, max_len=8, attention="latent",
                      **kwargs)  # fmt: skip


# --- equal to Hugging Face transformers' DeepSeek-V3 attention ---------------------------------

TRANSFORMERS = "transformers==4.57.6"  # pinned: the module compared is that version's


@pytest.fixture(scope="session")
def deepseek_v3():
    """transformers' DeepSeek-V3 modelling module, from a scratch folder that this fixture
    fills with ``pip install --target`` once per machine (the folder is reused while it holds a
    complete install); skipped, with the reason, when it cannot install (no network)."""
    folder = Path(tempfile.gettempdir()) / f"attention-tests-{TRANSFORMERS.replace('==', '-')}"
    if not (folder / "complete").exists():
        partial = folder.with_name(f"{folder.name}.{os.getpid()}")
        run = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--target", str(partial), TRANSFORMERS],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if run.returncode != 0:
            pytest.skip(f"could not pip install {TRANSFORMERS}: {run.stderr.strip()[-300:]}")
        (partial / "complete").touch()
        try:
            partial.rename(folder)  # atomic: another worker may have finished first
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)
    sys.path.append(str(folder))  # after the environment's own packages, which keep priority
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    return modeling_deepseek_v3


@pytest.mark.parametrize("interleave", [False, True], ids=["half-split", "interleaved"])
@pytest.mark.parametrize("query_latent_dim", [None, 6])
@torch.no_grad()
def test_equals_hugging_face_deepseek_v3_attention(deepseek_v3, query_latent_dim, interleave):
    d_c, d_R, d_h, d_v = 8, 4, 3, 5
    config = deepseek_v3.DeepseekV3Config(
        vocab_size=11, hidden_size=E, num_attention_heads=H, num_key_value_heads=H,
        num_hidden_layers=1, q_lora_rank=query_latent_dim, kv_lora_rank=d_c,
        qk_nope_head_dim=d_h, qk_rope_head_dim=d_R, v_head_dim=d_v, attention_bias=True,
        rope_scaling=None, rope_interleave=interleave, rms_norm_eps=1e-6,
    )  # fmt: skip
    config._attn_implementation = "sdpa"  # torch's kernel in float64 ("eager" casts to float32)
    theirs = deepseek_v3.DeepseekV3Attention(config, layer_idx=0).double().eval()
    # Their RMSNorm computes in float32 whatever the input; the same formula in float64:
    for name in ("q_a_layernorm", "kv_a_layernorm"):
        if hasattr(theirs, name):
            norm = nn.RMSNorm(getattr(theirs, name).weight.shape, eps=1e-6, dtype=torch.float64)
            setattr(theirs, name, norm)
    for p in theirs.parameters():
        p.copy_(torch.randn_like(p) * 0.3)
    ours = _mla(latent_dim=d_c, rope_dim=d_R, head_dim=d_h, value_dim=d_v, bias=True,
                query_latent_dim=query_latent_dim)  # fmt: skip
    _copy_deepseek_weights(theirs, ours, interleave)

    x = randn(N, L, E)
    angles = ours.rotary.angles(L)  # (L, d_R / 2), in float64: their table is float32
    emb = torch.cat((angles, angles), dim=-1)[None]  # (1, L, d_R), their layout
    expected, _ = theirs(x, position_embeddings=(emb.cos(), emb.sin()), attention_mask=None)
    for absorb in (False, True):
        assert_close(ours(x, absorb=absorb)[0], expected)


def _copy_deepseek_weights(theirs, ours, interleave):
    """transformers' fused projections into ours: q_b_proj (or q_proj) holds every head's
    [q^C; q^R]; kv_a_proj_with_mqa [c^KV; k^R]; kv_b_proj every head's [k^C; v]. With
    ``rope_interleave`` their rotary features pair (2i, 2i + 1): ours pair (i, i + d/2), so the
    rotary rows are permuted (evens, then odds)."""
    d_c, d_R, d_h, d_v = ours.latent_dim, ours.rope_dim, ours.head_dim, ours.value_dim
    order = torch.cat((torch.arange(0, d_R, 2), torch.arange(1, d_R, 2)))
    rope = order if interleave else torch.arange(d_R)

    def q_rows(w):  # (H (d_h + d_R), *) with each head's rotary rows reordered
        w = w.view(H, d_h + d_R, *w.shape[1:])
        return torch.cat((w[:, :d_h], w[:, d_h:][:, rope]), 1).reshape(H * (d_h + d_R), -1)

    if ours.query_latent_dim is None:
        ours.q_proj.weight.copy_(q_rows(theirs.q_proj.weight))
    else:
        ours.q_down.load_state_dict(theirs.q_a_proj.state_dict())
        ours.q_norm.weight.copy_(theirs.q_a_layernorm.weight)
        ours.q_up.weight.copy_(q_rows(theirs.q_b_proj.weight))
    a = theirs.kv_a_proj_with_mqa
    ours.kv_down.weight.copy_(a.weight[:d_c])
    ours.kv_down.bias.copy_(a.bias[:d_c])
    ours.k_rope_proj.weight.copy_(a.weight[d_c:][rope])
    ours.k_rope_proj.bias.copy_(a.bias[d_c:][rope])
    ours.kv_norm.weight.copy_(theirs.kv_a_layernorm.weight)
    b = theirs.kv_b_proj.weight.view(H, d_h + d_v, d_c)
    ours.k_up.weight.copy_(b[:, :d_h].reshape(H * d_h, d_c))
    ours.v_up.weight.copy_(b[:, d_h:].reshape(H * d_v, d_c))
    ours.out_proj.load_state_dict(theirs.o_proj.state_dict())
