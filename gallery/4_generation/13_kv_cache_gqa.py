"""
Generating with a KV cache, and sharing keys and values
=======================================================

.. prerequisites:: 12_decoder_induction_heads
   :summary: Generation with and without a KV cache (the same tokens, less work), the
      cache's memory, and multi-query and grouped-query attention.

A decoder generates one token at a time: predict, append, predict again. Done naively,
every step re-encodes the whole sequence so far, and the work per token grows with its
length. A *KV cache* keeps every layer's keys and values, so each new token costs one
query against them. The cache then becomes the memory bill of generation, and current
models shrink it by giving several query heads one shared key/value head: multi-query
attention :cite:p:`shazeer2019` and grouped-query attention :cite:p:`ainslie2023`.

This page generates with and without :class:`attention.KVCache`, checks what differs
between the two (the rounding, not the tokens), times them and counts their work,
computes the cache's size, and trains the copying model of
:ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py` with one shared
key/value head, on the task where the keys must find an earlier token by its content.
"""

# %%
# Setup
# -----

import math

import torch

from attention.repro import claim, default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# Generation, with and without a cache
# ------------------------------------
#
# :meth:`attention.DecoderLM.generate` runs the loop. Without a cache, each step feeds
# the whole sequence so far. With one, the prompt is encoded once, and each later step
# feeds only the newest token, whose query attends to the cached keys and values of
# every position so far, its own included. Inside each layer,
# :class:`attention.CausalSelfAttention` hands its new keys and values to the cache and
# gets back all of them, the new ones last; it rotates the keys (rotary positions) only
# after reading them back, by the position each holds:
#
# .. literalinclude:: ../../../attention/decoder.py
#    :language: python
#    :pyobject: CausalSelfAttention.forward
#    :no-docstring:
#
# :meth:`attention.KVCache.update` writes them into memory allocated once for
# ``max_len`` positions (:meth:`attention.DecodingState.write`).
#
# The one new query is the *last* of the :math:`S` positions, so the causal mask must be
# aligned bottom-right (:ref:`bottom-right-causal`): :math:`L = 1` query may see all
# :math:`S` keys. The cache is for inference: it refuses to store keys while autograd
# records a graph, so every call that passes one runs under ``torch.no_grad()``. A model
# larger than the one of the previous page (untrained: its tokens are arbitrary, which
# is all this check needs), generating greedily, with and without the cache, and then
# computing the logits of the generated sequence token by token with the cache and in
# one pass without:

from attention import DecoderLM

V = 256
big = DecoderLM(V, embed_dim=128, num_heads=8, num_layers=2, max_len=512)
big = big.to(device).eval()
prompt = torch.randint(V, (2, 8), device=device)


def step_by_step_gap(model, tokens, prompt_length):
    """Largest logit difference between one pass over ``tokens[:, :-1]`` and the same
    logits computed with a cache: the prompt first, then one token at a time."""
    with torch.no_grad():
        full, _ = model(tokens[:, :-1])  # (N, L - 1, V)
        cache = model.new_cache(len(tokens))
        steps = [model(tokens[:, :prompt_length], cache=cache)[0]]  # (N, L0, V)
        for t in range(prompt_length, tokens.shape[1] - 1):
            steps.append(model(tokens[:, t : t + 1], cache=cache)[0])  # (N, 1, V)
    return (torch.cat(steps, dim=1) - full).abs().max().item()


with torch.no_grad():
    cached = big.generate(prompt, 40)
    uncached = big.generate(prompt, 40, use_cache=False)
gap32 = step_by_step_gap(big, cached, prompt.shape[1])
print(
    f"identical tokens: {torch.equal(cached, uncached)}; largest logit difference, "
    f"token by token with the cache vs one pass, float32: {gap32:.1e}"
)
assert torch.equal(cached, uncached)
claim("float32 logit difference, cached vs one pass", gap32, below=1e-4)

# %%
# The tokens are the same, the logits are not, to the last bits. Both paths compute the
# same formula, but not in the same order: a step with the cache multiplies one row of
# :math:`(N, 1, E)` by each weight matrix and runs one query against :math:`S` keys,
# where the single pass multiplies all :math:`(N, L, E)` rows at once and runs the whole
# causal attention; the matrix-multiply and attention kernels split and sum those
# products differently for different shapes, and float32 rounds every partial sum. The
# same comparison in float64, whose rounding is more than :math:`10^8` times finer:

import copy

big64 = copy.deepcopy(big).to(torch.float64)  # the same weights, in float64
gap64 = step_by_step_gap(big64, cached, prompt.shape[1])
print(f"largest logit difference in float64: {gap64:.1e}")
claim("float64 logit difference, cached vs one pass", gap64, below=1e-11)

# %%
# The difference shrinks with the rounding: same maths, different rounding. A greedy
# token changes only where the two best logits are closer than that difference, which
# did not happen here.
#
# Time per token
# --------------
#
# How long one greedy step takes when the sequence so far holds :math:`S` tokens: with
# the cache (the cache holds the first :math:`S - 1` positions and the step feeds the
# last token; :meth:`attention.KVCache.crop` rewinds it before every run) and without
# (the step feeds all :math:`S`). :func:`attention.measure.compare` times the two in
# interleaved rounds, on one thread: on a small model more threads mostly add waiting,
# and on a busy machine they make the times erratic.

from attention.measure import compare, device_description
from attention.repro import num_threads

lengths = [32, 128, 256, 384, 512]
sequence = torch.randint(V, (1, max(lengths)), device=device)
timings = {}  # S -> {"with the cache": Timing, "without": Timing}
with torch.no_grad(), num_threads(1):
    for S in lengths:
        cache = big.new_cache(1)
        _ = big(sequence[:, : S - 1], cache=cache)  # the first S - 1 positions

        def with_cache(cache=cache, S=S):
            cache.crop(S - 1)  # forget the token the previous run appended
            return big(sequence[:, S - 1 : S], cache=cache)  # (1, 1, V)

        def without(S=S):
            return big(sequence[:, :S])  # (1, S, V)

        timings[S] = compare(
            {"with the cache": with_cache, "without": without},
            rounds=5,
            min_run_time=0.05,
            device=device,
        )
    where = device_description(device, torch.float32)

# %%
# Next to each time, the work of the step, counted: two FLOPs per multiply-add of the
# linear layers (the four projections and the feed-forward network of each layer, and
# the output layer), once per position fed, and of attention, two matrix products of
# :math:`E` multiply-adds per query-key pair and layer:


def step_flops(S, new):
    """FLOPs (two per multiply-add) of one pass of ``big`` over ``new`` positions, the
    last of them position ``S``: the linear layers once per new position, and attention
    from each new query to the keys up to its own position."""
    E, F_dim, layers = 128, 4 * 128, 2  # big's sizes (ffn_dim defaults to 4 E)
    linear = new * (layers * (4 * E * E + 2 * E * F_dim) + E * V)  # multiply-adds
    keys_read = sum(range(S - new + 1, S + 1))  # the query at position i reads i keys
    attention = layers * 2 * E * keys_read  # q . k and weight * v, over all heads
    return 2 * linear, 2 * attention


print(f"one step, median (IQR) over 5 interleaved rounds; {where}")
print("          with the cache                  without")
print("   S    MFLOP  attention  time (ms)       MFLOP  time (ms)")
work = {}  # S -> (FLOPs with the cache, FLOPs without)
for S, timing in timings.items():
    cached_linear, cached_attention = step_flops(S, 1)
    work[S] = (cached_linear + cached_attention, sum(step_flops(S, S)))
    fast, slow = timing["with the cache"], timing["without"]
    print(
        f"{S:4d} {work[S][0] / 1e6:8.2f} {cached_attention / work[S][0]:9.0%} "
        f"{fast.ms:6.2f} ({fast.iqr * 1e3:4.2f}) {work[S][1] / 1e6:9.1f} "
        f"{slow.ms:6.2f} ({slow.iqr * 1e3:4.2f})"
    )
# sphinx_gallery_start_ignore
assert work[max(lengths)][1] > 100 * work[max(lengths)][0]
assert work[max(lengths)][0] < 2 * work[min(lengths)][0]
# sphinx_gallery_end_ignore

# %%
# Without the cache, the counted work of a step grows with :math:`S`: the linear layers
# run over all :math:`S` positions and attention over :math:`S(S + 1) / 2` query-key
# pairs, and the time grows with it. With the cache, the work still grows, through
# attention over the cached keys (its share of the step is the ``attention`` column),
# but from a step of about one MFLOP, and by more than half from :math:`S = 32` to 512.
# On a quiet machine its time should then change little (this run's IQRs show how noisy
# the machine was), and at :math:`S = 32` the step without the cache, with about 30
# times the work, takes far less than 30 times the time: at this model's size a step's
# time is mostly the fixed cost of its calls (Python, and the launch of each operation),
# not arithmetic. The cache removes the re-encoding of the :math:`S - 1` earlier
# positions; what still grows with :math:`S` is one query's attention over the cache.
# (The times are measured on this run's machine; where the IQRs are large, a busy
# machine made them noisy and the medians say less.)
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
    print(
        f"H_kv = {kv_heads:2d}: {cache.nbytes / 2**30:6.3f} GiB per sequence "
        f"(H / H_kv = {heads // kv_heads:2d})"
    )
    # sphinx_gallery_start_ignore
    assert cache.nbytes == 2 * layers * 1 * kv_heads * length * head_dim * 2
    # sphinx_gallery_end_ignore

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
# :math:`\lfloor h / G \rfloor`, :math:`G = H / H_{kv}`. Both of its paths pass
# ``enable_gqa=True``: PyTorch's ``F.scaled_dot_product_attention`` without the weights,
# and the package's :func:`attention.scaled_dot_product_attention` with them. The
# package's never copies the shared heads: it views the queries in groups,
# :math:`(N, H_{kv}, G, L, D)`, against keys of :math:`(N, H_{kv}, 1, S, D)` that
# broadcast over each group:
#
# .. literalinclude:: ../../../attention/functional.py
#    :language: python
#    :pyobject: scaled_dot_product_attention
#    :no-docstring:
#
# The result equals attention with each key/value head copied :math:`G` times, and
# PyTorch's own ``enable_gqa=True``:

import torch.nn.functional as F

from attention import causal_mask, scaled_dot_product_attention

g = torch.Generator().manual_seed(seed)
q = torch.randn(2, 8, 6, 16, generator=g, dtype=torch.float64)  # (N, H, L, D)
k, v = torch.randn(2, 2, 2, 6, 16, generator=g, dtype=torch.float64)  # (N, H_kv, L, D)
grouped, _ = scaled_dot_product_attention(q, k, v, causal_mask(6), enable_gqa=True)
copied = F.scaled_dot_product_attention(
    q, k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1), is_causal=True
)  # each key/value head copied for its G = 4 query heads: (N, H, L, D)
torch_gqa = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
print(
    f"largest difference from copied heads: {(grouped - copied).abs().max():.1e}; "
    f"from PyTorch's enable_gqa=True: {(grouped - torch_gqa).abs().max():.1e}"
)
assert torch.allclose(grouped, copied, atol=1e-12)
assert torch.allclose(grouped, torch_gqa, atol=1e-12)

# %%
# Does sharing cost the model anything?
# -------------------------------------
#
# A cache 4 times smaller is worth having only if the model still works. The question
# needs a task where the keys must carry content: on the copying task with a fixed
# period, :ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py` showed
# (exercise 4) that attention can find the token to copy by position alone, whatever its
# keys hold. With a period that changes from sequence to sequence, the induction heads
# must find the earlier occurrence of a token by its content, through keys that depend
# on what layer 1 mixed into each position. The previous page's model, four query heads
# and four key/value heads per layer, comes back from
# :func:`attention.recipes.fit_repeat_model` without training again (the recipe trains
# once per process and arguments); the same recipe with one key/value head per layer
# trains a multi-query model:

from attention.recipes import fit_repeat_model
from attention.training import next_token_losses

T = 16
RECIPE = {  # the previous page's
    "num_heads": 4,
    "min_period": 8,
    "steps": 400,
    "batch_size": 128,
    "lr": 3e-3,
}
mha, mha_history, held_out = fit_repeat_model(seed=seed, **RECIPE)  # H_kv = H = 4
mqa, mqa_history, _ = fit_repeat_model(seed=seed, num_kv_heads=1, **RECIPE)
held_out = held_out.to(device)
# sphinx_gallery_start_ignore
assert mha.new_cache(1).nbytes == 4 * mqa.new_cache(1).nbytes
# sphinx_gallery_end_ignore
for kv_heads, history in ((4, mha_history), (1, mqa_history)):
    curve = [row["second_half"] for row in history]  # each batch's mean
    # the first step from which ten steps average a second-half loss below 1
    copies = next(
        (i + 1 for i in range(len(curve) - 9) if sum(curve[i : i + 10]) < 10), None
    )
    when = "never" if copies is None else f"first at step {copies}"
    print(
        f"H_kv = {kv_heads}: trained in {history[-1]['seconds']:.1f} s; ten steps "
        f"average a second-half loss below 1 {when}"
    )

# %%
# The second half's loss during training, for the two models (the mean of each batch,
# as the recipe records it):

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
for kv_heads, history in ((4, mha_history), (1, mqa_history)):
    steps = [row["step"] for row in history]
    second_half = [row["second_half"] for row in history]  # each batch's mean
    ax.plot(steps, second_half, label=f"$H_{{kv}}$ = {kv_heads}")
# sphinx_gallery_start_ignore
ax.axhline(math.log(32), color="gray", linestyle=":", label=r"chance, $\ln V$")
ax.set_xlabel("training step")
ax.set_ylabel("second-half loss of the batch")
ax.set_ylim(bottom=0)
ax.legend(loc="upper right")
ax.set_title("Learning to copy with four key/value heads per layer, and with one")
plt.show()
# sphinx_gallery_end_ignore

# %%
# On the held-out sequences: the second-half loss, and the induction score of the
# best head of layer 2 (the weight a query of the second half puts on the key after the
# earlier occurrence of its own token, as on the previous page):

N, L = held_out.shape
positions = torch.arange(L, device=device)
same = held_out[:, :, None] == held_out[:, None, :]  # (N, L, L): query i, key j
earlier = same & (positions[None, :] < positions[:, None])  # key j < query i
queries = positions[T:]  # (T,)
after = torch.where(earlier, positions, -1).amax(-1)[:, queries] + 1  # (N, T)
rows = torch.arange(N, device=device)[:, None]  # (N, 1)

results = {}
for kv_heads, model in ((4, mha), (1, mqa)):
    model = model.to(device)
    with torch.no_grad():
        _, weights = model(held_out, need_weights=True)  # per layer (N, H, L, L)
    on_after = weights[1].permute(0, 2, 3, 1)[rows, queries, after]  # (N, T, H)
    results[kv_heads] = {
        "loss": next_token_losses(model, held_out)[T:].mean().item(),
        "induction": on_after.mean(dim=(0, 1)).max().item(),
    }
    print(
        f"H_kv = {kv_heads}: held-out second-half loss "
        f"{results[kv_heads]['loss']:.3f}, best induction score "
        f"{results[kv_heads]['induction']:.2f}"
    )
# sphinx_gallery_start_ignore
claim("second-half loss with H_kv = 4", results[4]["loss"], below=math.log(32))
claim("second-half loss with H_kv = 1", results[1]["loss"], below=math.log(32))
# sphinx_gallery_end_ignore

# %%
# Whether a model learns the copy in 400 steps depends on the run, whichever its number
# of key/value heads: this run's numbers are printed above, and one run can favour
# either model. Over the 39 runs checked
# when this page was written (seeds 0 to 9 on three CPU kernels, and seeds 11, 12, 18
# and 20 to 25 on one), the model with four key/value heads per layer formed an
# induction head (a best score above 0.2) in 38, the model with one in 35 (one of them
# only just: at seed 24, a score of 0.25 and a second-half loss of 1.4). Where a model
# did not
# (seeds 11, 18, 21 and 25 with one key/value head, 21 with four), its best score stayed
# below 0.1 and its second-half loss above 1.5, between copying and chance. So sharing
# one key/value head does not make the content lookup impossible, and in this budget it
# was learned less often with one key/value head than with four (35 against 38 of 39): a
# count over a few dozen runs, not a measured rate. Every run beats chance
# (:math:`\ln V`) on the second half. What sharing costs a large model on real text,
# :cite:t:`ainslie2023` measured by up-training multi-head checkpoints of T5 into
# grouped- and multi-query models with a small fraction of the original pre-training
# compute: with a few key/value heads they came close to multi-head quality; with one
# they fell further behind.
#
# What to remember
# ----------------
#
# - A KV cache turns each generation step from re-encoding the whole prefix into one
#   query against the stored keys and values. With the causal mask aligned
#   bottom-right it computes the same formula as the pass without a cache, in another
#   order: the logits differ by float32 rounding, and the greedy tokens here are the
#   same.
# - Its memory is
#   :math:`2 \times \text{layers} \times N \times H_{kv} \times L \times D` elements,
#   which is what limits long contexts and large batches.
# - Grouped-query and multi-query attention divide it by :math:`H / H_{kv}`. On a
#   copying task that needs content lookup, a model with one key/value head per layer
#   can still form an induction head; in 400 steps it did so less often than the model
#   with four in the runs counted here (35 and 38 of 39).
#
# API used on this page: :class:`attention.DecoderLM`, :class:`attention.KVCache`,
# :func:`attention.scaled_dot_product_attention`, :func:`attention.measure.compare`,
# :func:`attention.measure.device_description`, :func:`attention.repro.num_threads`,
# :func:`attention.recipes.fit_repeat_model` and
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
#    :math:`H_{kv} = 2`, which key/value head does query head 5 read? Check it on the
#    random tensors above: head 5 of ``grouped`` must equal plain causal attention of
#    query head 5 on that one key/value head.
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
# sphinx_gallery_start_ignore
assert big.new_cache(2).nbytes == by_hand
# sphinx_gallery_end_ignore

# %%
# .. solution 2
#
# :math:`G = H / H_{kv} = 4` query heads share each key/value head, so query head
# :math:`h` reads key/value head :math:`\lfloor h / 4 \rfloor`: head 5 reads head 1.

kv = 5 // 4  # the key/value head of query head 5
head_5 = F.scaled_dot_product_attention(q[:, 5], k[:, kv], v[:, kv], is_causal=True)
print(f"query head 5 reads key/value head {kv}")
assert torch.allclose(grouped[:, 5], head_5, atol=1e-12)

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
# sphinx_gallery_start_ignore
assert cache.nbytes == 2**30
# sphinx_gallery_end_ignore

# %%
# Next: where tokens are, and how positions enter attention, in
# :ref:`sphx_glr_tutorials_4_generation_14_positions.py`.

# sphinx_gallery_thumbnail_number = 1
