"""
Masks as functions, and FlexAttention
=====================================

.. prerequisites:: 05_masks 18_memory_efficient
   :summary: Masks as rules of the query and key positions (causal, sliding window,
      documents, prefix-LM, ALiBi, soft-capping) run by FlexAttention.

The masks of :ref:`page 5 <sphx_glr_tutorials_1_foundations_05_masks.py>` are bool
matrices: one entry per query and key. The masks in common use also have a short *rule*
behind them: a query sees the keys before it, or the last few of them, or the keys of
its own document. This package writes each rule once, and PyTorch's FlexAttention
:cite:p:`dong2024` (``torch.nn.attention.flex_attention``) takes the rule itself, as a
Python function of the indices, and turns it into a kernel that skips every block of
keys the rule excludes.

This page shows four masks as such rules (causal, sliding window, packed documents and
prefix-LM) and two score modifications (ALiBi and tanh soft-capping), checks each
against the bool mask or additive bias it replaces, in float64, shows how FlexAttention
finds the blocks to skip, walks those blocks with the package's online softmax, and
measures what skipping saves for a sliding window as the sequence grows. ALiBi is
introduced with the other position schemes in
:ref:`sphx_glr_tutorials_4_generation_14_positions.py`.
"""

# %%
# A mask is a rule, written once
# ------------------------------
#
# Each structured mask of :mod:`attention.masks` is written once, as a *predicate* of a
# query position ``q`` and a key position ``k``: integer tensors in, a bool tensor out
# (``True`` = may attend, the polarity of this package), with broadcasting operations
# only. The causal predicate, met in
# :ref:`sphx_glr_tutorials_1_foundations_05_masks.py`, is ``k <= q``. The others take a
# parameter and return the predicate. A sliding window keeps the ``window`` most recent
# keys, the query's own included, and a prefix-LM lets every query also see the first
# ``prefix`` keys (:func:`attention.masks.prefix_lm`, written the same way). The sliding
# window's predicate:
#
# .. literalinclude:: ../../../attention/masks.py
#    :language: python
#    :pyobject: sliding_window
#    :no-docstring:
#
# (Packed documents, :func:`attention.masks.document`, look the document of each
# position up in a table and compare.) A dense mask is the predicate evaluated on an
# index grid: a column of query positions against a row of key positions, broadcast to
# ``(L, S)``. ``causal_mask(L, S)`` is ``_grid(causal, L, S, device)``, and
# ``sliding_window_mask`` and ``prefix_lm_mask`` are the same call on their predicates:
#
# .. literalinclude:: ../../../attention/masks.py
#    :language: python
#    :pyobject: _grid
#
# FlexAttention asks for the rule itself, as a
# ``mask_mod(b, h, q_idx, kv_idx)``: given a batch element, a head, a query index and a
# key index, return ``True`` if that query may attend to that key. :mod:`attention.flex`
# wraps each predicate of :mod:`attention.masks` with the ``b`` and ``h`` it does not
# use (and the position of the first query, for queries that come after cached keys):
#
# .. literalinclude:: ../../../attention/flex.py
#    :language: python
#    :pyobject: sliding_window
#    :no-docstring:
#
# So there is one rule per mask, and the dense mask and the ``mask_mod`` are two ways of
# evaluating it. Called on a column of query indices and a row of key indices, each
# ``mask_mod`` builds the same matrix as :mod:`attention.masks`:

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
device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
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
    from_function = mask_mod(0, 0, q_idx, kv_idx)  # (L, 1) vs (L,) -> (L, L)
    assert torch.equal(from_function, mask)
    print(f"{name:<22} {int(mask.sum()):>3} of {L * L} pairs may attend")

# %%
# Here are the four, drawn (dark = may attend):

# sphinx_gallery_start_ignore
# the figure's code: the four bool masks
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
# sphinx_gallery_end_ignore

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
# distance. Its penalty is written once too, as a function of a slope and two positions:
# :func:`attention.alibi_bias` evaluates it on an index grid, and
# :func:`attention.flex.alibi` adds it to the score of head ``h`` inside FlexAttention:
#
# .. literalinclude:: ../../../attention/positions.py
#    :language: python
#    :pyobject: alibi_penalty
#    :no-docstring:
#
# Tanh soft-capping squashes every score into :math:`(-c, c)` (Gemma 2 caps its
# attention scores at :math:`c = 50`). It bounds the logits, so that no score grows
# without limit during training or overflows in low precision. It does not stop one key
# from taking all the weight: two capped scores can still differ by almost :math:`2c`, a
# weight ratio of up to :math:`e^{2c}`:
#
# .. literalinclude:: ../../../attention/flex.py
#    :language: python
#    :pyobject: softcap
#    :no-docstring:
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
# sphinx_gallery_start_ignore
# the cap does change the result
uncapped = F.scaled_dot_product_attention(q, k, v, is_causal=True)
assert (out - uncapped).abs().max() > 1e-3
# sphinx_gallery_end_ignore

row = torch.tensor([200.0, 0.0, 0.0, 0.0], dtype=torch.float64)  # one key far ahead
capped_row = 50 * torch.tanh(row / 50)  # Gemma 2's cap, c = 50
weights = capped_row.softmax(dim=-1)
print(
    f"c = 50: scores {row.tolist()} capped to "
    f"{[round(s, 2) for s in capped_row.tolist()]}; weight on the first key "
    f"{weights[0]:.6f}, {weights[0] / weights[1]:.1e} times each other key's"
)
assert weights[0] > 1 - 1e-12  # bounded scores, and still one key takes all

# %%
# The block mask: which tiles to skip
# -----------------------------------
#
# The fused kernel works tile by tile, as :func:`attention.tiled_attention` does, on
# tiles of 128 queries by 128 keys (the block mask's ``BLOCK_SIZE``).
# ``create_block_mask`` evaluates the ``mask_mod`` once, before any attention, and sorts
# the tiles into three kinds: *empty* tiles, where no pair may attend, are never loaded
# or computed; *full* tiles, where every pair may, are computed without evaluating the
# mask; *partial* tiles apply it pair by pair. The block mask's
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
kinds, block_masks = {}, {}
for name, (mask_mod, mask) in long_masks.items():
    block_mask = create_block_mask(mask_mod, None, None, L_long, L_long, device=device)
    kinds[name], block_masks[name] = tile_kinds(mask, block), block_mask
    counts = [int((kinds[name] == kind).sum()) for kind in range(3)]
    row = f"{sum(counts):>5}  {counts[0]:>5} {counts[1]:>7} {counts[2]:>4}"
    print(f"{name:<22} {row}  {block_mask.sparsity():7.2f}%")

# sphinx_gallery_start_ignore
# the block mask found the same partial and full tiles, and
# skips exactly the empty ones
for name, block_mask in block_masks.items():
    counts = [int((kinds[name] == kind).sum()) for kind in range(3)]
    assert int(block_mask.kv_num_blocks.sum()) == counts[1]
    assert int(block_mask.full_kv_num_blocks.sum()) == counts[2]
    assert math.isclose(block_mask.sparsity(), 100 * counts[0] / sum(counts))
# sphinx_gallery_end_ignore

# %%
# Each percentage is the share of the work never done. The causal mask skips almost half
# the tiles; the sliding window and the packed documents skip most of them, and the
# larger the sequence the larger the share, since at 256 tokens each their allowed pairs
# grow as :math:`L` while the tiles grow as :math:`L^2`. The tiles of the sliding
# window:

# sphinx_gallery_start_ignore
# the figure's code: each tile coloured by its kind
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

band = kinds["sliding window (256)"][2:]  # the rows past the start of the sequence
assert ((band == 2).sum(-1) == 1).all() and ((band == 1).sum(-1) == 2).all()
# sphinx_gallery_end_ignore

# %%
# Past the first two rows, each row of tiles holds one full tile and two partial ones
# (the diagonal, and the far edge of the band); the rest is white, never touched. The
# work of a row is the same at every length, so the total grows linearly.
#
# Walking the tiles the block mask lists
# --------------------------------------
#
# The block mask is a list of tiles per row of query tiles: ``kv_indices`` holds the
# partial ones (the first ``kv_num_blocks`` of each row), ``full_kv_indices`` the full
# ones. The fused kernel walks, for each query tile, exactly those key tiles, applying
# the ``mask_mod`` in the partial ones, and merges each tile into the running output
# with the online softmax of
# :ref:`page 18 <sphx_glr_tutorials_5_scale_18_memory_efficient.py>`. The package has
# that loop: :func:`attention.tiled.blockwise_attention` takes a list of
# ``(query rows, key columns, tile mask or None)`` and merges each tile with
# :func:`~attention.functional.merge_blocks`. Reading the list out of a block mask is a
# few lines:

from attention.tiled import blockwise_attention


def block_mask_tiles(block_mask, mask_mod):
    """The tiles a block mask visits: (query rows, key columns, bool mask or None)."""
    rows_per_tile, cols_per_tile = block_mask.BLOCK_SIZE
    tile_list = []
    for i in range(block_mask.kv_num_blocks.shape[-1]):  # each row of query tiles
        rows = slice(i * rows_per_tile, (i + 1) * rows_per_tile)
        q_tile = torch.arange(rows.start, rows.stop)[:, None]  # (R, 1)
        partial = block_mask.kv_indices[0, 0, i, : block_mask.kv_num_blocks[0, 0, i]]
        for j in partial.tolist():  # evaluate the rule on the tile
            cols = slice(j * cols_per_tile, (j + 1) * cols_per_tile)
            k_tile = torch.arange(cols.start, cols.stop)  # (C,)
            tile_list.append((rows, cols, mask_mod(0, 0, q_tile, k_tile)))  # (R, C)
        full = block_mask.full_kv_indices[0, 0, i]
        for j in full[: block_mask.full_kv_num_blocks[0, 0, i]].tolist():
            cols = slice(j * cols_per_tile, (j + 1) * cols_per_tile)
            tile_list.append((rows, cols, None))  # every pair may attend: no mask
    return tile_list


# %%
# In float64, on a sequence of 1024 positions with 4 heads, the tiles of a sliding
# window of 256 give the same output as
# :func:`attention.scaled_dot_product_attention` with the whole bool mask:

W, H_t, D_t, L_check = 256, 4, 64, 1024
shape = (1, H_t, L_check, D_t)
q, k, v = (torch.randn(shape, dtype=torch.float64, device=device) for _ in range(3))
window_mod = flex.sliding_window(W)
window_block_mask = create_block_mask(
    window_mod, None, None, L_check, L_check, device=device
)
window_tiles = block_mask_tiles(window_block_mask, window_mod)
out = blockwise_attention(q, k, v, window_tiles, scale=1 / math.sqrt(D_t))
expected, _ = scaled_dot_product_attention(
    q, k, v, sliding_window_mask(L_check, W, device=device)
)
error = (out - expected).abs().max().item()
print(f"{len(window_tiles)} of {(L_check // block) ** 2} tiles visited;", end=" ")
print(f"largest difference from the bool mask: {error:.1e}")
assert error < 1e-12

# %%
# A sliding window's cost as the sequence grows
# ---------------------------------------------
#
# The work of attention is :math:`4D` floating-point operations per query-key pair (two
# multiply-adds per feature: one for the score, one for the weighted value), and a tiled
# kernel does it for every pair of every tile it visits. A causal mask visits
# :math:`n(n+1)/2` of the :math:`n^2` tiles (:math:`n = L / 128`), a window of 256 at
# most :math:`3n`. Every visited tile costs the same :math:`4D \cdot 128^2` operations
# per head, so the tiles visited count the work. The table counts them, and times the
# loop above on both tile lists, in float32 (on one thread on a CPU), with the
# package's timer (medians of interleaved rounds, with their interquartile range): the
# same code, only the list of tiles differs.

import functools

from attention.measure import compare, device_description
from attention.repro import num_threads

cost_lengths = [1024, 2048, 4096]
visited = {"causal": [], "window": []}
times = {"causal": [], "window": []}
rules = {"causal": flex.causal, "window": flex.sliding_window(W)}
with torch.no_grad(), num_threads(1):
    for n in cost_lengths:
        q, k, v = (torch.randn(1, H_t, n, D_t, device=device) for _ in range(3))
        tile_lists = {}
        for name, rule in rules.items():
            bm = create_block_mask(rule, None, None, n, n, device=device)
            tile_lists[name] = block_mask_tiles(bm, rule)
            visited[name].append(len(tile_lists[name]))
        cases = {  # one call of the same loop per tile list
            name: functools.partial(
                blockwise_attention, q, k, v, tiles, scale=D_t**-0.5
            )
            for name, tiles in tile_lists.items()
        }
        timings = compare(cases, rounds=2, min_run_time=0.1, device=device)
        for name in times:
            times[name].append(timings[name])
    where = device_description(device, torch.float32)

print(f"H = {H_t}, D = {D_t}, window {W}, tiles of {block}; {where}")
print("    L  tiles: all  causal  window   causal ms (IQR)   window ms (IQR)")
for i, n in enumerate(cost_lengths):
    causal_time, window_time = times["causal"][i], times["window"][i]
    print(
        f"{n:>5}  {(n // block) ** 2:10}  {visited['causal'][i]:6}  "
        f"{visited['window'][i]:6}  {causal_time.ms:8.1f} "
        f"({causal_time.iqr * 1e3:4.1f})  {window_time.ms:8.1f} "
        f"({window_time.iqr * 1e3:4.1f})"
    )
tile_ratio = visited["causal"][-1] / visited["window"][-1]
time_ratio = times["causal"][-1].ms / times["window"][-1].ms
print(
    f"at L = {cost_lengths[-1]}: the window visits {tile_ratio:.1f}x fewer tiles; "
    f"its loop took {time_ratio:.1f}x less time in this run"
)
for i, n in enumerate(cost_lengths):
    m = n // block  # tiles per row
    assert visited["causal"][i] == m * (m + 1) // 2  # quadratic in L
    assert visited["window"][i] == 3 * m - 3  # linear in L

# sphinx_gallery_start_ignore
# the figure's code: the medians against L
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
for name, marker, colour, label in (
    ("causal", "o", "#0072b2", "causal"),
    ("window", "s", "#e69f00", f"window {W}"),
):
    medians = [t.ms for t in times[name]]
    ax.plot(cost_lengths, medians, marker=marker, color=colour, label=label)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 1, 2, 5, 10...
ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
ax.yaxis.set_minor_formatter(NullFormatter())  # plain numbers, not 2 x 10^2
ax.set_xticks(cost_lengths, [str(n) for n in cost_lengths])
ax.set_xlabel("sequence length L")
ax.set_ylabel("median time per call (ms)")
ax.legend()
_ = ax.set_title(f"The same tile loop on two block masks ({device.type}, float32)")
# sphinx_gallery_end_ignore

# %%
# The tile counts are exact, and asserted: the causal count roughly quadruples each time
# :math:`L` doubles, the window's roughly doubles, and at the longest length the window
# does the work of the causal mask divided by the ratio of tiles printed on the last
# line. The times are this machine's, in this run, and the figure draws them on
# logarithmic axes, where a cost proportional to :math:`L^p` is a line of slope
# :math:`p`: compare the slopes of its two lines with 2 and 1. The times follow the
# counts less closely: two of the window's three tiles per row are partial and apply
# their mask, while most causal tiles are full, and a machine running other work adds
# noise (the interquartile ranges). Skipping tiles is what a block mask buys
# FlexAttention, and sliding-window models such as Mistral :cite:p:`jiang2023`: the
# tiles the mask excludes are never computed.
#
# Compiling: what turns the rule into a kernel
# --------------------------------------------
#
# This page ran the loop in Python, one tile at a time.
# ``torch.compile(flex_attention)`` generates one fused kernel for it (Triton on a GPU,
# C++ on a CPU), with the ``mask_mod`` and ``score_mod`` written into its inner loop and
# the block mask telling it which tiles to visit; that kernel is what FlexAttention runs
# in practice. Building it takes a compiler and, on a CPU, longer than this page's time
# budget, so the page does not compile it and makes no claim about its speed.
#
# What to remember
# ----------------
#
# - A mask is a rule, written once: a predicate of the query and key positions
#   (causal, sliding window, packed documents, prefix-LM). Evaluated on an index grid it
#   is the bool matrix; wrapped as ``mask_mod(b, h, q_idx, kv_idx)`` it is what
#   FlexAttention takes. A bias is a ``score_mod(score, b, h, q_idx, kv_idx)`` (ALiBi,
#   soft-capping).
# - ``create_block_mask`` evaluates the rule once and sorts the tiles into empty,
#   partial and full; ``sparsity()`` is the share of tiles skipped, and skipping them is
#   the work saved.
# - Eager ``flex_attention`` is unfused and exact (ideal for checking, in float64);
#   ``torch.compile`` turns it into a fused kernel that walks the listed tiles.
# - A sliding window makes attention linear in :math:`L`: each query tile sees a fixed
#   number of key tiles.
#
# API used on this page: :func:`attention.masks.sliding_window`,
# :func:`attention.masks.causal`, :func:`attention.flex.causal`,
# :func:`attention.flex.sliding_window`, :func:`attention.flex.document`,
# :func:`attention.flex.prefix_lm`, :func:`attention.flex.alibi`,
# :func:`attention.flex.softcap`, :func:`attention.sliding_window_mask`,
# :func:`attention.document_mask`, :func:`attention.prefix_lm_mask`,
# :func:`attention.causal_mask`,
# :func:`attention.alibi_bias`, :func:`attention.scaled_dot_product_attention`,
# :func:`attention.tiled.blockwise_attention`, :func:`attention.measure.compare` and
# :func:`attention.measure.device_description`.

# %%
# Exercises
# ---------
#
# 1. **Attention sinks.** StreamingLLM :cite:p:`xiao2023` keeps, besides a sliding
#    window, the first four tokens of the sequence, the *attention sinks*, which every
#    later query may attend to. Write that rule as a predicate of positions made of
#    the predicates of :mod:`attention.masks` (a window of 4, plus keys 0 to 3), wrap it
#    as a ``mask_mod``, check it against the bool mask built from
#    :func:`attention.sliding_window_mask` and :func:`attention.causal_mask` for L = 16,
#    and check eager ``flex_attention`` with its block mask against
#    :func:`attention.scaled_dot_product_attention` with that bool mask, in float64.
# 2. **Predict the tiles.** For a sliding window of 256 at L = 4096, with tiles of 128,
#    how many tiles are empty, partial and full, and what does ``sparsity()`` return?
#    Derive it from the rows of the figure of the tiles, then check it with
#    ``create_block_mask``.
#
# .. solution 1
#
# The rule is the window's predicate, or-ed with the causal predicate limited to the
# first four keys. Up to query 6 the window and the sinks overlap; from query 7 on,
# each row has four sinks and four keys of the window.

from attention.masks import causal, sliding_window

in_window = sliding_window(4)


def window_with_sinks(q, k):
    return in_window(q, k) | (causal(q, k) & (k < 4))


def sinks_mask_mod(b, h, q_idx, kv_idx):
    return window_with_sinks(q_idx, kv_idx)


sinks_mask = sliding_window_mask(L, 4, device=device) | (
    causal_mask(L, device=device) & (kv_idx < 4)
)  # (L, L)
assert torch.equal(sinks_mask_mod(0, 0, q_idx, kv_idx), sinks_mask)
keys_per_query = sinks_mask.sum(-1)  # (L,)
print("keys per query:", keys_per_query.tolist())
assert keys_per_query[6] == 7 and (keys_per_query[7:] == 8).all()  # 4 sinks + 4 recent
q, k, v = (
    torch.randn(N, H, L, D, dtype=torch.float64, device=device) for _ in range(3)
)
sinks_block_mask = create_block_mask(sinks_mask_mod, None, None, L, L, device=device)
out = flex_attention(q, k, v, block_mask=sinks_block_mask)
expected, _ = scaled_dot_product_attention(q, k, v, sinks_mask)
error = (out - expected).abs().max().item()
print(
    f"{int(sinks_mask.sum())} pairs; largest difference from the bool mask: {error:.1e}"
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
# Next: attention over a sequence too long for one device, split across processes, in
# :ref:`sphx_glr_tutorials_5_scale_20_context_parallel.py`.

# sphinx_gallery_thumbnail_number = 2
