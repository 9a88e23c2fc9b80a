"""
Masks as functions, and FlexAttention
=====================================

.. prerequisites:: 05_masks 13_memory_efficient

The masks of :ref:`sphx_glr_tutorials_05_masks.py` are bool matrices: one entry per
query and key. Every mask in use today also has a short *rule* behind it: a query sees
the keys before it, or the last few of them, or the keys of its own document. PyTorch's
FlexAttention :cite:p:`dong2024` (``torch.nn.attention.flex_attention``) takes the rule
itself, as a Python function of the indices, and turns it into a kernel that skips every
block of keys the rule excludes.

This page writes four masks as such functions (causal, sliding window, packed documents
and prefix-LM) and two score modifications (ALiBi and tanh soft-capping), checks each
against the bool mask or additive bias it replaces, in float64, shows how FlexAttention
finds the blocks to skip, and measures what skipping saves for a sliding window as the
sequence grows. ALiBi is introduced with the other position schemes in
:ref:`sphx_glr_tutorials_16_positions.py`.
"""

# %%
# A mask is a function of four indices
# ------------------------------------
#
# FlexAttention asks for a ``mask_mod(b, h, q_idx, kv_idx)``: given a batch element, a
# head, a query index and a key index, return ``True`` if that query may attend to that
# key (the polarity of this package). :mod:`attention.flex` writes the package's masks
# this way. The causal mask is one comparison:
#
# .. literalinclude:: ../../attention/flex.py
#    :language: python
#    :pyobject: causal
#    :start-at: return
#
# The others take a parameter and return the function (FlexAttention's ``mask_mod`` has
# no room for one). A sliding window keeps the ``window`` most recent keys, the query's
# own included:
#
# .. literalinclude:: ../../attention/flex.py
#    :language: python
#    :pyobject: sliding_window
#    :start-at: def sliding_window_mask_mod
#
# Packed documents look the document of each index up in a table, and a prefix-LM lets
# every query see the first ``prefix`` keys:
#
# .. literalinclude:: ../../attention/flex.py
#    :language: python
#    :pyobject: document
#    :start-at: def document_mask_mod
#
# .. literalinclude:: ../../attention/flex.py
#    :language: python
#    :pyobject: prefix_lm
#    :start-at: def prefix_lm_mask_mod
#
# Only broadcasting operations appear in them, so a ``mask_mod`` called on a column of
# query indices and a row of key indices builds the whole matrix at once. Each one
# equals the bool mask built by :mod:`attention.masks`:

import torch

from attention import flex
from attention.masks import (
    causal_mask,
    document_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from attention.repro import default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else "cuda" if there is a GPU, else "cpu"
print(f"torch {torch.__version__} on {device}, seed {seed}")

# Compiling FlexAttention takes a while: a separate process starts on it now, and the
# section "Compiling" at the end of the page collects what it measured.
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

roots = [p for p in (Path.cwd(), Path.cwd().parent) if (p / "benchmarks").is_dir()]
compilers = [c for c in ("c++", "g++", "clang++") if shutil.which(c)]
compile_job, job_errors, job_start = None, tempfile.TemporaryFile(), time.monotonic()
if roots and compilers:
    compile_job = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.flex", "4096", "4", "64", "128"],  # L H D W
        cwd=roots[0],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=job_errors,
        text=True,
    )

L, window, lengths, prefix = 16, 4, [5, 7, 4], 6
q_idx = torch.arange(L, device=device)[:, None]  # (L, 1)
kv_idx = torch.arange(L, device=device)  # (L,)
masks = {
    "causal": (flex.causal, causal_mask(L, device=device)),
    f"sliding window ({window})": (
        flex.sliding_window(window),
        sliding_window_mask(L, window, device=device),
    ),
    f"documents {lengths}": (
        flex.document(lengths, device=device),
        document_mask(lengths, device=device),
    ),
    f"prefix-LM ({prefix})": (
        flex.prefix_lm(prefix),
        prefix_lm_mask(L, prefix, device=device),
    ),
}
for name, (mask_mod, mask) in masks.items():
    from_function = mask_mod(0, 0, q_idx, kv_idx)  # (L, L)
    assert torch.equal(from_function, mask)
    print(f"{name:<22} {int(mask.sum()):>3} of {L * L} pairs may attend")

# %%
# Here are the four, drawn (dark = may attend):

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

fig, axes = plt.subplots(2, 2, figsize=(6.4, 6.8), layout="constrained")
for ax, (name, (_, mask)) in zip(axes.flat, masks.items(), strict=True):
    image = ax.imshow(mask.cpu(), cmap="Greys", vmin=0, vmax=1.25)
    ax.set_title(name, fontsize=10)
    ax.set_xlabel("key index")
    ax.set_xticks(range(0, L, 5))
    ax.set_yticks(range(0, L, 5))
for ax in axes[:, 0]:
    ax.set_ylabel("query index")
# the legend's two swatches in the colours the masks are drawn in
legend = [
    Patch(facecolor=image.cmap(image.norm(v)), edgecolor="black", label=label)
    for v, label in ((1.0, "True: may attend"), (0.0, "False: blocked"))
]
fig.legend(handles=legend, loc="outside lower center", ncols=2)
_ = fig.suptitle(f"Four masks as functions of (query, key), L = {L}")

# %%
# The sliding window is a band along the diagonal, so its number of allowed pairs grows
# as ``L * window`` rather than :math:`L^2 / 2`. The documents are blocks on the
# diagonal: packed into one row, each document attends only to itself (here
# bidirectionally; ``causal=True`` adds the triangle). The prefix-LM is the causal
# triangle with its top-left square filled in.
#
# FlexAttention, run eagerly
# --------------------------
#
# ``flex_attention(query, key, value, score_mod=None, block_mask=None)`` computes
# attention with the rule given by a *block mask*, which
# ``create_block_mask(mask_mod, N, H, L, S)`` derives from a ``mask_mod`` (``None`` for
# ``N`` or ``H`` means the same for every batch element or head). Called as plain
# Python, ``flex_attention`` runs an unfused reference that builds the whole score
# matrix; PyTorch warns about that, and the warning is printed here once and then
# silenced. Unfused is what an exactness check wants: in float64, each ``mask_mod``
# gives the same output as :func:`attention.scaled_dot_product_attention` with the bool
# mask.

import warnings

from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from attention import scaled_dot_product_attention

N, H, D = 2, 4, 8
shape = (N, H, L, D)
q, k, v = (torch.randn(shape, dtype=torch.float64, device=device) for _ in range(3))

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    block_mask = create_block_mask(flex.causal, None, None, L, L, device=device)
    _ = flex_attention(q, k, v, block_mask=block_mask)
first_line = str(caught[-1].message).splitlines()[0] if caught else "(nothing)"
print("PyTorch warns:", first_line)
unfused = r"flex_attention called without torch.compile"
warnings.filterwarnings("ignore", message=unfused)

for name, (mask_mod, mask) in masks.items():
    block_mask = create_block_mask(mask_mod, None, None, L, L, device=device)
    out = flex_attention(q, k, v, block_mask=block_mask)
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    error = (out - expected).abs().max().item()
    print(f"{name:<22} largest difference from the bool mask: {error:.1e}")
    assert error < 1e-12

# %%
# Biases as functions of the score
# --------------------------------
#
# The second hook, ``score_mod(score, b, h, q_idx, kv_idx)``, rewrites each scaled score
# before the softmax. ALiBi :cite:p:`press2022` subtracts a per-head slope times the
# distance; the same numbers as adding :func:`attention.alibi_bias` to the scores:
#
# .. literalinclude:: ../../attention/flex.py
#    :language: python
#    :pyobject: alibi
#    :start-at: slopes =
#
# Tanh soft-capping squashes every score into :math:`(-c, c)`, so no single key can take
# all the weight (Gemma 2 caps its scores at :math:`c = 50`):
#
# .. literalinclude:: ../../attention/flex.py
#    :language: python
#    :pyobject: softcap
#    :start-at: def softcap_score_mod
#
# ALiBi with a causal block mask equals PyTorch's own ``F.scaled_dot_product_attention``
# with the bias (and ``-inf`` above the diagonal) as a float mask; soft-capping equals
# its formula written out:

import math

import torch.nn.functional as F

from attention import alibi_bias

causal_block_mask = create_block_mask(flex.causal, None, None, L, L, device=device)
out = flex_attention(q, k, v, score_mod=flex.alibi(H), block_mask=causal_block_mask)
bias = alibi_bias(H, L, device=device, dtype=torch.float64)  # (H, L, L)
blocked = torch.zeros(L, L, dtype=torch.float64, device=device)
blocked = blocked.masked_fill(~causal_mask(L, device=device), -math.inf)  # (L, L)
expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias + blocked)
error = (out - expected).abs().max().item()
print(f"ALiBi score_mod:   largest difference from the additive bias: {error:.1e}")
assert error < 1e-12

cap = 1.0
out = flex_attention(q, k, v, score_mod=flex.softcap(cap), block_mask=causal_block_mask)
scores = q @ k.mT / math.sqrt(D)  # (N, H, L, D) @ (N, H, D, L) -> (N, H, L, L)
capped = cap * torch.tanh(scores / cap)
capped = capped.masked_fill(~causal_mask(L, device=device), -math.inf)
expected = capped.softmax(dim=-1) @ v  # (N, H, L, L) @ (N, H, L, D) -> (N, H, L, D)
error = (out - expected).abs().max().item()
print(f"soft-cap score_mod: largest difference from the formula:      {error:.1e}")
assert error < 1e-12
uncapped = F.scaled_dot_product_attention(q, k, v, is_causal=True)
assert (out - uncapped).abs().max() > 1e-3  # the cap does change the result

# %%
# The block mask: which tiles to skip
# -----------------------------------
#
# The fused kernel works as :func:`attention.tiled_attention` does, on tiles of 128
# queries by 128 keys. ``create_block_mask`` evaluates the ``mask_mod`` once, before any
# attention, and sorts the tiles into three kinds: *empty* tiles, where no pair may
# attend, are never loaded or computed; *full* tiles, where every pair may, are computed
# without evaluating the mask; *partial* tiles apply it pair by pair. The block mask's
# ``sparsity()`` is the percentage of tiles skipped. For sequences of 2048 tokens:

L_long, block = 2048, 128
long_masks = {  # mask_mods and bool masks of 2048 x 2048
    "causal": (flex.causal, causal_mask(L_long)),
    "sliding window (256)": (
        flex.sliding_window(256),
        sliding_window_mask(L_long, 256),
    ),
    "documents (8 x 256)": (
        flex.document([256] * 8, device=device),
        document_mask([256] * 8),
    ),
    "prefix-LM (512)": (flex.prefix_lm(512), prefix_lm_mask(L_long, 512)),
}


def tile_kinds(mask, block):
    """Each tile of a bool (L, S) mask: 0 empty, 1 partial, 2 full."""
    Lb, Sb = mask.shape[0] // block, mask.shape[1] // block
    tiles = mask.reshape(Lb, block, Sb, block).transpose(1, 2)  # (L/B, S/B, B, B)
    return tiles.any(dim=(-2, -1)).long() + tiles.all(dim=(-2, -1)).long()  # (L/B, S/B)


print(f"{'mask':<22} tiles  empty partial full  sparsity")
kinds = {}
for name, (mask_mod, mask) in long_masks.items():
    block_mask = create_block_mask(mask_mod, None, None, L_long, L_long, device=device)
    kinds[name] = tile_kinds(mask, block)
    counts = [int((kinds[name] == kind).sum()) for kind in range(3)]
    total = sum(counts)
    sparsity = block_mask.sparsity()
    row = f"{total:>5}  {counts[0]:>5} {counts[1]:>7} {counts[2]:>4}"
    print(f"{name:<22} {row}  {sparsity:7.2f}%")
    # The block mask found the same partial and full tiles, and skips exactly the empty
    # ones.
    assert int(block_mask.kv_num_blocks.sum()) == counts[1]
    assert int(block_mask.full_kv_num_blocks.sum()) == counts[2]
    assert math.isclose(sparsity, 100 * counts[0] / total)

# %%
# Each percentage is the share of the work never done. The causal mask skips almost half
# the tiles, as any causal kernel does; the sliding window and the packed documents skip
# most of them, and the larger the sequence the larger the share, since their allowed
# pairs grow as :math:`L` while the tiles grow as :math:`L^2`. The tiles of the sliding
# window:

from matplotlib.colors import ListedColormap

fig, ax = plt.subplots(figsize=(5.6, 4.4), layout="constrained")
tile_colours = ListedColormap(["#ffffff", "#e69f00", "#0072b2"])  # empty, partial, full
image = ax.imshow(kinds["sliding window (256)"], cmap=tile_colours, vmin=-0.5, vmax=2.5)
colorbar = fig.colorbar(image, ax=ax, ticks=[0, 1, 2])
colorbar.ax.set_yticklabels(["empty: skipped", "partial: masked", "full: no mask"])
ax.set_xlabel(f"key tile ({block} keys)")
ax.set_ylabel(f"query tile ({block} queries)")
# the figure's title, wider than the axes, is centred over the whole figure
_ = fig.suptitle(f"Tiles of a sliding window of 256, L = {L_long}")

# sphinx_gallery_start_ignore
band = kinds["sliding window (256)"][2:]  # the rows past the start of the sequence
assert ((band == 2).sum(-1) == 1).all() and ((band == 1).sum(-1) == 2).all()
# sphinx_gallery_end_ignore

# %%
# Past the first two rows, each row of tiles holds one full tile and two partial ones
# (the diagonal, and the far edge of the band); the rest is white, never touched. The
# work of a row is the same at every length, so the total grows linearly.
#
# A sliding window's cost as the sequence grows
# ---------------------------------------------
#
# Run eagerly, ``flex_attention`` skips nothing: it builds every score, as the
# warning said. Skipping tiles can be written by hand: walk the queries a tile at a
# time, and give each tile only the keys its window can reach, with the tile's part of
# :func:`attention.sliding_window_mask`. Each query tile then sees at most
# ``block + window - 1`` keys, however long the sequence:

from torch.utils import benchmark


def sliding_window_attention(q, k, v, window, block=128):
    """Causal sliding-window attention that skips the tiles outside the band."""
    L = q.shape[-2]
    out = torch.empty_like(q)  # (N, H, L, D)
    for start in range(0, L, block):
        end = min(start + block, L)
        first = max(0, start - window + 1)  # the tile's earliest visible key
        mask = sliding_window_mask(end - start, window, end - first, device=q.device)
        out[..., start:end, :] = F.scaled_dot_product_attention(
            q[..., start:end, :],
            k[..., first:end, :],
            v[..., first:end, :],
            attn_mask=mask,
        )  # (N, H, rows, D) with rows = end - start
    return out


W, H_t, D_t = 128, 4, 64
shape = (1, H_t, 1000, D_t)
q, k, v = (torch.randn(shape, dtype=torch.float64, device=device) for _ in range(3))
mask = sliding_window_mask(1000, W, device=device)
expected, _ = scaled_dot_product_attention(q, k, v, mask)
error = (sliding_window_attention(q, k, v, W) - expected).abs().max().item()
print(f"tile by tile vs the whole masked matrix (float64): difference {error:.1e}")
assert error < 1e-12

# %%
# Now the cost. The work of attention is :math:`4D` floating-point operations per
# query-key pair (two multiply-adds per feature: one for the score, one for the weighted
# value). A full causal mask has :math:`L(L+1)/2` pairs, a window of :math:`W` at most
# :math:`LW`. The times are medians of repeated calls with one thread, in float32: the
# causal column is PyTorch's fused causal kernel, which itself skips the tiles above the
# diagonal; the window column is the loop above.


def median_ms(fn, *args):
    """Median time of ``fn(*args)`` in milliseconds, over at least 0.2 s of calls."""
    timer = benchmark.Timer("fn(*args)", globals={"fn": fn, "args": args})
    return timer.blocked_autorange(min_run_time=0.2).median * 1e3


def causal_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


cost_lengths = [512, 1024, 2048, 4096]
gflops = {"causal": [], "window": []}
times = {"causal": [], "window": []}
threads = torch.get_num_threads()
torch.set_num_threads(1)
with torch.no_grad():
    for n in cost_lengths:
        q, k, v = (torch.randn(1, H_t, n, D_t, device=device) for _ in range(3))
        window_pairs = sum(min(i + 1, W) for i in range(n))
        gflops["causal"].append(4 * D_t * H_t * n * (n + 1) / 2 / 1e9)
        gflops["window"].append(4 * D_t * H_t * window_pairs / 1e9)
        times["causal"].append(median_ms(causal_attention, q, k, v))
        times["window"].append(median_ms(sliding_window_attention, q, k, v, W))
torch.set_num_threads(threads)

print(f"H = {H_t}, D = {D_t}, window W = {W}; {device}, float32,", end=" ")
print(f"torch {torch.__version__}")
print("    L  causal GFLOP  window GFLOP   causal ms  window ms")
for i, n in enumerate(cost_lengths):
    print(
        f"{n:>5}  {gflops['causal'][i]:12.3f}  {gflops['window'][i]:12.3f}"
        f"  {times['causal'][i]:10.2f}  {times['window'][i]:9.2f}"
    )
speed_up = times["causal"][-1] / times["window"][-1]
print(f"at L = {cost_lengths[-1]} the window is {speed_up:.1f}x faster than causal")

# sphinx_gallery_start_ignore
from attention.repro import claim

assert gflops["causal"][-1] / gflops["causal"][-2] > 3.9  # quadratic
assert gflops["window"][-1] / gflops["window"][-2] < 2.1  # linear
claim("window faster than causal at the longest L", speed_up, above=1.0)
# sphinx_gallery_end_ignore

fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
ax.plot(cost_lengths, times["causal"], marker="o", color="#0072b2", label="full causal")
ax.plot(cost_lengths, times["window"], marker="s", color="#e69f00", label=f"window {W}")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks(cost_lengths, [str(n) for n in cost_lengths])
ax.set_xlabel("sequence length L")
ax.set_ylabel("median time per call (ms)")
ax.legend()
_ = ax.set_title(f"Causal attention vs a sliding window ({device}, float32, 1 thread)")

# %%
# The causal work quadruples each time :math:`L` doubles, the window's only doubles (the
# GFLOP columns, exact). Times measured on a machine that runs other work are noisier
# than operation counts, and the figure's lines are less straight, but at the longest
# length the window is faster by the factor printed above. This is the whole speed-up of
# FlexAttention, and of sliding-window models such as Mistral :cite:p:`jiang2023`: the
# tiles the mask excludes are never computed.
#
# Compiling: what makes FlexAttention fast
# ----------------------------------------
#
# ``torch.compile(flex_attention)`` generates a fused kernel (Triton on a GPU, C++ on a
# CPU) with the ``mask_mod`` and ``score_mod`` written into its inner loop and the block
# mask telling it which tiles to visit. Generating it takes a C compiler and time: on a
# small CPU, tens of seconds to minutes for the first compile. PyTorch's compiler keeps
# what it generated in an on-disk cache (``/tmp/torchinductor_$USER``), keyed by the
# traced computation, the shapes and the settings, so the same call on the same shapes
# later takes seconds. ``dynamic=False`` compiles for these shapes only: the simplest
# kernel, and the quickest to build. The benchmarks compile it this way:
#
# .. literalinclude:: ../../benchmarks/flex.py
#    :language: python
#    :pyobject: compile_window
#    :start-at: L = q.shape
#
# The first cell of this page started a process (``python -m benchmarks.flex``) that
# compiles the window of the last section for L = 4096 and then, when this cell asks,
# times it against PyTorch's fused causal kernel, one thread each. This page waits for
# it ``ATTENTION_COMPILE_BUDGET`` seconds (40 by default) counted from its start, and
# otherwise stops it: the build neither fails for want of a compiler nor waits minutes.
# What happened on the machine that built this page:

import json
import os

budget = float(os.environ.get("ATTENTION_COMPILE_BUDGET", "40"))
reports = []
if compile_job is None:
    why = "no C++ compiler found" if not compilers else "benchmarks/ not found"
    print(f"not compiled: {why} on this machine")
else:
    try:
        waited = max(1.0, budget - (time.monotonic() - job_start))
        out, _ = compile_job.communicate("go\n", timeout=waited)
    except subprocess.TimeoutExpired:
        compile_job.kill()
        out, _ = compile_job.communicate()
    reports = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if reports:
        compile_s, hit = reports[0]["compile_s"], reports[0]["cache_hit"]
        cache = "found in the cache" if hit else "compiled from scratch"
        print(f"compiled in {compile_s:.1f} s ({cache}) on the cpu, float32,", end=" ")
        print(f"torch {torch.__version__}")
    if len(reports) < 2:
        job_errors.seek(0)
        lines = job_errors.read().decode(errors="replace").strip().splitlines()
        if compile_job.returncode != 0 and time.monotonic() - job_start >= budget:
            step = "the timing" if reports else "the compile"
            print(f"stopped: {step} had not finished {budget:g} s after the start")
        else:
            print(f"failed on this machine: {(lines or ['no message'])[-1][:100]}")
if len(reports) == 2:
    flex_ms, causal_ms = reports[1]["flex"], reports[1]["causal"]
    print(f"compiled flex_attention, window {W}, L = 4096: {flex_ms:8.2f} ms")
    print(f"SDPA's fused causal kernel,         L = 4096: {causal_ms:8.2f} ms")
    print(f"the compiled window is {causal_ms / flex_ms:.1f}x faster than causal")

# %%
# Where the kernel was compiled and timed, the lines above give its time next to full
# causal attention measured in the same process; the window's share of the work is the
# ratio of the GFLOP columns of the last table, and the compiled kernel turns it into
# time without a hand-written loop. Where it was not, the line says why: no compiler,
# a compile error, or a compile slower than the budget (a cold cache on a small or busy
# machine). ``make bench`` compiles the same call on the same shapes with no budget,
# which leaves the kernel in the cache for the next build of this page, and records
# what it measured in ``benchmarks/results/flex-<date>.csv``. The newest record, with
# where and when it was measured:

import csv

records = sorted(
    path
    for root in roots
    for path in (root / "benchmarks" / "results").glob("flex-*.csv")
)
if records:
    rows = list(csv.DictReader(records[-1].open()))
    first = rows[0]
    print(f"{records[-1].name}: {first['device']},", end=" ")
    print(f"{first['threads']} threads, torch {first['torch']},", end=" ")
    print(f"{first['date']}, load average {first['load_1min']}")
    print("    L  path             ms  time / sdpa mask  compile s")
    for row in rows:
        compile_s = f"{float(row['compile_s']):9.1f}" if row["compile_s"] else ""
        print(
            f"{row['L']:>5}  {row['impl']:<13} {float(row['median_ms']):9.2f}"
            f"  {float(row['ratio_to_sdpa']):16.2f}  {compile_s}"
        )
else:
    print("no recorded FlexAttention benchmark found")

# sphinx_gallery_start_ignore
if records:  # what the next paragraph says about the record
    by_length = {}
    for row in rows:
        by_length.setdefault(int(row["L"]), {})[row["impl"]] = float(row["median_ms"])
    times_by_l = [by_length[n] for n in sorted(by_length)]
    to_sdpa = [t["flex compiled"] / t["sdpa mask"] for t in times_by_l]
    assert all(a > b for a, b in zip(to_sdpa, to_sdpa[1:], strict=False))
    assert all(max(t, key=t.get) == "flex eager" for t in by_length.values())
# sphinx_gallery_end_ignore

# %%
# In the record, the compiled window takes a fraction of the time of SDPA with the
# same bool mask (the ``time / sdpa mask`` column), and the fraction falls as L grows:
# SDPA computes every pair and then masks, the compiled kernel skips the empty tiles,
# whose share grows with L. The uncompiled call, which builds every score, is the
# slowest at every length.
#
# What to remember
# ----------------
#
# - A mask is a rule: ``mask_mod(b, h, q_idx, kv_idx) -> bool`` (causal, sliding window,
#   packed documents, prefix-LM), and a bias is a
#   ``score_mod(score, b, h, q_idx, kv_idx)`` (ALiBi, soft-capping). Written with
#   broadcasting operations, the same function also builds the bool matrix.
# - ``create_block_mask`` evaluates the rule once and sorts the tiles into empty,
#   partial and full; ``sparsity()`` is the share of tiles skipped, and skipping them is
#   the speed-up.
# - Eager ``flex_attention`` is unfused and exact (ideal for checking, in float64);
#   ``torch.compile`` turns it into a fused kernel and needs a compiler and time; the
#   compiled kernel is cached on disk, by computation and shapes, for the next run.
# - A sliding window makes attention linear in :math:`L`: each query tile sees a fixed
#   number of keys.
#
# API used on this page: :func:`attention.flex.causal`,
# :func:`attention.flex.sliding_window`, :func:`attention.flex.document`,
# :func:`attention.flex.prefix_lm`, :func:`attention.flex.alibi`,
# :func:`attention.flex.softcap`, :func:`attention.sliding_window_mask`,
# :func:`attention.document_mask`, :func:`attention.prefix_lm_mask`,
# :func:`attention.causal_mask`, :func:`attention.alibi_bias` and
# :func:`attention.scaled_dot_product_attention`.

# %%
# Exercises
# ---------
#
# 1. **Attention sinks.** StreamingLLM (Xiao et al., 2023) keeps a sliding window and
#    lets every query also see the first key of the sequence. Write that rule as a
#    ``mask_mod`` (causal, a window of 4, plus key 0), check it against the bool mask
#    built from :func:`attention.sliding_window_mask` and :func:`attention.causal_mask`
#    for L = 16, and check eager ``flex_attention`` with its block mask against
#    :func:`attention.scaled_dot_product_attention` with that bool mask, in float64.
# 2. **Predict the tiles.** For a sliding window of 256 at L = 4096, with tiles of 128,
#    how many tiles are empty, partial and full, and what does ``sparsity()`` return?
#    Derive it from the rows of the figure of the tiles, then check it with
#    ``create_block_mask``.
# 3. **The window's work in closed form.** The cost table counts a window's pairs as a
#    sum over the queries. Write the count as a formula in L and W (for L >= W), check
#    it against the number of ``True`` entries of :func:`attention.sliding_window_mask`
#    and against the window's GFLOP column, for every L of the table.

# %%
# .. solution 1
#
# The rule is the sliding window's, or-ed with ``kv_idx == 0``; the sink adds one pair
# to every row past the window.


def sink_mask_mod(b, h, q_idx, kv_idx):
    in_window = (kv_idx <= q_idx) & (q_idx - kv_idx < 4)
    return in_window | (kv_idx == 0)


sink_mask = sliding_window_mask(L, 4, device=device) | (
    causal_mask(L, device=device) & (kv_idx == 0)
)  # (L, L)
assert torch.equal(sink_mask_mod(0, 0, q_idx, kv_idx), sink_mask)
q, k, v = (
    torch.randn(N, H, L, D, dtype=torch.float64, device=device) for _ in range(3)
)
sink_block_mask = create_block_mask(sink_mask_mod, None, None, L, L, device=device)
out = flex_attention(q, k, v, block_mask=sink_block_mask)
expected, _ = scaled_dot_product_attention(q, k, v, sink_mask)
error = (out - expected).abs().max().item()
print(
    f"{int(sink_mask.sum())} pairs; largest difference from the bool mask: {error:.1e}"
)
assert error < 1e-12

# %%
# .. solution 2
#
# With :math:`n = L / 128 = 32` rows of tiles: row 0 holds one partial tile (the
# diagonal), row 1 one full and one partial, and each of the other :math:`n - 2` rows
# one full and two partial. That is :math:`n - 1 = 31` full tiles, :math:`2n - 2 = 62`
# partial ones and :math:`n^2 - 3n + 3 = 931` empty ones: a sparsity of 931 / 1024.

n_rows = 4096 // block
predicted = {
    "empty": n_rows**2 - 3 * n_rows + 3,
    "partial": 2 * n_rows - 2,
    "full": n_rows - 1,
}
window_block_mask = create_block_mask(
    flex.sliding_window(256), None, None, 4096, 4096, device=device
)
partial = int(window_block_mask.kv_num_blocks.sum())
full = int(window_block_mask.full_kv_num_blocks.sum())
found = {"empty": n_rows**2 - partial - full, "partial": partial, "full": full}
print(f"predicted {predicted}, found {found}")
print(f"sparsity: {window_block_mask.sparsity():.3f}%")
assert found == predicted
assert math.isclose(window_block_mask.sparsity(), 100 * predicted["empty"] / n_rows**2)

# %%
# .. solution 3
#
# The first W queries see 1, 2, ..., W keys, and the other L - W see W each:
# :math:`W(W+1)/2 + (L-W)W = LW - W(W-1)/2` pairs, linear in L.

for n in cost_lengths:
    pairs = n * W - W * (W - 1) // 2
    assert pairs == int(sliding_window_mask(n, W).sum())
    assert pairs == sum(min(i + 1, W) for i in range(n))
    assert math.isclose(
        gflops["window"][cost_lengths.index(n)], 4 * D_t * H_t * pairs / 1e9
    )
    print(f"L = {n:>4}: {pairs:>7} pairs, {4 * D_t * H_t * pairs / 1e9:.3f} GFLOP")

# %%
# Next: attention over a sequence too long for one device, split across processes, in
# :ref:`sphx_glr_tutorials_18_context_parallel.py`.

# sphinx_gallery_thumbnail_number = 2
