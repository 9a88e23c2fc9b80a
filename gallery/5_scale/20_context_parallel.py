"""
Attention across devices: context parallelism
=============================================

.. prerequisites:: 04_multi_head 18_memory_efficient
   :summary: One sequence split across four processes: ring, all-gather and Ulysses
      attention, checked against one process, with their traffic and memory.

:ref:`Page 18 <sphx_glr_tutorials_5_scale_18_memory_efficient.py>` introduced the online
softmax: attention over blocks of keys, merged one block at a time, that never builds
the whole matrix of scores. The same merge is how attention scales past one device. When
a sequence is too long for one GPU, each device holds a slice of it, and keys and values
(or queries) move between devices.

This page runs that for real. ``torch.distributed`` with the gloo backend runs several
processes on one CPU, so the build of this page starts four processes that split a
sequence between them and compute attention with three strategies from
:mod:`attention.distributed`: a ring, an all-gather, and an all-to-all over heads
(DeepSpeed-Ulysses). It checks them against single-process attention, counts the bytes
each process sends, measures its peak memory, and shows why the causal mask needs a
second way to split the sequence. Everything on this page ran on one CPU, with gloo: the
functions call only ``torch.distributed``'s point-to-point and collective operations,
which the NCCL backend also implements for CUDA tensors, but no GPU run is shown here.
"""

# %%
# Why one device runs out
# -----------------------
#
# A decoder layer keeps the keys and values of the whole sequence, and training keeps
# every layer's activations for the backward pass; both grow linearly with the sequence
# length L. Take a model with 32 heads of dimension 128 in bfloat16 (2 bytes a number)
# and 32 layers:

import torch

from attention.repro import default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
print(f"torch {torch.__version__} on {device}")

heads, head_dim, layers, number = 32, 128, 32, 2
print("       L   K and V, all layers   inputs of each layer's attention, all layers")
for L in (8_192, 131_072, 1_048_576):
    kv = 2 * L * heads * head_dim * number * layers
    # q, k, v and the output, per layer
    activations = 4 * L * heads * head_dim * number * layers
    print(f"{L:>8}  {kv / 2**30:16.1f} GiB  {activations / 2**30:30.1f} GiB")

# %%
# Even with the online softmax, which removes the :math:`L^2` scores, a million tokens
# need more memory for K, V and a few activations than one accelerator has. The way out
# is to split the sequence: with P devices, each holds L/P positions of every tensor,
# and the attention layer, the only place where positions meet, moves what it needs
# between them.
#
# Splitting the sequence
# ----------------------
#
# :func:`attention.distributed.shard_sequence` gives rank r its part. The contiguous
# layout cuts the sequence into P chunks. Under a causal mask it is unfair: the first
# rank's queries see only the first chunk of keys, the last rank's see all of them. The
# zigzag layout cuts the sequence into 2P chunks and gives rank r chunks r and 2P - 1 -
# r, an early one and a late one. It is the layout of the zigzag ring attention of
# ring-flash-attention :cite:p:`zhu2024` and of Llama 3's context parallelism
# :cite:p:`llama2024`; striped attention :cite:p:`brandon2023` balances the same work by
# dealing the positions out one at a time (rank r holds r, r + P, r + 2P, ...), a
# layout this package does not implement:

from attention.distributed import shard_sequence

P, L = 4, 16
positions = torch.arange(L)[:, None].float()  # (L, 1): each row holds its position
for zigzag in (False, True):
    print("zigzag" if zigzag else "contiguous")
    for rank in range(P):
        mine = shard_sequence(positions, rank=rank, world_size=P, zigzag=zigzag)
        # mine: (L/P, 1)
        print(f"  rank {rank}: positions {mine.int().flatten().tolist()}")

# %%
# The figure colours each allowed (query, key) pair of a causal mask by the rank that
# owns the query: that rank computes the pair.

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt
from matplotlib.colors import ListedColormap

colours = ["#0072B2", "#E69F00", "#009E73", "#CC79A7"]  # Okabe-Ito, colour-blind safe
fig, axes = plt.subplots(1, 2, figsize=(8, 4.2), layout="constrained")
for ax, zigzag in zip(axes, (False, True), strict=True):
    owner = torch.empty(L)
    for rank in range(P):
        mine = shard_sequence(positions, rank=rank, world_size=P, zigzag=zigzag)
        owner[mine.long().flatten()] = rank
    grid = owner[:, None].expand(L, L).clone()  # (L, L): the query's rank on every pair
    future = torch.ones(L, L, dtype=torch.bool).triu(1)  # (L, L)
    grid[future] = float("nan")  # no work: left blank
    image = ax.imshow(grid, cmap=ListedColormap(colours), vmin=-0.5, vmax=P - 0.5)
    ax.set_title("zigzag" if zigzag else "contiguous")
    ax.set_xticks(range(0, L, 2))  # whole positions only
    ax.set_yticks(range(0, L, 2))
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
colourbar = fig.colorbar(image, ax=axes, ticks=range(P))
colourbar.set_label("rank that computes the pair")
_ = fig.suptitle(f"Causal attention work per rank, L = {L}, P = {P}")
# sphinx_gallery_end_ignore

# %%
# In the contiguous layout the last rank's band is the widest triangle slice; in the
# zigzag layout every rank owns one short row band and one long one, and the areas
# match.
#
# Three strategies
# ----------------
#
# Every function takes the local shards (N, H, L/P, D) of the queries, keys and values
# and returns the local shard of the output, for either layout (``zigzag=True``), causal
# or not.
#
# **Ring attention** :cite:p:`liu2023`. Each rank keeps its queries; the key/value
# shards travel around a ring of processes. At each step a rank starts sending the shard
# it holds to the next rank, computes its queries' attention over it (an output and a
# log-sum-exp per query), and merges that into its running output with the same step as
# :func:`attention.tiled_attention`:
#
# .. literalinclude:: ../../../attention/functional.py
#    :language: python
#    :pyobject: merge_blocks
#    :no-docstring:
#
# Here is the forward pass; ``_ring_shift`` starts the sends and receives
# (``batch_isend_irecv``), and the loop waits for them only after computing:
#
# .. literalinclude:: ../../../attention/distributed/ring.py
#    :language: python
#    :pyobject: _RingAttention.forward
#
# The backward pass is a custom ``autograd.Function`` too: the keys and values go around
# the ring once more, and their gradients travel with them and end at their owner.
#
# **All-gather attention**, as in Llama 3's context parallelism :cite:p:`llama2024`.
# Every rank gathers all keys and values, then attends locally. Its backward pass sends
# each slice of the gathered gradients to the rank that owns it (a reduce-scatter):
#
# .. literalinclude:: ../../../attention/distributed/all_gather.py
#    :language: python
#    :pyobject: all_gather_attention
#    :no-docstring:
#
# **Ulysses attention** :cite:p:`jacobs2023`. An all-to-all turns sequence shards into
# head shards: each rank then holds every position of H/P heads, attends as on one
# device, and a second all-to-all turns the output back:
#
# .. literalinclude:: ../../../attention/distributed/ulysses.py
#    :language: python
#    :pyobject: _sequence_to_heads
#
# Running them on four processes
# ------------------------------
#
# :func:`attention.distributed.spawn` starts the processes (gloo, talking over 127.0.0.1
# only) and runs one function of the package on each;
# :func:`attention.distributed.run_cases` runs a list of cases on every rank and returns
# what it measured. One start of four processes does everything on this page, because
# starting Python and PyTorch costs more than the cases:
#
# - every strategy, in both layouts, causal and not, in float64: the output and the
#   gradients of the queries, keys and values against ``F.scaled_dot_product_attention``
#   on the whole sequence in one process, and the bytes each rank sends;
# - the forward pass of every strategy in float32 on a longer sequence, on groups of the
#   first 1, 2 and 4 ranks, measuring the peak memory of each rank.

import time

from attention.distributed import STRATEGIES, bytes_formula, run_cases, spawn

SMALL = (1, 4, 32, 8)  # (N, H, L, D): exactness and bytes
LARGE = (1, 4, 1024, 64)  # memory
checks = [
    {"strategy": s, "causal": c, "zigzag": z, "shape": SMALL}
    for s in STRATEGIES
    for c in (False, True)
    for z in (False, True)
]
memory_cases = [
    {"strategy": s, "causal": False, "zigzag": False, "shape": LARGE}
    | {"dtype": "float32", "group_size": p, "check": False, "memory": True}
    for s in STRATEGIES
    for p in (1, 2, 4)
]
start = time.monotonic()
per_rank = spawn(run_cases, checks + memory_cases, seed, nproc=4, timeout=300)
elapsed = time.monotonic() - start
print(
    f"4 processes (gloo, cpu) ran {len(checks + memory_cases)} cases in {elapsed:.1f} s"
)
results = [list(case) for case in zip(*per_rank, strict=True)]  # results[case][rank]
check_results, memory_results = results[: len(checks)], results[len(checks) :]

# %%
# Exactly single-process attention
# --------------------------------
#
# The largest difference over the four ranks, for the output and for the three
# gradients:

print("strategy     causal  layout       output   gradients")
for case, ranks in zip(checks, check_results, strict=True):
    out = max(r["error_out"] for r in ranks)
    grad = max(r["error_grad"] for r in ranks)
    layout = "zigzag" if case["zigzag"] else "contiguous"
    name, causal = case["strategy"], case["causal"]
    print(f"{name:<11}  {causal!s:<6}  {layout:<11}  {out:.1e}  {grad:.1e}")
    assert out < 1e-12 and grad < 1e-12

# %%
# Every strategy gives single-process attention to rounding, forward and backward, in
# both layouts. The gradients are worth this check: each backward pass here (the ring's,
# the all-gather's reduce-scatter, the all-to-all's) is a small ``autograd.Function``
# written by hand, and a collective whose forward pass is right can still have a wrong
# backward pass.
#
# Bytes sent per rank
# -------------------
#
# :func:`attention.distributed.count_work` adds up the tensors each rank passes to the
# collectives. With b the bytes of one rank's shard of K and P ranks, a ring step sends
# K and V once, an all-gather sends a rank's tensor to the P - 1 others, and an
# all-to-all sends the (P - 1)/P of its input that belongs elsewhere
# (:func:`attention.distributed.bytes_formula` writes it out):

print(f"bytes sent by each rank, P = 4, b = {check_results[0][0]['shard_bytes']} bytes")
print("strategy     forward  formula  backward  formula  (in units of b)")
sent = {}
for case, ranks in zip(checks, check_results, strict=True):
    for r in ranks:
        assert (r["bytes_forward"], r["bytes_backward"]) == bytes_formula(
            case["strategy"], 4, r["shard_bytes"]
        )
    if case["causal"] or case["zigzag"]:
        continue  # the bytes do not depend on the mask or the layout
    b = ranks[0]["shard_bytes"]
    forward, backward = bytes_formula(case["strategy"], 4, b)
    name = case["strategy"]
    sent[name] = (ranks[0]["bytes_forward"] / b, ranks[0]["bytes_backward"] / b)
    print(
        f"{name:<11}  {sent[name][0]:7.2f}  {forward / b:7.2f}  "
        f"{sent[name][1]:8.2f}  {backward / b:7.2f}"
    )

# %%
# The measured counts equal the formulas on every rank and in every case (asserted).
# Forward, the ring and the all-gather move the same :math:`2(P-1)b`; the ring's
# backward pass moves more, because the gradients of K and V travel around the whole
# ring to get home. Ulysses moves :math:`4(P-1)b/P` each way: less than the others, and
# it stays below :math:`4b` however many ranks there are, while the others grow with P.
#
# Causal work per rank
# --------------------
#
# :func:`attention.distributed.count_work` also counts the floating-point operations
# (two per multiply-add) of the blocks of scores each rank computes; a causal block
# wholly in the future is skipped.

strategies = list(STRATEGIES)
flops = {}
for case, ranks in zip(checks, check_results, strict=True):
    if case["causal"]:
        flops[case["strategy"], case["zigzag"]] = [r["flops"] for r in ranks]
print("causal forward FLOPs per rank (rank 0 .. 3), N, H, L, D =", SMALL)
for (strategy, zigzag), counts in flops.items():
    imbalance = max(counts) / min(counts)
    layout = "zigzag" if zigzag else "contiguous"
    print(f"{strategy:<11} {layout:<11} {counts}  slowest / fastest: {imbalance:.2f}")
for strategy in ("ring", "all_gather"):
    assert len(set(flops[strategy, True])) == 1  # zigzag: every rank the same work
    assert max(flops[strategy, False]) >= 3 * min(flops[strategy, False])
assert all(len(set(flops["ulysses", z])) == 1 for z in (False, True))

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
width = 0.38
for offset, zigzag, colour in (
    (-width / 2, False, "#D55E00"),
    (width / 2, True, "#0072B2"),
):
    counts = flops["ring", zigzag]
    label = "zigzag" if zigzag else "contiguous"
    ax.bar([r + offset for r in range(4)], counts, width, label=label, color=colour)
ax.set_xticks(range(4), [f"rank {r}" for r in range(4)])
ax.set_ylabel("forward FLOPs")
ax.set_title(f"Causal ring attention: work per rank (P = 4, L = {SMALL[2]})")
_ = ax.legend(title="layout")
# sphinx_gallery_end_ignore

# %%
# With the contiguous layout the last rank computes several times the work of the first
# (the ratio printed above), and the whole ring waits for it at every step. With zigzag
# the bars are level. Ulysses is balanced either way: each rank holds every position of
# its heads.
#
# Peak memory per rank
# --------------------
#
# The forward pass of each strategy on L = 1024 positions (N = 1, H = 4, D = 64,
# float32), run by groups of 1, 2 and 4 of the processes. Each process measures its own
# extra peak memory: the peak of its resident memory during the call (Linux's ``VmHWM``)
# minus the resident memory before it, with the inputs already in place (elsewhere it is
# not measured).

peaks = {s: {} for s in STRATEGIES}
for case, ranks in zip(memory_cases, memory_results, strict=True):
    measured = [r["peak_bytes"] for r in ranks if r is not None]
    if None not in measured:
        peaks[case["strategy"]][case["group_size"]] = max(measured) / 2**20
measured = all(len(p) == 3 for p in peaks.values())
if measured:
    print("largest extra peak memory over the ranks, MiB")
    print("strategy      P = 1   P = 2   P = 4   P = 4 / P = 1")
    for strategy, by_p in peaks.items():
        print(
            f"{strategy:<11}  "
            + "  ".join(f"{by_p[p]:6.1f}" for p in (1, 2, 4))
            + f"   {by_p[4] / by_p[1]:13.2f}"
        )
    # sphinx_gallery_start_ignore
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    for (strategy, by_p), marker in zip(peaks.items(), "osd", strict=True):
        ax.plot([1, 2, 4], [by_p[p] for p in (1, 2, 4)], marker=marker, label=strategy)
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4], ["1", "2", "4"])
    ax.set_yscale("log")
    # ticks at 1, 2, 5, 10, 20, 50... written as plain numbers, not as 2 x 10^1
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("processes P sharing the sequence")
    ax.set_ylabel("extra peak memory per rank (MiB)")
    ax.set_title(f"Peak memory of one forward pass per rank (L = {LARGE[2]}, float32)")
    _ = ax.legend()
    # sphinx_gallery_end_ignore
else:
    print("peak memory needs Linux; not measured here")

# %%
# The figure draws the table's peaks against P, on logarithmic axes. To see why they
# fall as they do: each strategy computes one (L/P) by (L/P) block of scores at a time,
# for each of the H heads (Ulysses: its H/P heads). One block in float32, per rank:

N_large, H_large, L_large, D_large = LARGE
print("one block of scores per rank, MiB\nstrategy      P = 1   P = 2   P = 4")
block_mib = {s: {} for s in STRATEGIES}
for strategy, by_p in block_mib.items():
    for p in (1, 2, 4):
        heads_held = H_large // p if strategy == "ulysses" else H_large
        by_p[p] = N_large * heads_held * (L_large // p) ** 2 * 4 / 2**20  # a block
    print(f"{strategy:<11}  " + "  ".join(f"{by_p[p]:6.2f}" for p in (1, 2, 4)))
kv_mib = 2 * N_large * H_large * L_large * D_large * 4 / 2**20
print(f"K and V of the whole sequence: {kv_mib:.1f} MiB per rank, whatever P")

# sphinx_gallery_start_ignore
if measured:
    from attention.repro import claim

    ratios = {strategy: by_p[4] / by_p[1] for strategy, by_p in peaks.items()}
    for strategy in ("ring", "all_gather"):
        claim(
            f"{strategy}: peak memory at P = 4 over P = 1",
            ratios[strategy],
            below=1 / 3,
        )
    claim(
        "ulysses: P = 4 over P = 1, over the smaller of the other two",
        ratios["ulysses"] / min(ratios["ring"], ratios["all_gather"]),
        below=1,
    )
    for strategy in STRATEGIES:
        claim(
            f"{strategy}: scores and weights at P = 1, share of the peak",
            2 * block_mib[strategy][1] / peaks[strategy][1],
            above=0.5,
        )
        claim(
            f"{strategy}: peak memory at P = 4 over one block of scores",
            peaks[strategy][4] / block_mib[strategy][4],
            above=2,
        )
# sphinx_gallery_end_ignore

# %%
# At P = 1 the block is every head's whole (L, L) matrix; with its weights, it is most
# of one process's peak (the memory table's first column). At P = 4 it is 1/16 as large
# (1/64 for Ulysses), but the peaks fall less (the last column): a rank's shards,
# output, received shards and buffers shrink as :math:`1/P` or not at all. Each rank
# still needs under a third of one process's memory with the ring and the all-gather,
# less with Ulysses. The all-gather also holds the whole sequence's keys and values on
# every rank (the last line above), which P does not divide; a fused kernel in each rank
# (the online softmax of
# :ref:`page 18 <sphx_glr_tutorials_5_scale_18_memory_efficient.py>`) would remove the
# blocks of scores and leave them.


# %%
# When each strategy fits
# -----------------------
#
# What this page could not measure on one CPU, from the papers of :cite:t:`liu2023`,
# :cite:t:`jacobs2023` and :cite:t:`llama2024`:
#
# - **Ring** :cite:p:`liu2023` overlaps each step's transfer with the next block's
#   compute, so on fast links the communication hides behind the arithmetic; it works
#   with any number of heads, and, whatever P, a rank holds at most three key/value
#   shards: its own, the one it computes with and the one arriving.
# - **Ulysses** :cite:p:`jacobs2023` needs the number of heads to divide by P (and with
#   grouped-query attention, few key/value heads limit P), but moves the least data, in
#   a few large all-to-alls that fast interconnects within a node handle well.
# - **All-gather** :cite:p:`llama2024` is the simplest: one collective, and the
#   attention kernel of one device unchanged. Its price is holding the whole sequence's
#   keys and values on every rank; Llama 3 accepts it because with grouped-query
#   attention K and V are much smaller than the queries.
#
# The command
# ``python -m attention.distributed --nproc 4 --strategy ring --seq-len 8192 --causal``
# runs one strategy on local gloo processes and prints the same check and measurements.
# Started by ``torchrun`` on machines with GPUs, the same command puts each rank on its
# GPU and initialises NCCL instead of gloo; that path was not run for this page.
#
# What to remember
# ----------------
#
# - Split along the sequence, attention is the only layer whose positions meet; the
#   online softmax's merge (:func:`~attention.functional.merge_blocks`) puts the partial
#   results from other devices together exactly.
# - Ring attention moves keys and values between neighbours step by step; all-gather
#   attention collects them all at once; Ulysses trades the sequence split for a head
#   split.
# - Under a causal mask, a contiguous split gives the last rank several times the work
#   of the first; the zigzag split gives each rank an early and a late chunk and
#   balances it.
# - Check every distributed gradient against one process: a collective that looks right
#   can have a wrong backward pass.
#
# API used on this page: :func:`attention.distributed.shard_sequence`,
# :func:`attention.distributed.spawn`, :func:`attention.distributed.run_cases` and
# :func:`attention.distributed.bytes_formula`. On every rank ``run_cases`` calls
# :func:`attention.distributed.ring_attention`,
# :func:`attention.distributed.all_gather_attention`,
# :func:`attention.distributed.ulysses_attention` and
# :func:`attention.distributed.count_work`.

# %%
# Exercises
# ---------
#
# 1. **Where the zigzag puts a rank.** With P = 8 ranks and a sequence of L = 32
#    positions, which positions does rank 2 hold in the zigzag layout? Work it out from
#    the rule (2P chunks; rank r takes chunks r and 2P - 1 - r), then check it with
#    :func:`attention.distributed.shard_sequence`.
# 2. **Bytes at eight ranks.** With P = 8, how many units of b does each strategy send
#    forward, and how many times the bytes of Ulysses do the ring and the all-gather
#    send? Check your numbers with :func:`attention.distributed.bytes_formula`.
# 3. **Counting the causal work.** Under a causal mask the query at position i sees
#    i + 1 keys. For L = 32 and P = 4, add up the (query, key) pairs of each rank's
#    queries in both layouts. Show that zigzag gives every rank the same count, and
#    that with contiguous chunks of c = L/P positions the last rank has
#    :math:`1 + 2(P-1)c/(c+1)` times the pairs of the first.

# %%
# .. solution 1
#
# The chunks hold 32 / 16 = 2 positions each; rank 2 takes chunk 2 (positions 4 and 5)
# and chunk 13 (positions 26 and 27).

P8, L32 = 8, 32
predicted = [4, 5, 26, 27]
sequence = torch.arange(L32)[:, None].float()  # (L, 1): each row holds its position
held = shard_sequence(sequence, rank=2, world_size=P8, zigzag=True)  # (L/P, 1)
print(f"rank 2 of {P8} holds positions {held.int().flatten().tolist()}")
assert held.int().flatten().tolist() == predicted

# %%
# .. solution 2
#
# The ring and the all-gather send :math:`2(P-1)b = 14b` forward, Ulysses
# :math:`4(P-1)b/P = 3.5b`: a quarter as much, and the gap widens with P.

b = 1000
forward = {s: bytes_formula(s, P8, b)[0] / b for s in STRATEGIES}
print("forward bytes at P = 8, in units of b:", forward)
assert forward == {"ring": 14.0, "all_gather": 14.0, "ulysses": 3.5}
assert forward["ring"] / forward["ulysses"] == 4.0

# %%
# .. solution 3
#
# Each rank's count is the sum of i + 1 over the positions it holds. In the contiguous
# layout rank r's c queries see the r c keys of the earlier ranks and a triangle of its
# own: :math:`r c^2 + c(c+1)/2` pairs, so the last over the first is
# :math:`1 + 2(P-1)c/(c+1)`.

import math

P4, c = 4, L32 // 4
for zigzag in (False, True):
    pairs = [
        int((shard_sequence(sequence, rank=r, world_size=P4, zigzag=zigzag) + 1).sum())
        for r in range(P4)
    ]
    print(f"{'zigzag' if zigzag else 'contiguous':<10} pairs per rank: {pairs}")
    if zigzag:
        assert len(set(pairs)) == 1 and sum(pairs) == L32 * (L32 + 1) // 2
    else:
        ratio = pairs[-1] / pairs[0]
        print(f"last / first: {ratio:.3f}")
        assert math.isclose(ratio, 1 + 2 * (P4 - 1) * c / (c + 1))

# %%
# Next: the FlashAttention kernels written in Triton, in
# :ref:`sphx_glr_tutorials_5_scale_21_flash_triton.py`.

# sphinx_gallery_thumbnail_number = 1
