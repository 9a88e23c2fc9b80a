"""
Masks as functions, and FlexAttention
=====================================

The masks of :ref:`sphx_glr_tutorials_05_masks.py` are bool matrices: one entry per
query and key. Every mask in use today also has a short *rule* behind it: a query sees
the keys before it, or the last few of them, or the keys of its own document. PyTorch's
FlexAttention (``torch.nn.attention.flex_attention``) takes the rule itself, as a Python
function of the indices, and turns it into a kernel that skips every block of keys the
rule excludes.

This page writes four masks as such functions (causal, sliding window, packed documents
and prefix-LM) and two score modifications (ALiBi and tanh soft-capping), checks each
against the bool mask or additive bias it replaces, in float64, shows how FlexAttention
finds the blocks to skip, and measures what skipping saves for a sliding window as the
sequence grows. It assumes the masks of :ref:`sphx_glr_tutorials_05_masks.py` and the
block-wise computation of :ref:`sphx_glr_tutorials_13_memory_efficient.py`; ALiBi is
introduced with the other position schemes in :ref:`sphx_glr_tutorials_16_positions.py`.
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

fig, axes = plt.subplots(2, 2, figsize=(6.4, 6.4), layout="constrained")
for ax, (name, (_, mask)) in zip(axes.flat, masks.items(), strict=True):
    ax.imshow(mask.cpu(), cmap="Greys", vmin=0, vmax=1.25)
    ax.set_title(name, fontsize=10)
    ax.set_xlabel("key index")
    ax.set_xticks(range(0, L, 5))
    ax.set_yticks(range(0, L, 5))
for ax in axes[:, 0]:
    ax.set_ylabel("query index")
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
# before the softmax. ALiBi (Press et al., 2022) subtracts a per-head slope times the
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
# Compiling: what makes FlexAttention fast
# ----------------------------------------
#
# Run eagerly, ``flex_attention`` skips nothing: it builds every score, as the warning
# says. ``torch.compile(flex_attention)`` generates a fused kernel (Triton on a GPU, C++
# on a CPU) with the ``mask_mod`` and ``score_mod`` written into its inner loop and the
# block mask telling it which tiles to visit. Generating it takes a C compiler and time,
# from seconds to minutes, so this page compiles only when a compiler is found, in a
# separate process with a time budget (``ATTENTION_COMPILE_BUDGET`` seconds, 20 by
# default), and prints which case ran.

import os
import shutil
import subprocess
import sys

COMPILED_TIMING = """
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch.utils import benchmark
from attention import flex

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.set_num_threads(1)
L, H, D = 2048, 4, 64
q, k, v = (torch.randn(1, H, L, D, device=device) for _ in range(3))
compiled = torch.compile(flex_attention, dynamic=False)
mask_mods = {"causal": flex.causal, "window 256": flex.sliding_window(256)}
for name, mask_mod in mask_mods.items():
    block_mask = create_block_mask(mask_mod, None, None, L, L, device=device)
    compiled(q, k, v, block_mask=block_mask)  # the first call compiles
    timer = benchmark.Timer("f(q, k, v, block_mask=m)", globals=dict(
        f=compiled, q=q, k=k, v=v, m=block_mask))
    ms = timer.blocked_autorange(min_run_time=0.2).median * 1e3
    print(f"compiled flex_attention, {name:<10}: {ms:7.2f} ms "
          f"({block_mask.sparsity():.1f}% of tiles skipped)")
"""

budget = float(os.environ.get("ATTENTION_COMPILE_BUDGET", "20"))
compilers = [c for c in ("c++", "g++", "clang++", "cc", "gcc") if shutil.which(c)]
if not compilers:
    print("skipped compiling: no C/C++ compiler found on this machine")
else:
    try:
        run = subprocess.run(
            [sys.executable, "-c", COMPILED_TIMING],
            capture_output=True,
            text=True,
            timeout=budget,
        )
        if run.returncode == 0:
            print(f"compiled with {compilers[0]} on {device}, float32,", end=" ")
            print(f"torch {torch.__version__}")
            print(run.stdout.strip())
        else:
            reason = (run.stderr.strip().splitlines() or ["unknown error"])[-1]
            print(f"skipped: compiling failed on this machine ({reason[:120]})")
    except subprocess.TimeoutExpired:
        print(f"skipped: compiling did not finish within {budget:g} s here")

# %%
# Where the compiled kernel ran, the two lines above give its time for each mask next to
# the share of tiles it skipped; where it was skipped, the line says why. The next
# section measures the same saving without a compiler.
#
# A sliding window's cost as the sequence grows
# ---------------------------------------------
#
# Skipping tiles can be written by hand: walk the queries a tile at a time, and give
# each tile only the keys its window can reach, with the tile's part of
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
# FlexAttention, and of sliding-window models such as Mistral (Jiang et al., 2023): the
# tiles the mask excludes are never computed.
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
#   ``torch.compile`` turns it into a fused kernel and needs a compiler.
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
#
# Next: attention over a sequence too long for one device, split across processes, in
# :ref:`sphx_glr_tutorials_18_context_parallel.py`.

# sphinx_gallery_thumbnail_number = 2
