"""
FlashAttention as a GPU kernel, in Triton
=========================================

.. prerequisites:: 18_memory_efficient
   :summary: The forward and backward of FlashAttention written as Triton kernels:
      programs, blocks, what stays on the chip, and the causal blocks never visited.

:ref:`Page 18 <sphx_glr_tutorials_5_scale_18_memory_efficient.py>` computed attention a
tile at a time with :func:`attention.tiled_attention`: the online softmax forward, and a
backward that recomputes each tile's weights from the log-sum-exp of its rows. Its
arithmetic is FlashAttention's, but not its speed. Every step of its loop is a PyTorch
operation on a whole tile, which reads its inputs from memory and writes its result
back, so a tile of scores still travels to memory and back several times. What makes
FlashAttention fast is where the loop runs: inside one *kernel*, in which each program
keeps its block of queries, its running maximum, sum and output on the chip, and only
the blocks of keys and values stream in from memory :cite:p:`dao2022,dao2023`.

This page reads such a kernel, written in Triton :cite:p:`tillet2019` in
:mod:`attention.flash_triton`: the forward, the two kernels of the backward, and the
blocks that a causal mask lets them skip. It runs them on this machine, compiled on a
GPU or, without one, in Triton's interpreter, checks the outputs and gradients against
PyTorch's ``F.scaled_dot_product_attention``, and counts the work the programs do.
Timings on a GPU are shown from recorded results, when there are any.
"""

# %%
# Programs, blocks and the grid
# -----------------------------
#
# A GPU runs a kernel as a *grid* of programs (CUDA's thread blocks). Each program runs
# on one streaming multiprocessor, which has its own registers and a small *shared
# memory*, on the chip and far faster than the main memory that holds the tensors. In
# Triton a program is written as operations on whole blocks (``tl.load``, ``tl.dot``,
# ``tl.store``); Triton spreads each block over the program's threads and registers, and
# stages the operands of the matrix units through shared memory.
#
# The forward kernel's grid has one program per block of ``block_size`` queries of one
# head: ``(ceil(L / block_size), N * H)`` programs, all independent. Each carries its
# queries and the state of its rows (running output, maximum and sum) for the whole
# computation, and holds one block of scores, keys and values at a time as scratch; each
# program reads each block of keys and values once. Priced in float16, as a GPU would
# run it (the checks below run float32):

import torch

from attention.repro import default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

N, H, L, D, block = 1, 8, 4096, 64, 64
grid = (-(-L // block), N * H)  # ceil(L / block) query blocks, for every sequence, head
print(f"N = {N}, H = {H}, L = S = {L}, D = {D}, blocks of {block}: grid {grid}, "
      f"{grid[0] * grid[1]} programs")  # fmt: skip
held = {
    "its queries, (block, D) in float16": block * D * 2,
    "running output, (block, D) in float32": block * D * 4,
    "running maximum and sum, (block,) each in float32": 2 * block * 4,
    "one block of scores, (block, block) in float32": block * block * 4,
    "one block of keys and of values, (block, D) each in float16": 2 * block * D * 2,
}
for what, size in held.items():
    print(f"  {size / 1024:5.1f} KiB  {what}")
per_program = sum(held.values())
scores_of_a_head = L * L * 4
print(f"one program holds {per_program / 1024:.1f} KiB; the scores of one head would "
      f"take {scores_of_a_head / 2**20:.0f} MiB")  # fmt: skip

# %%
# A program's whole state is a few tens of KiB, small enough for one multiprocessor's
# registers and shared memory, while the scores of one head at this length would take
# the MiB printed above. In :func:`attention.tiled_attention` every block of scores goes
# to memory and comes back at each step; here no block of scores leaves the chip.
#
# The forward kernel
# ------------------
#
# Here is the forward kernel, whole. A ``tl.constexpr`` argument is fixed when the
# kernel is compiled (the block sizes, whether it is causal), so the ``if CAUSAL:``
# branches cost nothing at run time:
#
# .. literalinclude:: ../../../attention/flash_triton.py
#    :language: python
#    :pyobject: _forward_kernel
#
# Read it against :func:`~attention.functional.merge_blocks` of page 18. The state is
# the maximum ``m``, the sum ``ell`` of :math:`e^{s - m}` and the unnormalised output
# ``acc``, the form FlashAttention carries (:math:`\text{lse} = m + \log \ell`). For
# each block of keys the program computes its block of scores with one ``tl.dot``,
# raises the maximum where the block holds a larger score, scales what it summed so far
# by :math:`\alpha = e^{m_{\text{old}} - m_{\text{new}}}`, and adds the block. Only at
# the end does it divide by ``ell`` and store the output and the log-sum-exp of each of
# its rows, the one number per row the forward saves for the backward.
#
# Three details make it correct, to rounding, for any length. The loads are *masked*:
# the last block of queries or keys may reach past ``L`` or ``S``: the positions beyond
# read zeros, the keys past ``S`` get the score :math:`-\infty`, and the rows past ``L``
# are computed but never stored, so any length works, not only multiples of the block. A
# row that has seen no key yet has :math:`m = -\infty`, and :math:`-\infty - (-\infty)`
# is not a number, so ``m_safe`` stands in 0 for it. And with ``causal=True`` the loop
# ends at the last key that the block's last query may see: the blocks after it are
# never loaded, which is where a causal kernel saves close to half of its work, the
# closer to half the longer the sequence.
#
# Exactly PyTorch's attention, on this machine
# --------------------------------------------
#
# :func:`attention.flash_triton.flash_attention` checks its inputs and launches the
# kernels. On a GPU, Triton compiles them; without one, Triton's interpreter runs every
# program of the grid in turn, each block operation in NumPy, so the kernel a GPU would
# run is checked on any machine. Its outputs against ``F.scaled_dot_product_attention``,
# for a length that blocks of 64 do not divide, with the causal mask and without:

import torch.nn.functional as F

from attention import flash_triton
from attention.flash_triton import flash_attention

where = "Triton's interpreter" if flash_triton.INTERPRETED else "compiled by Triton"
print(f"the kernels run on {device}, {where}")


def attention_inputs(H, H_kv, L, D, dtype, generator):
    """Queries (1, H, L, D), keys and values (1, H_kv, L, D), requiring gradients."""
    shapes = ((1, H, L, D), (1, H_kv, L, D), (1, H_kv, L, D))
    return [
        torch.randn(s, device=device, generator=generator).to(dtype).requires_grad_()
        for s in shapes
    ]  # (N, H, L, D), (N, H_kv, L, D) twice


g = torch.Generator(device=device).manual_seed(seed)
checks = [(torch.float32, False), (torch.float32, True)]
if flash_triton.INTERPRETED:
    checks.append((torch.float64, True))  # the interpreter computes in float64 too
worst = {}
for dtype, causal in checks:
    q, k, v = attention_inputs(2, 2, 200, 64, dtype, g)
    out = flash_attention(q, k, v, causal=causal)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    worst[dtype, causal] = (out - expected).abs().max().item()
    print(f"{str(dtype):>13}, causal={causal!s:>5}: largest difference "
          f"{worst[dtype, causal]:.1e}")  # fmt: skip
    assert worst[dtype, causal] < (1e-12 if dtype == torch.float64 else 1e-5)

# %%
# In float32 the two agree to within a few units of float32's last place, and in the
# interpreter's float64, where the products are those of NumPy, to float64's. The
# kernels sum the same terms in another order than PyTorch's kernel: the order of the
# sums and the online softmax's rescaling, not an error, is what the last digits
# measure.
#
# The backward: two kernels that never write to the same place
# -------------------------------------------------------------
#
# Page 18 derived the gradients of one tile from its recomputed weights
# :math:`P = e^{S - \text{lse}}` and :math:`\delta = \text{rowsum}(dO \odot O)`:
#
# .. math::
#
#    dV = P^\top dO, \quad dP = dO\, V^\top, \quad dS = P \odot (dP - \delta), \quad
#    dQ = \text{scale} \cdot dS\, K, \quad dK = \text{scale} \cdot dS^\top Q .
#
# A block of keys gets contributions from every block of queries, and a block of queries
# from every block of keys. FlashAttention-2 runs its backward with one program per
# block of *keys*, which walks the blocks of queries that see them and keeps its
# :math:`dK` and :math:`dV` on the chip, and adds its share of :math:`dQ` into memory
# with atomic additions: many programs add into the same rows, in an order that changes
# from run to run :cite:p:`dao2023`. This module keeps the first part as one kernel,
#
# .. literalinclude:: ../../../attention/flash_triton.py
#    :language: python
#    :pyobject: _key_value_gradients_kernel
#
# and replaces the atomic additions by a second kernel, with a program per block of
# queries, which walks the key blocks as the forward did and keeps its :math:`dQ`:
#
# .. literalinclude:: ../../../attention/flash_triton.py
#    :language: python
#    :pyobject: _query_gradients_kernel
#
# With grouped key/value heads, several query heads read one head of keys and values, so
# its program adds up the gradients of all of them (the loop over ``g``). The
# ``autograd.Function`` around the kernels computes :math:`\delta` in PyTorch and
# launches both grids, one program per block of keys and one per block of queries. Each
# program writes only the rows it owns, so the result is the same on every run. The
# price is that both kernels compute the scores and :math:`dP` of every block, counted
# below. The gradients against PyTorch's, with 2 query heads sharing one head of keys
# and values:

grad_worst = {}
for dtype, causal in checks:
    q, k, v = attention_inputs(2, 1, 200, 64, dtype, g)
    grad_out = torch.randn(q.shape, device=device, generator=g).to(dtype)  # (N,H,L,D)
    out = flash_attention(q, k, v, causal=causal)
    got = torch.autograd.grad(out, (q, k, v), grad_out)
    expected = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True),
        (q, k, v),
        grad_out,
    )
    errors = [(a - b).abs().max().item() for a, b in zip(got, expected, strict=True)]
    grad_worst[dtype, causal] = max(errors)
    print(f"{str(dtype):>13}, causal={causal!s:>5}: largest difference in dQ, dK, dV "
          + ", ".join(f"{e:.1e}" for e in errors))  # fmt: skip
    assert grad_worst[dtype, causal] < (1e-12 if dtype == torch.float64 else 1e-5)

# %%
# Counting the work
# -----------------
#
# Timings belong to a GPU; the work a kernel does can be counted anywhere. In the
# interpreter every ``tl.dot`` of every program is one call of the interpreter's
# ``create_dot``, so wrapping that call counts the matrix products of each program of
# the grid (on a GPU, where the kernels are compiled, there is nothing to wrap):

from collections import Counter


def count_products(run):
    """Run ``run()`` in Triton's interpreter; count each program's tl.dot calls."""
    from triton.runtime.interpreter import InterpreterBuilder

    counts, create_dot = Counter(), InterpreterBuilder.create_dot

    def counted(builder, *args):
        counts[builder.grid_idx] += 1  # (query or key block, head, 0)
        return create_dot(builder, *args)

    InterpreterBuilder.create_dot = counted
    try:
        run()
    finally:
        InterpreterBuilder.create_dot = create_dot
    return counts


L_count, blocks = 512, 512 // 64  # one head, 8 blocks of 64 queries and of keys
q, k, v = attention_inputs(1, 1, L_count, 32, torch.float32, g)
products = {}
if flash_triton.INTERPRETED:
    for causal in (False, True):
        outputs = []
        forward = count_products(
            lambda c=causal, o=outputs: o.append(flash_attention(q, k, v, causal=c))
        )
        backward = count_products(lambda o=outputs: o[0].sum().backward())
        products[causal] = (forward, sum(forward.values()), sum(backward.values()))
        _, fwd, bwd = products[causal]
        print(f"causal={causal!s:>5}: {len(forward)} programs, {fwd:3} matrix products "
              f"forward, {bwd:3} backward, ({fwd} + {bwd}) / {fwd} = "
              f"{(fwd + bwd) / fwd:.1f} forward passes")  # fmt: skip
else:
    print("products are counted in the interpreter only; these kernels are compiled")

# %%
# Without a mask every query block meets every key block, two products per pair in the
# forward (:math:`QK^\top` and :math:`PV`) and seven in the backward (the scores and
# :math:`dP` once in each kernel, then :math:`dV`, :math:`dK` and :math:`dQ`). With the
# causal mask, query block :math:`i` meets the key blocks 0 to :math:`i` only:
# :math:`1 + 2 + \dots + T` pairs of :math:`T^2`, for :math:`T` blocks. The grid below
# shows the pairs the forward visited, from each program's count of products, laid out
# from key block 0, where the kernel's loop starts:

# sphinx_gallery_start_ignore
if flash_triton.INTERPRETED:
    pairs = {causal: products[causal][1] // 2 for causal in (False, True)}
    assert pairs == {False: blocks * blocks, True: blocks * (blocks + 1) // 2}
    for causal in (False, True):  # seven products per pair backward
        assert products[causal][2] == 7 * pairs[causal]
# sphinx_gallery_end_ignore

import matplotlib.pyplot as plt

from attention.viz import plot_mask

if flash_triton.INTERPRETED:
    forward = products[True][0]
    visited = torch.zeros(blocks, blocks, dtype=torch.bool)  # (query block, key block)
    for (query_block, _, _), count in forward.items():
        visited[query_block, : count // 2] = True  # key blocks 0, 1, ... in turn
    labels = [f"{64 * i}" for i in range(blocks)]
    cells = [
        ("skip" if not visited[i, j] else "mask" if i == j else "full")
        for i in range(blocks)
        for j in range(blocks)
    ]
    fig, ax = plt.subplots(figsize=(5.5, 5.5), layout="constrained")
    title = f"Causal forward, L = {L_count}: blocks of 64 visited"
    plot_mask(visited, x_labels=labels, y_labels=labels, text=cells, ax=ax, title=title)
    ax.set_xlabel("first key of the block")
    ax.set_ylabel("first query of the block")
    kinds = Counter(cells)
    print(f"{blocks} x {blocks} = {blocks * blocks} pairs of blocks: {kinds['full']} "
          f"full, {kinds['mask']} masked, {kinds['skip']} skipped")  # fmt: skip
    plt.show()

# %%
# The blocks above the diagonal (``skip``) are never loaded. Of those visited, the ones
# on the diagonal (``mask``) are computed in full and then masked, half of each wasted;
# the others (``full``) need no mask (this kernel still applies the causal test to them,
# and every pair passes it). As L grows the visited fraction,
# :math:`(T + 1) / 2T` for :math:`T` blocks, falls towards one half, which is why
# FlashAttention-2's count halves the work of a causal pass.
#
# The backward's seven products per pair, against the forward's two, make a training
# step (forward and backward) the number of forward passes printed above. A backward
# with one kernel, adding :math:`dQ` with atomic additions, computes the scores and
# :math:`dP` once: five products per pair, the count of FlashAttention-2 that the
# benchmarks use (a training step as 3.5 forward passes). This module pays two products
# per pair for a backward without atomics.
#
# On a GPU: recorded measurements
# -------------------------------
#
# ``python -m benchmarks --triton``, which ``bash benchmarks/gpu_session.sh`` runs on a
# machine with a CUDA GPU, times :func:`~attention.flash_triton.flash_attention` against
# ``F.scaled_dot_product_attention`` restricted to its flash backend and against
# :func:`attention.tiled_attention`, forward and forward + backward, in bfloat16 and
# float16 up to L = 16384, and records each row in
# ``benchmarks/results/triton-<date>.csv`` with the GPU, its driver and the versions of
# torch and Triton. When such a file is in this checkout, the newest one is read here;
# otherwise the line below says there is none. These are recorded numbers, not measured
# by this page.

import csv
from pathlib import Path

folders = [p / "benchmarks" / "results" for p in (Path.cwd(), *Path.cwd().parents)]
recorded = sorted(
    p for folder in folders if folder.is_dir() for p in folder.glob("triton-2*.csv")
)
rows = []
if recorded:
    with open(recorded[-1], newline="") as f:
        rows = [
            row
            for row in csv.DictReader(f)
            if (row["suite"], row["dtype"], row["D"], row["causal"], row["status"])
            == ("triton", "bfloat16", "128", "True", "ok")
        ]

if rows:
    meta = rows[0]
    caption = (
        f"{meta['device']}, driver {meta['driver']}, torch {meta['torch']}, "
        f"triton {meta['triton']}, measured {meta['date'][:10]}"
    )
    print(f"recorded in benchmarks/results/{recorded[-1].name}: {caption}")
    # sphinx_gallery_start_ignore
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharey=True, layout="constrained")
    for ax, mode in zip(axes, ("fwd", "fwd+bwd"), strict=True):
        for impl, marker in zip(("triton", "flash", "tiled"), "osd", strict=True):
            curve = sorted(
                (int(r["L"]), float(r["tflops"]))
                for r in rows
                if (r["impl"], r["mode"]) == (impl, mode)
            )
            if curve:
                ax.plot(*zip(*curve, strict=True), marker=marker, label=impl)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length L = S")
        ax.set_title("forward" if mode == "fwd" else "forward + backward")
    axes[0].set_ylabel("TFLOP/s (FlashAttention-2 count)")
    axes[0].legend()
    _ = fig.suptitle(f"Causal attention, bfloat16, D = 128\n{caption}")
    # sphinx_gallery_end_ignore
    for r in rows:
        if r["frac_peak"]:
            rate, share = float(r["tflops"]), float(r["frac_peak"])
            print(f"  {r['impl']:>6} {r['mode']:>7} L = {r['L']:>5}: {rate:6.1f} "
                  f"TFLOP/s, {share:.0%} of the GPU's peak")  # fmt: skip
    print("the figure shows the recorded rates; they were not measured by this page")
    plt.show()
else:
    print(
        "No GPU measurements of the kernel are recorded in benchmarks/results/ of "
        "this checkout, so this section has no figure; `bash "
        "benchmarks/gpu_session.sh` on a CUDA GPU records them."
    )

# %%
# What to remember
# ----------------
#
# - A FlashAttention kernel is a grid of independent programs, one per block of queries
#   and head. Each keeps its queries, its running maximum, sum and output on the chip,
#   and only the blocks of keys and values come from memory; the scores never go there.
# - Masked loads and a score of :math:`-\infty` beyond the last position make any length
#   work; a guard for rows that have seen no key keeps the online softmax free of NaN.
# - A causal kernel stops each program's loop at its last visible key block: the blocks
#   above the diagonal are never loaded, and the work falls towards one half.
# - The backward is split by what each program owns: a program per block of keys for
#   :math:`dK` and :math:`dV`, one per block of queries for :math:`dQ`, so no two
#   programs write to the same place, for two more products per pair of blocks.
# - Triton's interpreter runs the same kernels on a CPU: slowly, and equal to PyTorch
#   to rounding (bfloat16 runs only compiled, on a GPU), which is how this page and the
#   tests check them
#   without a GPU.
#
# API used on this page: :func:`attention.flash_triton.flash_attention`,
# :data:`attention.flash_triton.INTERPRETED` and :func:`attention.viz.plot_mask`.

# %%
# Exercises
# ---------
#
# 1. **Block size and skipping.** For L = 4096, count the key blocks that the causal
#    forward visits with blocks of 16, 64 and 256 (from the kernel's loop bound, without
#    running it), as a fraction of the non-causal count. Why do smaller blocks skip
#    more?
# 2. **Grouped heads by hand.** Run :func:`~attention.flash_triton.flash_attention` with
#    4 query heads and 1 head of keys and values, and compare it with the same call on
#    keys and values repeated to 4 heads (``repeat_interleave``), outputs and gradients.

# %%
# .. solution 1
#
# Query block :math:`i` visits key blocks :math:`0` to :math:`i`, so :math:`T` blocks
# visit :math:`T(T + 1)/2` of :math:`T^2` pairs, :math:`(T + 1)/2T`: the diagonal
# blocks, computed in full and half masked, are the excess over one half, and smaller
# blocks make that diagonal band thinner.

for size in (16, 64, 256):
    T = 4096 // size
    # query block i loops over the keys before min(S, (i + 1) * size), in blocks
    visited_pairs = sum(-(-min(4096, (i + 1) * size) // size) for i in range(T))
    print(f"blocks of {size:>3}: {visited_pairs:>6} of {T * T:>6} pairs, "
          f"{visited_pairs / (T * T):.3f}")  # fmt: skip
    assert visited_pairs == T * (T + 1) // 2

# %%
# .. solution 2
#
# Query head ``h`` reads key/value head ``h // 4``, the same as the repeated tensors,
# and the gradient of a repeated head is the sum over its copies, which the key/value
# kernel adds up over the group.

q, k, v = attention_inputs(4, 1, 100, 32, torch.float32, g)
grad_out = torch.randn(q.shape, device=device, generator=g)  # (N, H, L, D)
out = flash_attention(q, k, v, causal=True)
grouped = torch.autograd.grad(out, (q, k, v), grad_out)
k4, v4 = (x.repeat_interleave(4, dim=1) for x in (k, v))  # (N, 4, L, D)
out = flash_attention(q, k4, v4, causal=True)
repeated = torch.autograd.grad(out, (q, k, v), grad_out)
gaps = [(a - b).abs().max().item() for a, b in zip(grouped, repeated, strict=True)]
print("grouped against repeated heads, dQ, dK, dV:", *(f"{e:.1e}" for e in gaps))
assert max(gaps) < 1e-5

# %%
# Previous: :ref:`sphx_glr_tutorials_5_scale_18_memory_efficient.py`. Next: serving many
# requests from one cache, in :ref:`sphx_glr_tutorials_5_scale_22_paged_attention.py`.

# sphinx_gallery_thumbnail_number = 1
