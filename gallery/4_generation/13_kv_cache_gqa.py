"""
Generating with a KV cache, and sharing keys and values
=======================================================

.. prerequisites:: 14_decoder_induction_heads

A decoder generates one token at a time: predict, append, predict again. Done naively,
every step re-encodes the whole sequence so far, and the work per token grows with its
length. A *KV cache* keeps every layer's keys and values, so each new token costs one
query against them. The cache then becomes the memory bill of generation, and current
models shrink it by giving several query heads one shared key/value head: multi-query
attention :cite:p:`shazeer2019` and grouped-query attention :cite:p:`ainslie2023`.

This page generates with and without :class:`attention.KVCache`, checks that both give
the same tokens, times them, computes the cache's size, and trains the model of
:ref:`sphx_glr_tutorials_14_decoder_induction_heads.py` with fewer key/value heads.
"""

# %%
# Setup
# -----

import time

import torch

from attention.repro import claim, default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else "cuda" if there is a GPU, else "cpu"
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# Generation, with and without a cache
# ------------------------------------
#
# :meth:`attention.DecoderLM.generate` runs the loop. Without a cache, each step feeds
# the whole sequence so far. With one, the prompt is encoded once, and each later step
# feeds only the newest token, whose query attends to the cached keys and values of
# every position before it:
#
# .. literalinclude:: ../../attention/decoder.py
#    :language: python
#    :pyobject: DecoderLM.generate
#    :start-at: was_training = self.training
#    :end-at: step_input = next_token
#    :dedent: 8
#
# Inside each layer, :meth:`attention.KVCache.update` writes the new keys and values
# after the cached ones, in memory allocated once for ``max_len`` positions, and returns
# all of them:
#
# .. literalinclude:: ../../attention/decoder.py
#    :language: python
#    :pyobject: KVCache.update
#    :start-at: L = key.shape[2]
#
# The one new query is the *last* of the :math:`S` positions, so the causal mask must be
# aligned bottom-right (:ref:`bottom-right-causal`): :math:`L = 1` query may see all
# :math:`S` keys. With that, the cached and uncached computations are the same
# arithmetic on the same numbers. A model larger than the one of the previous page
# (untrained: its tokens are arbitrary, which is all this check needs), generating
# greedily:

from attention import DecoderLM

V = 256
big = (
    DecoderLM(V, embed_dim=128, num_heads=8, num_layers=2, max_len=512)
    .to(device)
    .eval()
)
prompt = torch.randint(V, (2, 8), device=device)
with torch.no_grad():
    cached = big.generate(prompt, 40)
    uncached = big.generate(prompt, 40, use_cache=False)
    full_logits, _ = big(cached[:, :-1])  # one pass over the generated sequence
    cache = big.new_cache(2)
    step_logits = [big(prompt, cache=cache)[0]]  # (N, 8, V)
    for t in range(prompt.shape[1], cached.shape[1] - 1):
        step_logits.append(big(cached[:, t : t + 1], cache=cache)[0])  # (N, 1, V)
gap = (torch.cat(step_logits, dim=1) - full_logits).abs().max().item()
print(
    f"identical tokens: {torch.equal(cached, uncached)}; largest logit difference, "
    f"token by token with the cache vs one pass: {gap:.1e}"
)
assert torch.equal(cached, uncached)
assert gap < 1e-4

# %%
# Time per token
# --------------
#
# Generate 256 tokens after an 8-token prompt, timing each step, with and without the
# cache. Without it, step :math:`t` encodes :math:`t` tokens; with it, one token attends
# to :math:`t` cached ones. The steps run on one thread: on a small model, more threads
# mostly add waiting, and on a busy machine they make the times erratic.


def time_steps(model, prompt, new_tokens, *, use_cache):
    """Seconds taken by each greedy step, and the position each step predicts from."""
    tokens, times = prompt, []
    cache = model.new_cache(len(prompt)) if use_cache else None
    step_input = prompt
    with torch.no_grad():
        for _ in range(new_tokens):
            start = time.perf_counter()
            logits, _ = model(step_input if use_cache else tokens, cache=cache)
            next_token = logits[:, -1].argmax(-1, keepdim=True)  # (N, 1)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            tokens = torch.cat([tokens, next_token], dim=1)
            step_input = next_token
    return times


single = prompt[:1]
new_tokens = 256
threads = torch.get_num_threads()
torch.set_num_threads(1)
try:
    with_cache = time_steps(big, single, new_tokens, use_cache=True)
    without_cache = time_steps(big, single, new_tokens, use_cache=False)
finally:
    torch.set_num_threads(threads)
positions = list(range(single.shape[1], single.shape[1] + new_tokens))

# %%

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
ax.plot(
    positions, [1e3 * t for t in without_cache], color="C1", label="without the cache"
)
ax.plot(positions, [1e3 * t for t in with_cache], color="C0", label="with the cache")
ax.set_xlabel("length of the sequence so far")
ax.set_ylabel("time of one step (ms)")
ax.set_ylim(bottom=0)
ax.legend(loc="upper left")
ax.set_title(f"Time per generated token ({device.type}, float32)")
plt.show()

last = 32  # the last steps, averaged to smooth the noise of a shared machine
slow = sum(without_cache[-last:]) / last
fast = sum(with_cache[-last:]) / last
print(f"{device}, float32, torch {torch.__version__}, one thread")
print(
    f"mean step time over the last {last} steps: {1e3 * slow:.2f} ms without the "
    "cache, "
    f"{1e3 * fast:.2f} ms with it: {slow / fast:.1f}x faster"
)

# %%
# Without the cache, the time per token grows with the sequence; with it, it stays
# nearly flat: the attention over the cached keys grows too, but it is a small part of a
# step next to the projections and the feed-forward networks, which now see one token
# instead of all of them. (The numbers are measured on this run's machine, and a busy
# machine makes them noisy.)
#
# The cache's memory
# ------------------
#
# Each layer keeps one key and one value per position, for each key/value head:
#
# .. math::
#     \text{bytes} = 2 \times \text{layers} \times N \times H_{kv} \times L \times D
#     \times \text{bytes per element}.
#
# For a model of the size of Llama 2 7B (32 layers, 32 heads of :math:`D = 128`) at
# :math:`L = 4096` in float16, :class:`attention.KVCache` reports its own size; on
# PyTorch's ``meta`` device, which keeps shapes but allocates nothing:

from attention import KVCache

layers, heads, head_dim, length = 32, 32, 128, 4096
for kv_heads in (32, 8, 1):
    cache = KVCache(
        layers,
        batch_size=1,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        max_len=length,
        device="meta",
        dtype=torch.float16,
    )
    formula = 2 * layers * 1 * kv_heads * length * head_dim * 2
    assert cache.nbytes == formula
    print(
        f"H_kv = {kv_heads:2d}: {cache.nbytes / 2**30:6.3f} GiB per sequence "
        f"(H / H_kv = {heads // kv_heads:2d})"
    )

# %%
# 2 GiB per sequence with every head's own keys and values. Sharing each key/value head
# among :math:`H / H_{kv}` query heads divides the cache by that factor: grouped-query
# attention with 8 key/value heads (as Llama 2 70B uses) needs a quarter, and
# multi-query attention with one needs 1/32.
#
# Grouped-query attention
# -----------------------
#
# In :class:`attention.CausalSelfAttention`, ``k_proj`` and ``v_proj`` project to
# ``num_kv_heads * D`` features only, and query head :math:`h` reads key/value head
# :math:`\lfloor h / G \rfloor`, :math:`G = H / H_{kv}`. The readable path never copies
# the shared heads; it views the queries in groups:
#
# .. literalinclude:: ../../attention/decoder.py
#    :language: python
#    :pyobject: grouped_attention
#    :start-at: N, H, L, D = query.shape
#
# Does sharing cost accuracy? Train the model of the previous page with 4 query heads
# per layer and :math:`H_{kv}` = 4, 2 and 1, with the recipe of
# :func:`attention.training.fit_repeat_model` on the task in its quick form, where the
# second half always repeats the first 16 tokens back (its defaults: a few seconds per
# model), and measure the held-out loss on the second half, the copyable one:

from attention.training import fit_repeat_model, next_token_losses

results = {}
for kv_heads in (4, 2, 1):
    model, history, held_out = fit_repeat_model(
        seed=seed, num_heads=4, num_kv_heads=kv_heads, log=None
    )
    model, held_out = model.to(device), held_out.to(device)
    second_half = next_token_losses(model, held_out)[15:].mean().item()
    attn = model.blocks[0].self_attn
    results[kv_heads] = {
        "model": model,
        "second_half": second_half,
        "kv_params": attn.k_proj.weight.numel() + attn.v_proj.weight.numel(),
        "cache_bytes": model.new_cache(1).nbytes,
    }
    print(
        f"H_kv = {kv_heads}: second-half loss {second_half:.4f}, key/value weights per "
        f"layer {results[kv_heads]['kv_params']}, cache "
        f"{results[kv_heads]['cache_bytes']} "
        f"bytes per sequence, {history[-1]['seconds']:.1f} s"
    )
    claim(f"second-half loss with H_kv = {kv_heads}", second_half, below=0.3)

# %%
# All three learn to copy (the losses printed above). The cache and the key/value
# weights shrink by :math:`H / H_{kv}`:

for kv_heads in (2, 1):
    saved = results[4]["cache_bytes"] / results[kv_heads]["cache_bytes"]
    print(f"H_kv = {kv_heads}: cache {saved:.0f}x smaller than with H_kv = 4")
    assert saved == 4 / kv_heads

# %%
# Each key/value head serves a group of query heads, exactly as PyTorch's
# ``F.scaled_dot_product_attention(..., enable_gqa=True)`` does it. On the trained
# multi-query model's first layer:

import torch.nn.functional as F

mqa = results[1]["model"]
attn = mqa.blocks[0].self_attn
with torch.no_grad():
    # the layer's input  (4, 32, E)
    x = mqa.blocks[0].norm1(mqa.embedding(held_out[:4]))
    N, L, E = x.shape
    q = attn.rotary(attn.q_proj(x).view(N, L, 4, -1).transpose(1, 2))  # (N, 4, L, D)
    k = attn.rotary(attn.k_proj(x).view(N, L, 1, -1).transpose(1, 2))  # (N, 1, L, D)
    v = attn.v_proj(x).view(N, L, 1, -1).transpose(1, 2)  # (N, 1, L, D)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = attn.out_proj(expected.transpose(1, 2).reshape(N, L, E))  # (N, L, E)
    ours, _ = attn(x, need_weights=True)
difference = (ours - expected).abs().max().item()
print(
    f"largest difference from F.scaled_dot_product_attention(enable_gqa=True): "
    f"{difference:.1e}"
)
assert difference < 1e-5

# %%
# What to remember
# ----------------
#
# - A KV cache turns each generation step from re-encoding the whole prefix into one
#   query against the stored keys and values; with the causal mask aligned bottom-right
#   it gives the same tokens, and the time per token stays nearly flat.
# - Its memory is
#   :math:`2 \times \text{layers} \times N \times H_{kv} \times L \times D` elements,
#   which is what limits long contexts and large batches.
# - Grouped-query and multi-query attention divide it by :math:`H / H_{kv}`; on the
#   copying task, all three models learn to copy (second-half loss below 0.1), the one
#   with a single key/value head included.
#
# API used on this page: :class:`attention.DecoderLM`, :class:`attention.KVCache`,
# :class:`attention.CausalSelfAttention`, :func:`attention.decoder.grouped_attention`,
# :func:`attention.training.fit_repeat_model` and
# :func:`attention.training.next_token_losses`.
#
# Exercises
# ---------
#
# 1. **The cache's bytes, by hand.** The page's untrained model ``big`` has 2 layers of
#    8 heads, ``embed_dim=128`` and ``max_len=512``, in float32. How many bytes does
#    ``big.new_cache(2)``, a cache for 2 sequences, allocate? Work it out from the
#    formula, then check it.
# 2. **Which key/value head does a query head read?** With :math:`H = 8` query heads and
#    :math:`H_{kv} = 2`, which key/value head does query head 5 read? Check it on random
#    float64 tensors: head 5 of :func:`attention.decoder.grouped_attention` must equal
#    plain causal attention of query head 5 on that one key/value head.
# 3. **A context for one gibibyte.** For the Llama-2-7B-sized model of the page with
#    :math:`H_{kv} = 8` in float16, how long a sequence fits in a 1 GiB cache?
#
# .. solution 1
#
# Two tensors (keys and values) of
# :math:`\text{layers} \times N \times H_{kv} \times \text{max\_len} \times D`
# elements of 4 bytes, with :math:`D = 128 / 8 = 16`.

by_hand = 2 * 2 * 2 * 8 * 512 * 16 * 4
print(f"by hand {by_hand} bytes; KVCache reports {big.new_cache(2).nbytes}")
assert big.new_cache(2).nbytes == by_hand

# %%
# .. solution 2
#
# :math:`G = H / H_{kv} = 4` query heads share each key/value head, so query head
# :math:`h` reads key/value head :math:`\lfloor h / 4 \rfloor`: head 5 reads head 1.

from attention import causal_mask
from attention.decoder import grouped_attention

g = torch.Generator().manual_seed(0)
q = torch.randn(1, 8, 6, 4, generator=g, dtype=torch.float64)  # (N, H, L, D)
k, v = torch.randn(2, 1, 2, 6, 4, generator=g, dtype=torch.float64)  # (N, H_kv, L, D)
out, _ = grouped_attention(q, k, v, causal_mask(6))  # (N, H, L, D)
kv = 5 // 4  # the key/value head of query head 5
head_5 = F.scaled_dot_product_attention(q[:, 5], k[:, kv], v[:, kv], is_causal=True)
print(f"query head 5 reads key/value head {kv}")
assert torch.allclose(out[:, 5], head_5, atol=1e-12)

# %%
# .. solution 3
#
# One position costs :math:`2 \times 32 \times 8 \times 128 \times 2` bytes, so
# :math:`2^{30}` bytes hold :math:`2^{30} / 131072 = 8192` positions.

per_position = 2 * 32 * 8 * 128 * 2
fits = 2**30 // per_position
cache = KVCache(
    32,
    batch_size=1,
    num_kv_heads=8,
    head_dim=128,
    max_len=fits,
    device="meta",
    dtype=torch.float16,
)
print(f"{fits} positions: {cache.nbytes / 2**30} GiB")
assert cache.nbytes == 2**30

# %%
# Next: where tokens are, and how positions enter attention, in
# :ref:`sphx_glr_tutorials_16_positions.py`.

# sphinx_gallery_thumbnail_number = 1
