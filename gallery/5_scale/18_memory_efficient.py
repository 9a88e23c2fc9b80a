"""
Memory-efficient attention: the online softmax, forward and backward
====================================================================

.. prerequisites:: 02_scaled_dot_product 08_checking_gradients
   :summary: The online softmax: attention a block of keys at a time, forward and
      backward, in memory that grows linearly with the sequence.

The reference path of
:ref:`page 2 <sphx_glr_tutorials_1_foundations_02_scaled_dot_product.py>` computes every
score of every query against every key, an :math:`(L, S)` matrix per head, before the
softmax. That matrix grows as the square of the sequence length, and long before the
arithmetic becomes slow it no longer fits in memory. The fused kernels behind
``F.scaled_dot_product_attention`` avoid it with one idea: the softmax can be computed a
block of keys at a time, so the matrix never exists: the online softmax of
:cite:t:`milakov2018`, applied to attention by :cite:t:`rabe2021` and made fast on GPUs
by FlashAttention :cite:p:`dao2022,dao2023`.

Inference is half of the story. To train, autograd keeps what each operation needs for
the backward pass, and for attention that is the :math:`(L, S)` weights again.
FlashAttention-2's backward keeps, beyond Q, K and V, only the output and one number per
query, the log-sum-exp of its scores, and recomputes the weights tile by tile.

This page works the online softmax through on one row, reads
:func:`attention.tiled_attention`, which applies it to whole tensors in plain PyTorch,
derives its backward pass, checks both against the reference, and measures peak memory
against the reference path and PyTorch's kernel. Timing is the subject of
:ref:`sphx_glr_tutorials_5_scale_17_performance.py`.
"""

# %%
# A matrix that grows as L squared
# --------------------------------
#
# With 8 heads in float32, the scores of one sequence take :math:`8 \cdot L^2 \cdot 4`
# bytes, and the softmax makes a second matrix of the same size:

import torch

from attention.repro import default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
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
# :math:`w_j = e^{s_j} / \sum_k e^{s_k}`.
#
# Split the keys into blocks and summarise each block by two numbers: its own attention
# output :math:`o_b` (the softmax-weighted average of its values, as if the other keys
# did not exist) and the log-sum-exp of its scores,
# :math:`\text{lse}_b = \log \sum_{j \in b} e^{s_j}`, the log of its softmax's
# denominator. Two such summaries merge into the summary of both blocks: the
# denominators add, so :math:`\text{lse} = \log(e^{\text{lse}_a} + e^{\text{lse}_b})`,
# and each side's output keeps its share of the merged denominator,
#
# .. math::
#
#    o = e^{\text{lse}_a - \text{lse}}\, o_a + e^{\text{lse}_b - \text{lse}}\, o_b .
#
# :func:`attention.functional.attention_block` computes one block's pair and
# :func:`attention.functional.merge_blocks` merges two. Here they run on one row of 8
# scores in blocks of 3, with a query of one dimension whose dot product with each
# one-dimensional key is the score itself:

from attention.functional import attention_block, merge_blocks

scores = torch.tensor([0.5, 1.0, -0.3, 2.5, 0.1, -1.2, 3.0, 0.7], dtype=torch.float64)
values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], dtype=torch.float64)
one_query = torch.ones(1, 1, dtype=torch.float64)  # (L, D) = (1, 1)
block = 3  # keys per block: 3 + 3 + 2

out = torch.zeros(1, 1, dtype=torch.float64)  # no keys seen yet: output 0  (L, Dv)
lse = torch.full((1, 1), float("-inf"), dtype=torch.float64)  # ... and lse = -inf
old_shares = []
print("block  scores            block lse  block out  old share   lse      out")
for start in range(0, len(scores), block):
    keys = scores[start : start + block, None]  # (C, D) = (C, 1): q . k is the score
    block_out, block_lse = attention_block(
        one_query, keys, values[start : start + block, None], scale=1.0
    )  # (1, 1) each
    new_out, new_lse = merge_blocks(out, lse, block_out, block_lse)
    old_share = torch.exp(lse - new_lse).item()  # the weight the earlier blocks keep
    out, lse = new_out, new_lse
    old_shares.append(old_share)
    shown = " ".join(f"{x:4.1f}" for x in scores[start : start + block])
    print(
        f"{start // block:>5}  {shown:<16}  {block_lse.item():9.4f}  "
        f"{block_out.item():9.4f}  {old_share:9.4f}  {lse.item():6.4f}  "
        f"{out.item():7.4f}"
    )

reference = torch.softmax(scores, dim=0) @ values
print(f"merged: {out.item():.12f}   softmax over the whole row: {reference:.12f}")
print(
    f"merged lse: {lse.item():.12f}   logsumexp of the row: {scores.logsumexp(0):.12f}"
)
assert torch.allclose(out, reference, rtol=0, atol=1e-12)
assert torch.allclose(lse, scores.logsumexp(0), rtol=0, atol=1e-12)
# sphinx_gallery_start_ignore
assert old_shares[0] == 0 and all(0 < share < 1 for share in old_shares[1:])
# sphinx_gallery_end_ignore

# %%
# Before the first block nothing has been seen, so the earlier blocks' share is 0. After
# that each merge keeps the share ``old share`` of what came before (the fraction of the
# merged denominator that the earlier keys hold) and gives the rest to the new block.
# The final output equals the softmax-weighted average computed from the whole row, and
# the final ``lse`` the log-sum-exp of the whole row, to the last digit printed. Nothing
# but the output and the log-sum-exp of each query (here two numbers) was carried from
# one block to the next.
#
# Inside, :func:`~attention.functional.attention_block` subtracts the block's largest
# score before ``exp``, so that nothing overflows; FlashAttention-2's kernels carry that
# maximum :math:`m`, the sum :math:`\ell = \sum e^{s_j - m}` and the unnormalised
# :math:`\sum e^{s_j - m} v_j` instead, which is the same state written differently
# (:math:`\text{lse} = m + \log \ell`).
#
# .. literalinclude:: ../../../attention/functional.py
#    :language: python
#    :pyobject: merge_blocks
#    :no-docstring:
#
# From one row to whole tensors
# -----------------------------
#
# :func:`attention.tiled_attention` runs the same loop for all queries and heads at
# once, over *tiles*: a group of query rows against a block of keys, small enough that
# one tile of scores stays in the processor's cache. :func:`attention.tiled.tiles` lists
# the tiles, and with ``causal=True`` leaves out those that lie entirely in the queries'
# future. The forward pass merges each tile into the running output and log-sum-exp of
# its rows:
#
# .. literalinclude:: ../../../attention/tiled.py
#    :language: python
#    :pyobject: _blockwise_forward
#
# Exactly the reference
# ---------------------
#
# In float64 the tiled path and the reference agree to rounding, with and without a
# causal mask, for query and key lengths that the blocks do not divide:

from attention import causal_mask, scaled_dot_product_attention, tiled_attention

torch.manual_seed(seed)
shapes = [(300, 300, False), (300, 300, True), (200, 450, True), (450, 200, True)]
for L, S, causal in shapes:
    q = torch.randn(2, 4, L, 32, dtype=torch.float64, device=device)  # (N, H, L, D)
    k = torch.randn(2, 4, S, 32, dtype=torch.float64, device=device)  # (N, H, S, D)
    v = torch.randn(2, 4, S, 32, dtype=torch.float64, device=device)  # (N, H, S, D)
    mask = causal_mask(L, S, device=device) if causal else None
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    tiled_out = tiled_attention(q, k, v, causal=causal, block_size=64)
    error = (tiled_out - expected).abs().max().item()
    print(f"L={L} S={S} causal={causal!s:>5}: largest difference {error:.1e}")
    assert error < 1e-10

# %%
# Peak memory, and the tool that measures it
# ------------------------------------------
#
# How much memory does one call need beyond its inputs?
# :func:`attention.measure.peak_memory` answers: on a GPU from PyTorch's allocator
# (``torch.cuda.max_memory_allocated``); on the CPU under Linux from the process's peak
# resident memory (``VmHWM``), reset just before the call, so that every byte the call
# touched is counted, whoever allocated it. Elsewhere it returns ``None``.
#
# Three paths, on one sequence with 4 heads of dimension 64: the reference, the tiled
# path and PyTorch's own kernel, ``F.scaled_dot_product_attention`` (``sdpa`` below).
# Each is measured once without autograd (inference) and once as a training step: the
# forward pass, then the gradients of the queries, keys and values.

import torch.nn.functional as F

from attention.measure import peak_memory
from attention.repro import num_threads

paths = {
    "reference": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],
    "tiled": lambda q, k, v: tiled_attention(q, k, v),
    "sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
}
lengths = [256, 512, 1024, 2048]
H, D = 4, 64


def inputs(L, requires_grad=False):
    """Queries, keys and values (1, H, L, D), and the gradient of the output."""
    g = torch.Generator(device=device).manual_seed(L)
    q, k, v, grad = (
        torch.randn(1, H, L, D, device=device, generator=g) for _ in range(4)
    )  # (N, H, L, D) each
    return [x.requires_grad_(requires_grad) for x in (q, k, v)], grad


def inference(fn, L):
    (q, k, v), _ = inputs(L)
    with torch.no_grad():
        return peak_memory(fn, q, k, v, device=device)


def training(fn, L):
    (q, k, v), grad = inputs(L, requires_grad=True)
    return peak_memory(
        lambda: torch.autograd.grad(fn(q, k, v), (q, k, v), grad), device=device
    )


measured = peak_memory(lambda: None, device=device) is not None
memory = {}
# sphinx_gallery_start_ignore
# the first calls set up libraries: not counted
with num_threads(1):
    for mode in (inference, training) if measured else ():
        for fn in paths.values():
            _ = mode(fn, 64)
# sphinx_gallery_end_ignore
# The reference goes last: the memory its large blocks leave to the allocator would be
# counted again by the small paths' peaks.
with num_threads(1):
    for name in ("tiled", "sdpa", "reference") if measured else ():
        for mode in (inference, training):
            memory[mode.__name__, name] = [
                mode(paths[name], L) / 2**20 for L in lengths
            ]
if measured:
    print(f"extra peak memory in MiB on {device} (float32, N = 1, H = {H}, D = {D})")
    print("                    " + "".join(f"{f'L = {L}':>10}" for L in lengths))
    for mode in ("inference", "training"):
        for name in paths:
            mib = memory[mode, name]
            print(f"{mode:>9} {name:>9}" + "".join(f"{x:10.1f}" for x in mib))
    print("tiled / reference")
    for mode in ("inference", "training"):
        pairs = zip(memory[mode, "tiled"], memory[mode, "reference"], strict=True)
        print(f"{mode:>19}" + "".join(f"{t / r:10.2f}" for t, r in pairs))
else:
    print("peak memory needs Linux or a CUDA GPU; not measured here")

# %%
# Without autograd (the ``inference`` rows), the reference holds the scores and then
# the weights, two :math:`(H, L, L)` matrices, so its memory grows about fourfold each
# time L doubles; the tiled path needs its output, which grows with L, and one tile of
# scores, which stops growing once L reaches the tile's 512 keys; PyTorch's kernel, the
# same idea in C++, grows about twofold per doubling.
#
# With autograd (the ``training`` rows), the reference keeps its weights for the
# backward pass and builds their gradient there: it grows quadratically too. The tiled
# path grows more slowly, but it need not start lower. Its tile is 128 queries by up to
# 512 keys per head, half of the whole :math:`(L, L)` matrix at L = 256 and a quarter at
# 512, and its backward holds several tiles at once (the scores, the weights and their
# gradients), so at the short lengths it saves little or nothing. Where its ratio to the
# reference (the last rows) is above 1, as it can be at the shortest lengths, its peak
# is the larger, and where the ratio passes 1 the two lines of the figure's right panel
# cross. The ratio falls as L grows: at L = 2048 the tiled path takes a small fraction
# of the reference's memory (under a quarter in every run: the page checks it), for a
# reason the next sections take apart. (These peaks are measured in one process that has
# run other things, so a few MiB of them are the allocator's; ``make bench`` measures
# each case in a fresh process.)

# sphinx_gallery_start_ignore
from attention.repro import claim

# the claims this section's prose rests on
if measured:
    last = lengths[-1]
    scores_mib = H * last**2 * 4 / 2**20
    for mode in ("inference", "training"):
        reference_mib = memory[mode, "reference"]
        claim(
            f"{mode}: reference memory growth from L = {lengths[-2]} to {last}",
            reference_mib[-1] / reference_mib[-2],
            above=2.5,
            below=5,
        )
        for name in ("tiled", "sdpa"):
            claim(
                f"{mode}: {name} memory / the reference's at L = {last}",
                memory[mode, name][-1] / reference_mib[-1],
                below=0.15 if mode == "inference" else 0.25,  # training: 0.13-0.15 seen
            )
    shortest, longest = (
        memory["training", "tiled"][i] / memory["training", "reference"][i]
        for i in (0, -1)
    )
    claim(
        f"training: tiled / reference at L = {lengths[0]} over at L = {last}",
        shortest / longest,
        above=3,
    )
    claim(
        "inference: reference memory / one score matrix",
        memory["inference", "reference"][-1] / scores_mib,
        above=1.5,
        below=3,
    )

import matplotlib.pyplot as plt

if measured:
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharey=True, layout="constrained")
    for ax, mode in zip(axes, ("inference", "training"), strict=True):
        for name, marker in zip(paths, "osd", strict=True):
            ax.plot(lengths, memory[mode, name], marker=marker, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths])
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L = S")
        ax.set_title("no autograd" if mode == "inference" else "forward + backward")
    axes[0].set_ylabel("extra peak memory (MiB)")
    axes[0].legend()
    _ = fig.suptitle(f"Peak memory of one attention call ({device}, H = {H}, float32)")
# sphinx_gallery_end_ignore

# %%
# On logarithmic axes a power of L is a straight line whose slope is the exponent: the
# reference's line has a slope of about 2 without autograd and a somewhat smaller one
# with it, the block-wise ones clearly smaller slopes, and at the longest length the
# reference sits far above them.
#
# What autograd would keep
# ------------------------
#
# Autograd records every operation of the forward pass with the tensors its backward
# needs: ``weights @ value`` keeps ``weights``, the softmax keeps its output, and so
# on. A *saved-tensors hook* (``torch.autograd.graph.saved_tensors_hooks``) sees each
# tensor as it is saved, which lets us add up what a forward pass leaves behind for the
# backward, beyond its own inputs. Three candidates at L = 1024: the reference path; the
# same online softmax as :func:`attention.tiled_attention`, written as a plain loop of
# :func:`~attention.functional.attention_block` and
# :func:`~attention.functional.merge_blocks` over blocks of 256 keys and left to
# autograd; and :func:`attention.tiled_attention` itself.


def online_attention(q, k, v, block_size):
    """The online softmax over blocks of keys, all queries at once: the output and the
    log-sum-exp of every row, with autograd recording every step."""
    out = q.new_zeros((*q.shape[:-1], v.shape[-1]))  # (N, H, L, Dv)
    lse = q.new_full((*q.shape[:-1], 1), float("-inf"))  # (N, H, L, 1)
    for start in range(0, k.shape[-2], block_size):
        keys = slice(start, start + block_size)
        block = attention_block(
            q, k[..., keys, :], v[..., keys, :], scale=q.shape[-1] ** -0.5
        )  # (N, H, L, Dv), (N, H, L, 1)
        out, lse = merge_blocks(out, lse, *block)
    return out, lse


def saved_mib(fn, *inputs):
    """MiB that autograd saves for the backward of ``fn(*inputs)``, inputs excluded."""
    own = {x.untyped_storage().data_ptr() for x in inputs}
    saved = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:  # each storage counted once
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(saved.values()) / 2**20


(q, k, v), _ = inputs(1024, requires_grad=True)
weights_mib = H * 1024 * 1024 * 4 / 2**20
kept = {
    "reference path": saved_mib(paths["reference"], q, k, v),
    "the loop, through autograd": saved_mib(
        lambda q, k, v: online_attention(q, k, v, 256)[0], q, k, v
    ),
    "tiled_attention": saved_mib(paths["tiled"], q, k, v),
}
print(
    f"saved for the backward at L = 1024, H = {H} (the (H, L, S) weights: "
    f"{weights_mib:.0f} MiB)"
)
for name, mib in kept.items():
    print(f"  {name:<27} {mib:7.2f} MiB  ({mib / weights_mib:5.1%} of the weights)")

# sphinx_gallery_start_ignore
assert kept["the loop, through autograd"] >= 2 * weights_mib  # scores and weights
assert kept["reference path"] >= weights_mib
# exactly the output, (N, H, L, Dv), and the log-sum-exp, (N, H, L, 1)
assert abs(kept["tiled_attention"] - H * 1024 * (D + 1) * 4 / 2**20) < 1e-9
# sphinx_gallery_end_ignore

# %%
# The reference keeps its weights (and the scaled queries). The loop that never held
# more than one tile of scores at a time keeps every tile's scores, which the row
# maximum (``amax``) saves, and every tile's weights, which the softmax and
# ``p @ value`` save: each set together is the :math:`(L, S)` matrix again, twice the
# weights' size in all, and for every block a copy of the scaled queries and the block's
# output besides.
# So under autograd the online softmax alone saves no memory: here it keeps more than
# the reference.
# :func:`attention.tiled_attention` keeps exactly its output, :math:`(L, D_v)` per
# head, and one log-sum-exp per query row, :math:`(D_v + 1) / S` of the weights' size,
# because it brings its own backward pass: a ``torch.autograd.Function``, whose forward
# saves only what the backward below needs:
#
# .. literalinclude:: ../../../attention/tiled.py
#    :language: python
#    :pyobject: _BlockwiseAttention.forward
#
# The log-sum-exp trick
# ---------------------
#
# Why is the log-sum-exp of each row enough? The weights of a row are
# :math:`P_{ij} = e^{s_{ij}} / \sum_k e^{s_{ik}} = e^{s_{ij} - \text{lse}_i}`: with the
# row's log-sum-exp known, any tile of weights comes back exactly from that tile's
# scores alone, without the rest of the row. Here one tile (rows 256 to 383, keys 512 to
# 767) is recomputed from the ``lse`` that the online softmax returned, and compared
# with the reference's weights, in float64:

q64, k64, v64 = (x.detach().double().cpu() for x in (q, k, v))
with torch.no_grad():
    out64, lse64 = online_attention(q64, k64, v64, 256)
    _, weights64 = scaled_dot_product_attention(q64, k64, v64)  # (N, H, L, S)
rows, cols = slice(256, 384), slice(512, 768)
scale = D**-0.5
# (N, H, R, D) @ (N, H, D, C) -> (N, H, R, C)
tile_scores = (q64[..., rows, :] * scale) @ k64[..., cols, :].transpose(-2, -1)
tile_weights = torch.exp(tile_scores - lse64[..., rows, :])  # (N, H, R, C)
recompute_error = (tile_weights - weights64[..., rows, cols]).abs().max().item()
print(f"one tile of weights from its scores and the rows' lse: {recompute_error:.1e}")
assert recompute_error < 1e-14

# %%
# The backward in a few lines
# ---------------------------
#
# Write the forward as :math:`S = \text{scale} \cdot Q K^\top`,
# :math:`P = \text{softmax}(S)` row by row, :math:`O = P V`, and let :math:`dO` be the
# gradient of the loss with respect to :math:`O`. The chain rule gives
#
# .. math::
#
#    dV = P^\top dO, \qquad dP = dO\, V^\top, \qquad
#    dS_{ij} = P_{ij} \Big(dP_{ij} - \sum_k P_{ik}\, dP_{ik}\Big),
#
# the last from the softmax's Jacobian. The sum over :math:`k` runs over the whole row,
# which seems to need every tile at once. It does not:
#
# .. math::
#
#    \sum_k P_{ik}\, dP_{ik} = \sum_k P_{ik}\, (dO_i \cdot v_k)
#    = dO_i \cdot \sum_k P_{ik}\, v_k = dO_i \cdot O_i =: \delta_i ,
#
# one number per row, made of the output and its gradient, both of size
# :math:`(L, D_v)`. Then :math:`dQ = \text{scale} \cdot dS\, K` and
# :math:`dK = \text{scale} \cdot dS^\top Q`. Numerically, on the float64 problem above:

g = torch.Generator().manual_seed(seed)
grad_out64 = torch.randn(out64.shape, dtype=torch.float64, generator=g)  # (N, H, L, Dv)
grad_weights = grad_out64 @ v64.transpose(-2, -1)  # dP: (N, H, L, Dv) @ (N, H, Dv, S)
from_weights = (weights64 * grad_weights).sum(-1)  # needs (L, S): (N, H, L)
from_output = (grad_out64 * out64).sum(-1)  # needs (L, Dv): (N, H, L)
delta_error = (from_weights - from_output).abs().max().item()
print(f"rowsum(P * dP) against rowsum(dO * O): largest difference {delta_error:.1e}")
print(
    f"  (H, L, S) numbers for the first: {weights64[0].numel():,}; (H, L, Dv) for the "
    f"second: {out64[0].numel():,}"
)
assert delta_error < 1e-10

# %%
# So each tile's share of the gradients needs only its own queries, keys and values,
# the rows' ``lse`` and :math:`\delta`, and the rows' :math:`dO`: the tile's weights are
# recomputed, used, and dropped. That is the backward pass of FlashAttention
# :cite:p:`dao2022`, one tile at a time, in
# :func:`attention.functional.attention_block_backward`:
#
# .. literalinclude:: ../../../attention/functional.py
#    :language: python
#    :pyobject: attention_block_backward
#    :no-docstring:
#
# :func:`attention.tiled_attention`'s backward walks the tiles of the forward pass,
# adding each tile's share into the gradients of its rows and of its keys. The price is
# arithmetic: the scores of every tile are computed twice, once in each pass. In float64
# the gradients equal the reference's to rounding, with and without the causal mask, on
# lengths the tiles do not divide:

for L, S, causal in shapes:
    g = torch.Generator(device=device).manual_seed(L + S)
    q, k, v = (
        torch.randn(
            2, 4, n, 32, dtype=torch.float64, device=device, generator=g
        ).requires_grad_()
        for n in (L, S, S)
    )  # (N, H, L or S, D)
    grad = torch.randn(2, 4, L, 32, dtype=torch.float64, device=device, generator=g)
    mask = causal_mask(L, S, device=device) if causal else None
    expected = torch.autograd.grad(
        scaled_dot_product_attention(q, k, v, mask)[0], (q, k, v), grad
    )
    got = torch.autograd.grad(
        tiled_attention(q, k, v, causal=causal, block_size=64), (q, k, v), grad
    )
    errors = [(a - b).abs().max().item() for a, b in zip(got, expected, strict=True)]
    print(
        f"L={L} S={S} causal={causal!s:>5}: largest difference in dQ, dK, dV "
        + ", ".join(f"{e:.1e}" for e in errors)
    )
    assert max(errors) < 1e-10

# %%
# What to remember
# ----------------
#
# - Softmax does not need the whole row at once: a block of keys is summarised by its
#   output and the log-sum-exp of its scores, and two summaries merge exactly
#   (:func:`~attention.functional.merge_blocks`), in any order.
# - Attention computed that way never holds the :math:`(L, S)` scores in the forward
#   pass. Under autograd that is not enough: the backward would keep every tile's
#   scores and weights, the whole matrix twice.
# - FlashAttention-2's backward keeps, beyond Q, K and V, only the output and one
#   log-sum-exp per row: each tile's weights come back as
#   :math:`e^{S - \text{lse}}`, and the softmax's row sum
#   :math:`\sum_k P_{ik}\,dP_{ik}` equals :math:`dO_i \cdot O_i`. Training memory then
#   grows like the output, linearly in L, for one more :math:`QK^\top` of arithmetic.
# - :func:`attention.tiled_attention` does both passes in plain PyTorch, exact against
#   :func:`attention.scaled_dot_product_attention`; it has first derivatives only.
#
# API used on this page: :func:`attention.tiled_attention`,
# :func:`attention.functional.attention_block`,
# :func:`attention.functional.merge_blocks`,
# :func:`attention.scaled_dot_product_attention`, :func:`attention.causal_mask` and
# :func:`attention.measure.peak_memory`.

# %%
# Exercises
# ---------
#
# 1. **Any block size, any order.** Run the online softmax of "Softmax one block at a
#    time" on the same 8 scores and values with blocks of 1 to 8 keys, and with the
#    blocks taken last to first. Does the result change?

# %%
# .. solution 1
#
# Every split and every order gives the softmax-weighted average of the whole row to
# float64 rounding: merging is commutative and associative, so the result does not
# depend on the order in which the keys arrive.

gaps = {}
for size in range(1, len(scores) + 1):
    for reverse in (False, True):
        starts = list(range(0, len(scores), size))[:: -1 if reverse else 1]
        out = torch.zeros(1, 1, dtype=torch.float64)
        lse = torch.full((1, 1), float("-inf"), dtype=torch.float64)
        for start in starts:
            part = slice(start, start + size)
            block = attention_block(
                one_query, scores[part, None], values[part, None], scale=1.0
            )
            out, lse = merge_blocks(out, lse, *block)
        gaps[size, reverse] = (out - reference).abs().item()
print(f"largest difference from the whole-row softmax: {max(gaps.values()):.1e}")
assert max(gaps.values()) < 1e-12

# %%
# Previous: :ref:`sphx_glr_tutorials_5_scale_17_performance.py`. Next: masks written as
# functions, and a kernel that skips the tiles they exclude, in
# :ref:`sphx_glr_tutorials_5_scale_19_flex_attention.py`.

# sphinx_gallery_thumbnail_number = 1
