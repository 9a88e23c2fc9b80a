"""
Serving many readers: paged attention and continuous batching
==============================================================

.. prerequisites:: 13_kv_cache_gqa 16_language_model
   :summary: A key/value cache in blocks with a table per sequence, shared prompts,
      and a scheduler that admits and retires requests at every step: exact, then
      measured.

:ref:`Page 13 <sphx_glr_tutorials_4_generation_13_kv_cache_gqa.py>` kept the keys and
values of one batch that starts and ends together, in a cache allocated for ``max_len``
positions. A server does not work like that. Requests arrive with prompts of every
length, ask for outputs of every length, and finish at different times. Memory reserved
for a position that is never written is memory no other request can use, and a batch
that waits for its slowest member leaves the others idle.

vLLM :cite:p:`kwon2023` found that its re-implementations of the reservation schemes of
Orca :cite:p:`yu2022`, a serving system of 2022, used only 20-38% of their key/value
memory for tokens. vLLM stores the cache in fixed-size *blocks*, found through a *block
table* per sequence, as an operating system pages memory (PagedAttention), and reached
about 96%; it also lets the samples of one prompt share the prompt's blocks. Orca
schedules at every step instead of every batch (*continuous batching*). SGLang
:cite:p:`zheng2024` finds the prompt prefixes that different requests share and reuses
their blocks automatically (RadixAttention), which this page does not build. This page
builds paging, sharing between the samples of one prompt and continuous batching with
the package's own kernel and cache contract, checks that they change no output, and
measures them on the character model of :ref:`page 16
<sphx_glr_tutorials_4_generation_16_language_model.py>`.
"""

# %%
# Setup
# -----
#
# The model is page 16's character-level language model, from the same recipe, trained
# for 100 of its 400 steps to keep this page's build short: what this page measures
# (blocks, bytes, steps and tokens per second) depends on the lengths of the requests,
# not on how good the model's text is. Everything runs on the CPU.

import torch

from attention.recipes import fit_char_lm
from attention.repro import claim, num_threads, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
model, _, (train_ids, val_ids) = fit_char_lm(seed=seed, steps=100)
attn = model.blocks[0].self_attn
print(
    f"torch {torch.__version__}, seed {seed}; {len(model.blocks)} layers, "
    f"{attn.num_heads} query heads sharing {attn.num_kv_heads} key/value head of "
    f"D = {attn.head_dim}, max_len = {model.max_len}"
)

# %%
# Why a server cannot preallocate
# -------------------------------
#
# A server does not know how long each request will be when the request arrives: the
# prompt can be anything up to the context, and the output runs until the model stops.
# :func:`attention.serving.request_mix` draws a mix of requests the way they come in
# practice, most short and a few long: prompt and output lengths from log-normal
# distributions (medians of 12 and 8 characters), prompts cut from the validation text.
# The draw has its own fixed seed, so the mix, and every block, step and position count
# on this page, is the same for every seed of the model.

from attention.serving import request_mix

requests = request_mix(val_ids, 24, max_len=model.max_len, seed=0)
prompts = [len(r.prompt) for r in requests]
outputs = [r.max_new_tokens for r in requests]
print("prompt lengths:", prompts)
print("output lengths:", outputs)
print(
    f"{len(requests)} requests: {sum(prompts)} prompt and {sum(outputs)} output tokens;"
    " "
    f"the longest holds {max(r.total for r in requests)} of max_len = {model.max_len}"
)

# %%
# A contiguous cache (:class:`attention.KVCache`) gives every sequence ``max_len``
# positions, because any of them might grow that long. One position of this model, its
# keys and values in every layer, takes :math:`2 \times \text{layers} \times H_{kv}
# \times D \times 4` bytes:

token_bytes = 2 * len(model.blocks) * attn.num_kv_heads * attn.head_dim * 4
held = sum(r.total for r in requests)
preallocated = len(requests) * model.max_len
print(
    f"{token_bytes} bytes a position; preallocated for the {len(requests)} requests: "
    f"{preallocated * token_bytes / 1024:.0f} KiB, of which their tokens fill "
    f"{held * token_bytes / 1024:.0f} KiB ({held / preallocated:.0%})"
)
assert held / preallocated < 0.25

# %%
# A fifth of the memory holds a token (vLLM found 20-38% in its re-implementations of
# Orca's reservation schemes); the rest is reserved for positions that these requests
# never write.
#
# Blocks and block tables
# -----------------------
#
# :class:`attention.PagedKVCache` keeps one pool of ``num_blocks`` blocks per layer,
# each block ``block_size`` positions of keys and values, and a free list. A sequence
# holds a *block table*: its blocks, in order. Token :math:`t` of a sequence lives in
# slot :math:`t \bmod B` of block ``table[t // B]``; when the last block is full the
# sequence takes a block from the free list, and when it ends its blocks go back. A
# sequence therefore holds at most :math:`B - 1` unused positions.
#
# Before the layers of a model call write, the cache takes the blocks the call needs,
# for every row it names (:meth:`~attention.PagedKVCache.select`), and works out where
# each new token goes:
#
# .. literalinclude:: ../../../attention/paged.py
#    :language: python
#    :pyobject: PagedKVCache._reserve
#
# Each layer then writes its new keys and values into the blocks and reads every row's
# keys and values back through its table, padded to the longest row:
#
# .. literalinclude:: ../../../attention/paged.py
#    :language: python
#    :pyobject: PagedKVCache.write
#
# The rows of one call can hold different lengths, so the cache also says where each
# row's new tokens sit (:meth:`~attention.PagedKVCache.positions`):
# :class:`attention.CausalSelfAttention` rotates each query by its own position and lets
# it see the keys up to it, which also hides the padding at the end of shorter rows.
# Three sequences in a pool of 8 blocks of 4 positions:

from attention import PagedKVCache
from attention.serving import forward_rows

tiny = PagedKVCache.for_model(model, num_blocks=8, block_size=4)
for seq in (0, 1, 2):
    tiny.add(seq)
with torch.no_grad():
    forward_rows(model, tiny, [0, 1, 2], [val_ids[:6], val_ids[6:9], val_ids[9:18]])
print("after the prompts:", tiny.tables, "free:", tiny.free_list)
tiny.free(1)
tiny.add(3)
with torch.no_grad():
    forward_rows(
        model, tiny, [0, 2, 3], [val_ids[18:19], val_ids[19:20], val_ids[20:25]]
    )
print("sequence 1 freed, 3 added, one token more for 0 and 2:", tiny.tables)
assert tiny.tables == {0: [0, 1], 2: [3, 4, 5], 3: [2, 6]}

# %%
# The free list is a stack: a block is taken from its end and a freed block goes back on
# its end, which is why block 6 is handed out before block 7. The blocks of a sequence
# need not be next to each other: sequence 3 took block 2, which sequence 1 gave back,
# and then the next free one. No sequence ever needs
# positions next to each other in memory, so no sequence needs them reserved in advance.
#
# Paged attention is the same attention
# -------------------------------------
#
# Reading keys and values through block tables must change no output. In float64, the
# logits of three prompts of different lengths in one call, against each prompt alone
# without a cache, and then a step of one token for each:

import copy

model64 = copy.deepcopy(model).double()
rows = [val_ids[100:131], val_ids[200:203], val_ids[300:317]]
pages = PagedKVCache.for_model(model64, num_blocks=12, block_size=16)
for seq in range(3):
    pages.add(seq)
with torch.no_grad():
    first = forward_rows(model64, pages, [0, 1, 2], rows)  # (3, V)
    nxt = first.argmax(-1)  # (3,)
    second = forward_rows(model64, pages, [0, 1, 2], [t[None] for t in nxt])  # (3, V)
    gap = 0.0
    for i, row in enumerate(rows):
        alone, _ = model64(torch.cat([row, nxt[i : i + 1]])[None])  # (1, L_i + 1, V)
        gap = max(gap, (alone[0, -2] - first[i]).abs().max().item())
        gap = max(gap, (alone[0, -1] - second[i]).abs().max().item())
print(f"largest logit difference, paged and ragged vs each alone, float64: {gap:.1e}")
claim("float64 logit difference, paged vs alone", gap, below=1e-12)

# %%
# The unit tests (``tests/unit/test_paged.py``) check the same for every kind of
# position, for sliding windows, and for one, some and all query heads sharing a
# key/value head.
#
# Continuous batching
# -------------------
#
# :func:`attention.serving.serve` runs a list of requests greedily through one pool. The
# static batcher, the baseline, takes requests in order into a batch while the batch's
# rectangle (rows times its longest prompt plus its longest output) fits the budget,
# pads the prompts to the longest, and runs every row in every call until the longest
# output is done; only then does the next batch start. The continuous scheduler decides
# at every step: waiting requests join while the pool has room for their whole prompt
# and output (so that none ever has to be evicted), one forward call runs every running
# request (its whole prompt if it just joined, its last token otherwise), and a request
# that has all its tokens leaves and gives its blocks back at once:
#
# .. literalinclude:: ../../../attention/serving.py
#    :language: python
#    :pyobject: _serve
#
# Both run in a pool of 32 blocks of 16 positions: the memory of four sequences
# preallocated to ``max_len``. First in float64, where every request's tokens must equal
# the request generated alone by :meth:`attention.DecoderLM.generate`:

from attention.serving import serve

budget, block = 32, 16
same = 0
with torch.no_grad(), num_threads(1):
    alone = [model64.generate(r.prompt[None], r.max_new_tokens)[0, len(r.prompt) :]
             for r in requests]  # fmt: skip
    for policy in ("continuous", "static"):
        outs, _ = serve(
            model64, requests, num_blocks=budget, block_size=block, policy=policy
        )
        same += sum(torch.equal(out, a) for out, a in zip(outs, alone, strict=True))
print(f"requests with the tokens they get alone: {same} of {2 * len(requests)}")
claim(
    "requests whose tokens differ from their run alone",
    2 * len(requests) - same,
    below=1,
)

# %%
# Every request gets the tokens it gets alone, under both schedules. Now both in
# float32, recording which request holds each block after every step:

with num_threads(1):
    outs, cont = serve(model, requests, num_blocks=budget, block_size=block, trace=True)
    outs_static, static = serve(
        model,
        requests,
        num_blocks=budget,
        block_size=block,
        policy="static",
        trace=True,
    )
for name, stats in (("continuous", cont), ("static", static)):
    print(
        f"{name:>10}: {stats.steps} forward calls, {stats.positions} token positions "
        f"computed (padding included) for {stats.generated} generated tokens, at most "
        f"{stats.peak_blocks} blocks held and {stats.peak_reserved} promised"
    )
assert cont.generated == static.generated == sum(outputs)
assert (
    cont.steps < static.steps
    and max(cont.peak_reserved, static.peak_reserved) <= budget
)

# %%
# The figure shows the pool over the run, one colour per request, white where no request
# holds a block (free, or promised to a running request):

import matplotlib.pyplot as plt

from attention import plot_blocks

fig, axes = plt.subplots(2, 1, figsize=(8, 6.4), sharey=True)
plot_blocks(cont.trace, ax=axes[0], title=f"continuous: {cont.steps} steps")
plot_blocks(static.trace, ax=axes[1], title=f"static: {static.steps} steps")
axes[1].set_xlim(axes[1].get_xlim())
axes[0].set_xlim(axes[1].get_xlim())
fig.suptitle(f"Who holds each of the {budget} blocks, step by step")
fig.tight_layout()
print("The pool over the run, continuous above and static below:")
plt.show()

# %%
# In the continuous run a request that finishes frees its blocks at once and a waiting
# one joins at the next step, and a request's blocks come one at a time as it grows.
# Part of the white is promised rather than free: the scheduler admits a request only
# when the pool can also hold its whole output, so it never has to evict one (vLLM
# admits on the prompt alone, and evicts when the pool runs out). The static batches run
# one after the other: every row keeps its blocks, and keeps computing, until the
# batch's longest output is done, so a batch with one long request ties up the pool for
# as long as that request runs. Colours repeat after 20 requests.
#
# Memory: reserved against holding tokens
# ---------------------------------------
#
# At every step of the continuous run, the tokens in the cache against what each scheme
# reserves for the same running requests: ``max_len`` positions each for a contiguous
# cache, the blocks they hold for the paged one (:func:`attention.serving.memory_use`).
# Averaged over the steps:

from attention.serving import memory_use

use = memory_use(cont, block_size=block, max_len=model.max_len)
tokens = use["tokens"]
print(f"{'':>26}{'reserved':>12}{'holding tokens':>16}")
for name, key in (("preallocated to max_len", "preallocated"), ("paged", "paged")):
    print(
        f"{name:>26}{use[key] * token_bytes / 1024:8.0f} KiB"
        f"{tokens * token_bytes / 1024:12.0f} KiB ({tokens / use[key]:.0%})"
    )
print(
    f"largest mean unused positions per running request, over the steps, paged: "
    f"{use['waste']:.1f} "
    f"(B = {block})"
)
assert use["waste"] < block
assert tokens / use["paged"] > 0.7 and tokens / use["preallocated"] < 0.25

# %%
# Paging wastes less than one block per sequence, so most of its memory holds tokens,
# where preallocation fills about a fifth of its memory. The same 32 blocks preallocated
# to ``max_len`` hold 4 sequences; both runs held more at once:

most = {name: max(n for n, _, _, _ in stats.held) for name, stats in
        (("continuous", cont), ("static", static))}  # fmt: skip
print("most requests running at once:", most)
assert most["continuous"] > most["static"] > budget * block // model.max_len

# %%
# Throughput
# ----------
#
# Generated tokens per second, both schedulers over the same requests and the same 32
# blocks, timed in turn in the same rounds by :func:`attention.measure.compare`, on one
# thread:

from attention.measure import compare, device_description, round_ratios


def run(policy):
    return serve(model, requests, num_blocks=budget, block_size=block, policy=policy)


with num_threads(1):
    timings = compare(
        {"continuous": lambda: run("continuous"), "static": lambda: run("static")},
        rounds=3,
        min_run_time=0.01,
    )
    where = device_description(torch.device("cpu"), torch.float32)
ratios = [1 / r for r in round_ratios(timings["continuous"], timings["static"])]
print(f"median of 3 interleaved rounds; {where}")
for name, t in timings.items():
    print(
        f"{name:>10}: {sum(outputs) / t.median:6.0f} tokens/s ({t.median:.2f} s a run)"
    )
print(f"continuous / static, per round: {min(ratios):.2f}x to {max(ratios):.2f}x")

# %%
# The counts are consistent with the time. The continuous run makes far fewer forward
# calls than the static one (printed above), and on a model this small a call probably
# costs mostly a fixed overhead whatever its rows (not measured here). The two compute
# about as many token positions: the static batches compute rows that are done, and the
# continuous calls pad, because a request that joins pads every running row to its
# prompt's length:

print(
    f"forward calls, static / continuous: {static.steps / cont.steps:.2f}; "
    f"token positions computed: {static.positions / cont.positions:.2f}"
)

# %%
# vLLM reports 2-4x the throughput of Orca and FasterTransformer on GPUs, mostly because
# paging fits more requests in memory at once. There a decoding step is limited by
# reading the weights and the cache from memory: the weights are read once per step
# whatever the rows, so a step of many rows costs little more in weight reads (the cache
# reads grow with the rows), and the number of rows that fit in memory sets the
# throughput. The printed ratio is
# this CPU's, on one thread, for this mix: it is a timing, so the page prints it with
# its spread and claims only the counts.
#
# Sharing a prompt
# ----------------
#
# Several samples of one prompt (or the beams of a beam search) begin with the same keys
# and values. :meth:`attention.PagedKVCache.fork` starts a sequence that shares all of
# another's blocks, counting each block's holders; the first sample to write into a
# shared block that is not full copies it to a block of its own (copy on write), and a
# block returns to the free list when its last holder frees it.
# :func:`attention.serving.sample_many` draws ``n`` samples of one prompt with the
# prompt's blocks shared, or written once per sample:

from attention.serving import sample_many

prompt, n, new = val_ids[1000:1040], 8, 24
blocks = {}
for share in (True, False):
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed)
        samples, blocks[share] = sample_many(
            model64, prompt, n, new, block_size=block, share=share, generator=g
        )
    blocks[share, "samples"] = samples
print(
    f"{n} samples of a {len(prompt)}-character prompt, {new} new characters each: "
    f"{blocks[False]} blocks without sharing, {blocks[True]} with "
    f"({blocks[False] - blocks[True]} saved)"
)
equal = torch.equal(blocks[True, "samples"], blocks[False, "samples"])
print("the same samples with and without sharing:", equal)
assert equal
full = len(prompt) // block
assert blocks[False] == n * -(-(len(prompt) + new - 1) // block)
assert blocks[True] == full + n * (-(-(len(prompt) + new - 1) // block) - full)

# %%
# The two full blocks of the prompt are held once instead of eight times; its third
# block is only partly filled, so every sample but the last copies it before writing its
# own tokens, and the last, its only holder by then, keeps the original.
# The samples are the same, with and without sharing.
#
# What a GPU kernel does differently
# ----------------------------------
#
# This page gathers every row's blocks into a padded tensor and calls one attention
# kernel on it: simple and exact, but it copies the keys and values of every row, every
# layer, every step. vLLM's kernel (and FlashAttention's and FlashInfer's paged kernels)
# takes the block table as an argument and reads each block in place, where it lies in
# the pool (FlashAttention's and FlashInfer's with the online softmax over the blocks,
# vLLM's first kernel with all the scores first and then one softmax); nothing is
# copied, and the
# block size trades the positions wasted in each sequence's last block against the
# kernel's efficiency (vLLM's default is 16). A GPU server
# also packs the rows of a call end to end instead of padding them to the longest, so a
# long prompt that joins does not make every decoding row pay for its length; splits
# long prompts into chunks (chunked prefill) to keep steps short; and, when it admits on
# the prompt alone rather than reserving the whole output as this page does, evicts or
# swaps out requests when the pool runs out.
#
# What to remember
# ----------------
#
# - A cache preallocated to ``max_len`` reserves for the longest request every request
#   might be; on this mix a fifth of it held tokens. Blocks taken as a sequence grows
#   waste less than one block per sequence.
# - A block table maps a sequence's positions to blocks anywhere in the pool, and
#   attention read through it is the same attention, to float64's rounding.
# - Blocks counted by reference and copied on write let the samples of one prompt keep
#   its keys and values once.
# - Continuous batching decides at every step: requests join when the pool has room and
#   leave when done, each with the tokens it gets alone, in fewer forward calls than
#   static batches that wait for their slowest row.
#
# API used on this page: :class:`attention.PagedKVCache`,
# :func:`attention.serving.request_mix`, :func:`attention.serving.forward_rows`,
# :func:`attention.serving.serve`, :func:`attention.serving.memory_use`,
# :func:`attention.serving.sample_many` and :func:`attention.plot_blocks`.
#
# Next: what a layer keeps of the past, in
# :ref:`sphx_glr_tutorials_5_scale_23_latent_and_linear_attention.py`.

# sphinx_gallery_thumbnail_number = 1
