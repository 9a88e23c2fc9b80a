"""
Memory-efficient attention: the online softmax
==============================================

.. prerequisites:: 02_scaled_dot_product

The reference path of :ref:`sphx_glr_tutorials_02_scaled_dot_product.py` computes every
score of every query against every key, an :math:`(L, S)` matrix per head, before the
softmax. That matrix grows as the square of the sequence length, and long before the
arithmetic becomes slow it no longer fits in memory. The fused kernels behind
``F.scaled_dot_product_attention`` avoid it with one idea: the softmax can be computed a
block of keys at a time, with a running maximum and a running sum, so the matrix never
exists: the online softmax of :cite:t:`milakov2018`, applied to attention by
:cite:t:`rabe2021` and made fast on GPUs by FlashAttention :cite:p:`dao2022,dao2023`.

This page works through that *online softmax* on one row with every number printed,
reads :func:`attention.tiled_attention`, which applies it to whole tensors in plain
PyTorch, checks it against the reference, and measures peak memory and time against the
sequence length. Timing is explained in
:ref:`sphx_glr_tutorials_12_performance.py`.
"""

# %%
# A matrix that grows as L squared
# --------------------------------
#
# With 8 heads in float32, the scores of one sequence take :math:`8 \cdot L^2 \cdot 4`
# bytes, and the softmax makes a second matrix of the same size:

import torch

from attention.repro import claim, default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else "cuda" if there is a GPU, else "cpu"
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

for L in (1024, 4096, 16384, 65536):
    print(f"L = {L:>5}: scores of 8 heads take {8 * L * L * 4 / 2**30:7.2f} GiB")

# %%
# Softmax one block at a time
# ---------------------------
#
# Take a single query's row of scores :math:`s_1, \dots, s_S` and one number per key as
# its value. Attention returns :math:`\sum_j w_j v_j` with
# :math:`w_j = e^{s_j - m} / \sum_k e^{s_k - m}`, where subtracting the row's maximum
# :math:`m` changes nothing mathematically and keeps ``exp`` from overflowing.
#
# The maximum seems to need the whole row first. It does not. Read the keys in blocks
# and keep three running numbers: the largest score seen so far ``m``, the sum ``l`` of
# :math:`e^{s_j - m}` over the keys seen so far, and the weighted sum ``acc`` of
# :math:`e^{s_j - m} v_j`. When a block raises the maximum from ``m`` to ``m_new``,
# everything accumulated so far was measured against the old maximum; multiplying it by
# :math:`\alpha = e^{m - m_\text{new}}` puts it against the new one. After each block,
# ``acc / l`` is attention over the keys seen so far; after the last block, over all of
# them.

scores = torch.tensor([0.5, 1.0, -0.3, 2.5, 0.1, -1.2, 3.0, 0.7], dtype=torch.float64)
values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], dtype=torch.float64)
block = 3  # keys per block: 3 + 3 + 2

running_max = torch.tensor(float("-inf"), dtype=torch.float64)  # m
running_sum = torch.tensor(0.0, dtype=torch.float64)  # l
running_acc = torch.tensor(0.0, dtype=torch.float64)  # acc
alphas = []
print("block  scores               max m   alpha   sum l     acc   acc / l")
for start in range(0, len(scores), block):
    s, v = scores[start : start + block], values[start : start + block]
    new_max = torch.maximum(running_max, s.max())
    alpha = torch.exp(running_max - new_max)  # rescales what came before
    p = torch.exp(s - new_max)
    running_sum = alpha * running_sum + p.sum()
    running_acc = alpha * running_acc + (p * v).sum()
    running_max = new_max
    alphas.append(alpha.item())
    shown = " ".join(f"{x:4.1f}" for x in s)
    print(
        f"{start // block:>5}  {shown:<19}  {running_max:5.2f}  {alpha:6.3f}  "
        f"{running_sum:6.3f}"
        f"  {running_acc:6.3f}  {running_acc / running_sum:7.4f}"
    )

online = running_acc / running_sum
reference = torch.softmax(scores, dim=0) @ values
print(f"online: {online:.12f}   softmax over the whole row: {reference:.12f}")
assert torch.allclose(online, reference, rtol=0, atol=1e-12)
# the maximum grew twice
assert alphas[0] == 0 and 0 < alphas[1] < 1 and 0 < alphas[2] < 1

# %%
# Before the first block nothing has been accumulated, so its :math:`\alpha` is 0. The
# second block holds a larger score than the first, so the sum and the weighted sum
# carried over are multiplied by the :math:`\alpha` printed on its line, below 1, before
# the new terms are added; the third block raises the maximum again. The final
# ``acc / l`` equals the softmax-weighted average computed from the whole row, to the
# last digit printed. Nothing but three numbers per query was carried from one block to
# the next.
#
# From one row to whole tensors
# -----------------------------
#
# :func:`attention.tiled_attention` runs the same loop for all queries and heads at
# once: ``m``, ``l`` and ``acc`` become tensors with one row per query, and each block's
# scores are a small matrix product. The queries are also taken a group of rows at a
# time, so that one tile of scores stays in the processor's cache, and with
# ``causal=True`` the blocks that lie entirely in a query's future are never computed:
#
# .. literalinclude:: ../../attention/functional.py
#    :language: python
#    :pyobject: tiled_attention
#    :start-at: L, S = query.shape
#    :dedent: 4
#
# (Before these lines the function checks its arguments.) Each block's sums, taken
# against the block's own maximum, join the running ones in
# :func:`attention.functional.online_softmax_merge`, the rescaling of the single row
# above written for both sides:
#
# .. literalinclude:: ../../attention/functional.py
#    :language: python
#    :pyobject: online_softmax_merge
#    :start-at: m_new =
#
# Two details go beyond the single row. A causal block that crosses the diagonal blocks
# its masked scores as the reference path does (:ref:`blocking-keys`), zeroing their
# ``exp``, so a query that has not yet seen an allowed key adds nothing. And the running
# maximum is detached from autograd: the output does not depend on it, so its gradient
# is zero anyway, and detaching it lets the scores be overwritten in place.
#
# Exactly the reference
# ---------------------
#
# In float64 the tiled path and the reference agree to rounding, with and without a
# causal mask, for query and key lengths that the blocks do not divide:

from attention import causal_mask, scaled_dot_product_attention, tiled_attention

torch.manual_seed(seed)
for L, S, causal in [
    (300, 300, False),
    (300, 300, True),
    (200, 450, True),
    (450, 200, True),
]:
    q = torch.randn(2, 4, L, 32, dtype=torch.float64, device=device)  # (N, H, L, D)
    k = torch.randn(2, 4, S, 32, dtype=torch.float64, device=device)  # (N, H, S, D)
    v = torch.randn(2, 4, S, 32, dtype=torch.float64, device=device)  # (N, H, S, D)
    mask = causal_mask(L, S, device=device) if causal else None
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    out = tiled_attention(q, k, v, causal=causal, block_size=64)
    error = (out - expected).abs().max().item()
    print(f"L={L} S={S} causal={causal!s:>5}: largest difference {error:.1e}")
    assert error < 1e-10

# %%
# Peak memory against the sequence length
# ---------------------------------------
#
# How much memory does one call need beyond its inputs? On a GPU, PyTorch's allocator
# keeps the peak (``torch.cuda.max_memory_allocated``). On the CPU it keeps no
# statistics, so the measurement asks the operating system: Linux records the peak
# resident memory of a process (``VmHWM`` in ``/proc/self/status``) and lets the process
# reset it (writing ``5`` to ``/proc/self/clear_refs``). The peak during the call minus
# the resident memory just before it is every byte the call touched. ``malloc_trim``
# first hands memory freed by earlier steps back to the system, so that reused memory is
# counted too. Elsewhere the measurement is skipped.

import ctypes
import re
from pathlib import Path


def _resident(field):
    """A memory figure of this process from /proc/self/status, in bytes."""
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE).group(1)) * 1024


def peak_memory_mib(fn, *args):
    """Extra peak memory of ``fn(*args)`` in MiB, or None where it cannot be
    measured."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn(*args)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    try:
        # return freed heap memory to the system
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        # reset the peak to the current size
        Path("/proc/self/clear_refs").write_text("5")
    except (OSError, AttributeError):
        return None  # not Linux with glibc
    before = _resident("VmRSS")
    fn(*args)
    return (_resident("VmHWM") - before) / 2**20


# %%
# Three paths, on one sequence with 4 heads of dimension 64, for lengths from 256 to
# 4096: the reference, the tiled path (blocks of 512 keys) and PyTorch's own fused
# kernel, ``F.scaled_dot_product_attention`` ("fused" in the tables).

import torch.nn.functional as F

paths = {
    "reference": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],
    "tiled": lambda q, k, v: tiled_attention(q, k, v),
    "fused": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
}
lengths = [256, 512, 1024, 2048, 4096]
H, D = 4, 64


def inputs(L):
    g = torch.Generator(device=device).manual_seed(L)
    # (N, H, L, D)
    return [torch.randn(1, H, L, D, device=device, generator=g) for _ in range(3)]


threads = torch.get_num_threads()
# Memory does not depend on the number of threads, and with one thread the tiled loop's
# many small steps never wait for each other when other programs share the cores.
torch.set_num_threads(1)
with torch.no_grad():
    for fn in paths.values():
        fn(*inputs(64))  # the first call of each path sets up libraries: not counted
    memory = {
        name: [peak_memory_mib(fn, *inputs(L)) for L in lengths]
        for name, fn in paths.items()
    }
torch.set_num_threads(threads)

measured = memory["reference"][0] is not None


def out_and_tile_mib(L, block_size=512):
    """
    What the tiled path must hold, by count: the output and one tile of scores, in MiB.
    """
    # the query rows of one tile (see tiled_attention)
    rows = min(L, 2**17 // block_size)
    return (H * L * D + H * rows * min(block_size, L)) * 4 / 2**20


if measured:
    print(f"extra peak memory in MiB on {device} (float32, N = 1, H = {H}, D = {D})")
    print("    L   scores  out+tile  " + "  ".join(f"{name:>9}" for name in paths))
    for i, L in enumerate(lengths):
        scores_mib = H * L * L * 4 / 2**20
        row = "  ".join(f"{memory[name][i]:9.1f}" for name in paths)
        print(f"{L:>5}  {scores_mib:7.1f}  {out_and_tile_mib(L):8.1f}  {row}")
    growth = memory["reference"][-1] / memory["reference"][-2]
    print(
        f"from L = {lengths[-2]} to {lengths[-1]}, the reference's memory grew "
        f"{growth:.1f}x"
    )
else:
    print("peak memory needs Linux or a CUDA GPU; not measured here")

# %%
# The ``scores`` column is the size of one (H, L, L) matrix of scores. The reference
# needs about twice that (the scores, then the weights), so its memory grows fourfold
# each time L doubles (the last line above). The tiled path needs the output, which
# grows with L, and one tile of scores, which does not: the ``out+tile`` column counts
# those bytes. The measured column sits above that count (the temporaries of a tile, and
# the noise of measuring a whole process) and grows far more slowly than the
# reference's; at the shortest length, where one block holds every key, the tiled path
# saves nothing. What the table shows is the gap at the long lengths: there the tiled
# path stays at a few percent of the reference (checked for the longest). Torch's
# kernel, the same idea written in C++, behaves the same way.

# sphinx_gallery_start_ignore
if measured:
    scores_last = H * lengths[-1] ** 2 * 4 / 2**20
    ratio = memory["reference"][-1] / scores_last
    # scores, weights
    claim("reference memory / one score matrix", ratio, above=1.5, below=3)
    # quadratic: 4x
    claim("reference memory growth per doubling", growth, above=3, below=5)
    for name in ("tiled", "fused"):
        largest = max(memory[name])
        claim(
            f"{name}: memory / the reference's",
            largest / memory["reference"][-1],
            below=0.15,
        )
        claim(
            f"{name}: memory / (8 out+tile + 16 MiB)",
            largest / (8 * out_and_tile_mib(lengths[-1]) + 16),
            below=1,
        )
# sphinx_gallery_end_ignore

import matplotlib.pyplot as plt


def plot_against_length(lengths, values, ylabel, title):
    """One line per path: ``values[name]`` against the sequence length, on log-log
    axes."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    for name, marker in zip(paths, "osd", strict=True):
        ax.plot(lengths, values[name], marker=marker, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(L) for L in lengths])
    ax.set_yscale("log")
    ax.set_xlabel("sequence length L = S")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()


if measured:
    plot_against_length(
        lengths,
        memory,
        "extra peak memory (MiB)",
        f"Peak memory of one attention call ({device}, H = {H}, float32)",
    )

# %%
# On logarithmic axes a power of L is a straight line whose slope is the exponent: the
# reference's line has a slope of about 2, the block-wise ones a much smaller one, and
# at the longest length the reference sits far above them (the table gives the numbers).
#
# Time against the sequence length
# --------------------------------
#
# Keeping memory small must not cost much time. The tiled path does the same matrix
# products as the reference and a few more elementwise passes, in a Python loop over
# tiles; the fused kernel does the same work in compiled code. The times below are
# medians of repeated calls, measured with ``torch.utils.benchmark`` (on a GPU it
# synchronises around each measurement).

from torch.utils import benchmark


def median_ms(fn, *args):
    """Median time of ``fn(*args)`` in milliseconds, over at least 0.2 s of calls."""
    timer = benchmark.Timer("fn(*args)", globals={"fn": fn, "args": args})
    return timer.blocked_autorange(min_run_time=0.2).median * 1e3


timing_lengths = [256, 512, 1024, 2048]
with torch.no_grad():
    times = {
        name: [median_ms(fn, *inputs(L)) for L in timing_lengths]
        for name, fn in paths.items()
    }

print(f"median time in ms on {device}, float32, torch {torch.__version__}")
print("    L  " + "  ".join(f"{name:>9}" for name in paths) + "  tiled / fused")
for i, L in enumerate(timing_lengths):
    row = "  ".join(f"{times[name][i]:9.2f}" for name in paths)
    ratio = times["tiled"][i] / times["fused"][i]
    print(f"{L:>5}  {row}  {ratio:13.2f}")

plot_against_length(
    timing_lengths,
    times,
    "median time per call (ms)",
    f"Time of one attention call ({device}, H = {H}, float32)",
)

# %%
# The three paths do the same :math:`O(L^2)` work; they differ in memory and in how fast
# each operation runs. The last column compares the Python loop with PyTorch's compiled
# kernel on this machine, in this run. ``torch.utils.benchmark``'s ``Timer`` runs
# single-threaded unless told otherwise, so the figure compares the code, not how it
# shares the cores; the benchmark harness (``make bench``) times the same comparison
# with every core.
#
# What to remember
# ----------------
#
# - Softmax does not need the whole row at once: a running maximum, a running sum and a
#   rescaling factor :math:`e^{m_\text{old} - m_\text{new}}` give exactly the same
#   result, one block of keys at a time.
# - Attention computed that way never holds the :math:`(L, S)` scores: it needs the
#   output (which grows with L) and one tile, instead of :math:`L^2` scores, for the
#   same number of operations.
# - This is the idea inside the fused kernels (FlashAttention :cite:p:`dao2022`, and its
#   CPU counterpart) that ``F.scaled_dot_product_attention`` runs;
#   :func:`attention.tiled_attention` shows it in plain PyTorch, exact against
#   :func:`attention.scaled_dot_product_attention`.
#
# API used on this page: :func:`attention.tiled_attention`,
# :func:`attention.scaled_dot_product_attention` and :func:`attention.causal_mask`.

# %%
# Exercises
# ---------
#
# 1. **Any block size, any order.** Run the online softmax of the first section on the
#    same 8 scores and values with blocks of 1 to 8 keys, and with the blocks taken
#    last to first, merging each block with
#    :func:`attention.functional.online_softmax_merge`. Does the result change?
# 2. **Two parts, merged.** Ring attention gives each process part of the keys. Split
#    the keys and values of a float64 ``(2, 4, 300, 32)`` problem into the first 100
#    and the other 200, compute each part's maximum, sum and weighted sum, merge them,
#    and compare with :func:`attention.scaled_dot_product_attention`.
# 3. **What causal skipping saves.** With ``L = S = 1024`` and ``block_size=256``,
#    ``tiled_attention`` takes the queries 512 rows at a time. Predict the fraction of
#    the non-causal matrix-product work that ``causal=True`` does, then count both with
#    ``torch.utils.flop_counter.FlopCounterMode``. Why is it not one half?

# %%
# .. solution 1
#
# Every split and every order gives the softmax-weighted average of the whole row to
# float64 rounding: the result does not depend on the order in which the keys arrive.

from attention.functional import online_softmax_merge


def part_sums(s, v):
    """What a part of the keys contributes: the maximum of its scores ``s`` (*, L, B),
    the sum of exp(s - max), and that sum times the values ``v`` (*, B, Dv)."""
    m = s.amax(-1, keepdim=True)  # (*, L, 1)
    e = (s - m).exp()  # (*, L, B)
    return m, e.sum(-1, keepdim=True), e @ v  # (*, L, B) @ (*, B, Dv) -> (*, L, Dv)


gaps = {}
for size in range(1, len(scores) + 1):
    for reverse in (False, True):
        starts = list(range(0, len(scores), size))[:: -1 if reverse else 1]
        running = (
            torch.full((1,), float("-inf"), dtype=torch.float64),  # m
            torch.zeros(1, dtype=torch.float64),  # l
            torch.zeros(1, dtype=torch.float64),  # acc
        )
        for start in starts:
            block_slice = slice(start, start + size)
            block_parts = part_sums(scores[block_slice], values[block_slice])
            running = online_softmax_merge(*running, *block_parts)
        _, running_sum, running_acc = running
        gaps[size, reverse] = (running_acc / running_sum - reference).abs().item()
print(f"largest difference from the whole-row softmax: {max(gaps.values()):.1e}")
assert max(gaps.values()) < 1e-12

# %%
# .. solution 2
#
# The merge rescales both parts to the larger maximum and adds them: the result is
# attention over all 300 keys, whichever part holds the largest score.

g = torch.Generator(device=device).manual_seed(seed)
q, k, v = (
    torch.randn(2, 4, 300, 32, dtype=torch.float64, device=device, generator=g)
    for _ in range(3)
)  # (N, H, L, D) each
# (N, H, L, D) @ (N, H, D, S) -> (N, H, L, S)
all_scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
first = part_sums(all_scores[..., :100], v[..., :100, :])  # keys 0 to 99
second = part_sums(all_scores[..., 100:], v[..., 100:, :])  # keys 100 to 299
_, merged_sum, merged_acc = online_softmax_merge(*first, *second)
merged = merged_acc / merged_sum  # (N, H, L, D)
expected, _ = scaled_dot_product_attention(q, k, v)
print(f"merged parts against the reference: {(merged - expected).abs().max():.1e}")
assert torch.allclose(merged, expected, rtol=0, atol=1e-12)

# %%
# .. solution 3
#
# The first 512 queries need only the keys up to 511, so 2 of the 4 key blocks; the
# second 512 need all 4: 6 blocks instead of 8, three quarters of the work. Skipping
# works by whole blocks for a whole group of queries, and the blocks that cross the
# diagonal are computed in full, then masked; smaller blocks and groups get closer to
# one half.

from torch.utils.flop_counter import FlopCounterMode

q, k, v = (torch.randn(1, 1, 1024, 8, device=device, generator=g) for _ in range(3))
flop = {}
torch.set_num_threads(1)  # many small steps: one thread waits for no other
for causal in (False, True):
    with FlopCounterMode(display=False) as counter:
        _ = tiled_attention(q, k, v, causal=causal, block_size=256)
    flop[causal] = counter.get_total_flops()
torch.set_num_threads(threads)
print(
    f"matrix-product operations: {flop[False]:,} without the mask, {flop[True]:,} "
    f"with it; causal / full = {flop[True] / flop[False]}"
)
assert flop[True] * 4 == flop[False] * 3

# %%
# Next: the decoder half of the Transformer, a model that predicts the next token, in
# :ref:`sphx_glr_tutorials_14_decoder_induction_heads.py`.

# sphinx_gallery_thumbnail_number = 1
