"""
The Transformer block
=====================

.. prerequisites:: 04_multi_head 05_masks
   :summary: Feed-forward, residuals, layer norm and dropout around attention; post-LN
      against pre-LN, measured; equal to nn.TransformerEncoderLayer.

Attention lets tokens exchange information; a Transformer block adds a position-wise
feed-forward network, which works on each token alone, and wraps the two in what makes a
deep stack of such layers trainable: a residual connection around each and layer
normalisation :cite:p:`ba2016`, with dropout on the branches against overfitting. This
page builds :class:`attention.TransformerBlock` (8 heads, as in :cite:t:`vaswani2017`),
shows where each part sits and why, measures the difference between the original
*post-LN* order and the *pre-LN* order that many deeper models use, and checks that the
block gives the same numbers as PyTorch's ``nn.TransformerEncoderLayer``.

"""

# %%
# Setup
# -----

import torch

from attention.repro import claim, default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# The block in code
# -----------------
#
# Two sub-layers, each wrapped the same way: compute a *branch* (attention, then the
# feed-forward network), apply dropout to it, add it to the *residual stream* ``x`` that
# flows past, and normalise. ``norm_first`` only moves the LayerNorm from after the sum
# (post-LN, as in :cite:t:`vaswani2017`) to the start of the branch (pre-LN):
#
# .. literalinclude:: ../../../attention/block.py
#    :language: python
#    :pyobject: TransformerBlock.forward
#
# ``_attend`` runs the block's :class:`attention.MultiHeadAttention` and the first
# dropout:
#
# .. literalinclude:: ../../../attention/block.py
#    :language: python
#    :pyobject: TransformerBlock._attend
#
# The feed-forward network is a two-layer MLP with a ReLU, widening ``E`` to ``ffn_dim``
# and back:
#
# .. literalinclude:: ../../../attention/block.py
#    :language: python
#    :pyobject: FeedForward.forward
#
# The block of :cite:t:`vaswani2017`: ``E = 512``, 8 heads, ``ffn_dim = 2048``,
# dropout 0.1. Where do its parameters sit?

from attention import TransformerBlock

N, L, E, H = 4, 10, 512, 8
block = TransformerBlock(E, H, ffn_dim=2048, dropout=0.1).to(device)


from attention.training import count_parameters as count

for name, part in [
    ("self_attn", block.self_attn),
    ("ffn", block.ffn),
    ("norm1 + norm2", [block.norm1, block.norm2]),
]:
    n = count(part) if isinstance(part, torch.nn.Module) else sum(map(count, part))
    print(f"{name:<14}{n:>10,}  ({n / count(block):.0%})")
print(f"{'block':<14}{count(block):>10,}")
# sphinx_gallery_start_ignore
assert count(block.ffn) == 2 * 512 * 2048 + 2048 + 512
# sphinx_gallery_end_ignore

# %%
# The feed-forward network holds two thirds of the parameters. A batch of 4 sentences of
# 10 tokens goes in and comes out with the same shape; asked for them, the block also
# returns the weights of its 8 heads:

x = torch.randn(N, L, E, device=device)  # (N, L, E)
block.eval()  # no dropout while we look
with torch.no_grad():
    out, weights = block(x, need_weights=True)
print(
    f"input {tuple(x.shape)} -> output {tuple(out.shape)}, weights "
    f"{tuple(weights.shape)}"
)
# sphinx_gallery_start_ignore
assert out.shape == x.shape and weights.shape == (N, H, L, L)
# sphinx_gallery_end_ignore

# %%
# The order, drawn
# ----------------
#
# Which part runs when? Rather than drawing it by hand, the picture below records the
# order in which the block's sub-modules actually run (with forward hooks), for both
# settings of ``norm_first``, and draws it. The two sums are the residual connections:
# the red lines carry the residual stream past the branch.


def call_order(module, names, x):
    """
    The names of ``module``'s sub-modules ``names``, in the order a forward pass calls
    them.
    """
    order = []
    hooks = [
        module.get_submodule(name).register_forward_hook(
            lambda *_, name=name: order.append(name)
        )
        for name in names
    ]
    module(x)
    for hook in hooks:
        hook.remove()
    return order


parts = ["self_attn", "ffn", "norm1", "norm2", "dropout1", "dropout2"]
probe_input = torch.randn(1, 3, 32)
orders = {
    norm_first: call_order(
        TransformerBlock(32, 4, ffn_dim=64, norm_first=norm_first), parts, probe_input
    )
    for norm_first in (False, True)
}
for norm_first, order in orders.items():
    print(f"norm_first={norm_first!s:<5}  {' -> '.join(order)}")
# sphinx_gallery_start_ignore
assert orders[False] == ["self_attn", "dropout1", "norm1", "ffn", "dropout2", "norm2"]
assert orders[True] == ["norm1", "self_attn", "dropout1", "norm2", "ffn", "dropout2"]
# sphinx_gallery_end_ignore

# %%
# ``nn.TransformerEncoderLayer`` runs its modules in the same order, its feed-forward
# network (``linear1``, ``dropout``, ``linear2``) included; recorded the same way, in
# training mode:

from torch import nn

ours_parts = [
    "self_attn",
    "dropout1",
    "norm1",
    "norm2",
    "ffn.linear1",
    "ffn.dropout",
    "ffn.linear2",
    "dropout2",
]
theirs_parts = [name.removeprefix("ffn.") for name in ours_parts]
for norm_first in (False, True):
    theirs = nn.TransformerEncoderLayer(
        32, 4, 64, batch_first=True, norm_first=norm_first
    )
    theirs_order = call_order(theirs, theirs_parts, probe_input)
    ours_order = call_order(
        TransformerBlock.from_torch(theirs), ours_parts, probe_input
    )
    print(
        f"norm_first={norm_first}\n  nn.TransformerEncoderLayer: "
        f"{' -> '.join(theirs_order)}\n  TransformerBlock:           "
        f"{' -> '.join(ours_order)}"
    )
    # sphinx_gallery_start_ignore
    assert [name.removeprefix("ffn.") for name in ours_order] == theirs_order
    # sphinx_gallery_end_ignore

# %%

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch


def draw_block(ax, order, norm_first, cx, title):
    """Draw one block bottom to top in ``order``, adding each residual sum after its
    dropout; the residual connection leaves the stream where a branch begins."""
    branch_starts = ("norm1", "norm2") if norm_first else ("self_attn", "ffn")
    items = []
    for name in order:
        items.append(name)
        if name.startswith("dropout"):
            items.append("+")
    width, height, radius, gap = 2.7, 0.95, 0.25, 0.5
    ax.text(cx, -0.3, "x", ha="center", va="center", fontsize=12)
    top, junctions, pluses = 0.0, [], []
    for item in items:
        bottom = top + gap
        if item in branch_starts:
            junctions.append(top + gap / 2)
        if item == "+":
            ax.add_patch(Circle((cx, bottom + radius), radius, fc="white", ec="black"))
            ax.text(cx, bottom + radius, "+", ha="center", va="center", fontsize=13)
            pluses.append(bottom + radius)
            new_top = bottom + 2 * radius
        else:
            text, colour = LABELS[item]
            ax.add_patch(
                FancyBboxPatch(
                    (cx - width / 2, bottom),
                    width,
                    height,
                    boxstyle="round,pad=0.02",
                    fc=colour,
                    ec="black",
                )
            )
            ax.text(cx, bottom + height / 2, text, ha="center", va="center", fontsize=9)
            new_top = bottom + height
        ax.add_patch(
            FancyArrowPatch((cx, top), (cx, bottom), arrowstyle="->", mutation_scale=10)
        )
        top = new_top
    ax.add_patch(
        FancyArrowPatch((cx, top), (cx, top + gap), arrowstyle="->", mutation_scale=10)
    )
    ax.text(cx, top + gap + 0.3, "out", ha="center", va="center", fontsize=11)
    red, side = "#b3401a", cx - width / 2 - 0.45
    for start, plus in zip(junctions, pluses, strict=True):  # the residual connections
        ax.plot([cx], [start], "o", color=red, ms=4)
        ax.plot([cx, side, side], [start, start, plus], color=red, lw=1.5)
        ax.add_patch(
            FancyArrowPatch(
                (side, plus),
                (cx - radius, plus),
                arrowstyle="->",
                mutation_scale=10,
                color=red,
                lw=1.5,
            )
        )
    ax.text(
        cx, top + gap + 1.0, title, ha="center", va="center", fontsize=10, weight="bold"
    )
    return top + gap + 1.4


LABELS = {
    "self_attn": ("multi-head attention\n(dropout on its weights)", "#a6d8a6"),
    "ffn": ("feed-forward: linear,\nReLU, dropout, linear", "#c9b3e6"),
    "norm1": ("LayerNorm (norm1)", "#9ecae1"),
    "norm2": ("LayerNorm (norm2)", "#9ecae1"),
    "dropout1": ("dropout (dropout1)", "#fdbb84"),
    "dropout2": ("dropout (dropout2)", "#fdbb84"),
}
fig, ax = plt.subplots(figsize=(8, 8.4), layout="constrained")
height = draw_block(
    ax, orders[False], False, 2.0, "post-LN\n(norm_first=False,\nVaswani et al.)"
)
draw_block(ax, orders[True], True, 6.6, "pre-LN\n(norm_first=True)")
ax.set_xlim(-0.4, 8.2)
ax.set_ylim(-0.7, height)
ax.set_aspect("equal")
ax.axis("off")
ax.set_title("One block, in the order its modules run\n(red: the residual connections)")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Post-LN normalises *after* each sum, so the residual stream itself passes through
# every LayerNorm. Pre-LN normalises only what goes *into* each branch; the stream from
# ``x`` to ``out`` is nothing but additions. In both, dropout sits on the branch, before
# the sum.
#
# The feed-forward network works on each token alone
# --------------------------------------------------
#
# The same MLP is applied to every position separately: changing one token changes the
# feed-forward output of that token only. Attention is the only place where tokens mix.

with torch.no_grad():
    changed = x.clone()
    changed[:, 7] += 1.0  # change token 7 of every sentence
    ffn_moved = (block.ffn(changed) - block.ffn(x)).abs().amax(dim=(0, 2)) > 0  # (L,)
    attn_moved = (block.self_attn(changed)[0] - block.self_attn(x)[0]).abs().amax(
        dim=(0, 2)
    ) > 0
print(
    "positions whose FFN output changed:       "
    f"{ffn_moved.nonzero().flatten().tolist()}"
)
print(
    "positions whose attention output changed: "
    f"{attn_moved.nonzero().flatten().tolist()}"
)
# sphinx_gallery_start_ignore
assert ffn_moved.tolist() == [i == 7 for i in range(L)] and attn_moved.all()
# sphinx_gallery_end_ignore

# %%
# Residual connections and LayerNorm
# ----------------------------------
#
# A residual connection adds the branch to its input, ``x + f(x)``, so the input always
# gets through, even when ``f`` is still random. At initialisation, on this input of
# RMS about 1, the branches are small next to the stream: each branch's RMS, as a
# fraction of the stream's (printed below), is under 0.5 in all 30 runs of the sweep
# (seeds 0 to 9 on three CPU kernels), and the lowest cosine of a token's output with
# its input is above 0.8, so on this input the block starts close to the identity.
# The LayerNorm then rescales every token to mean 0 and standard deviation 1 over its
# ``E`` features (its gain starts at 1 and its bias at 0):


def rms(t):
    return t.pow(2).mean().sqrt().item()


with torch.no_grad():
    attended, _ = block.self_attn(x)  # the first branch
    stream = block.norm1(x + attended)
    fed_forward = block.ffn(stream)  # the second branch
    cosine = torch.cosine_similarity(out, x, dim=-1)  # per token  (N, L)
print(
    f"RMS of x {rms(x):.3f}; of the attention branch {rms(attended):.3f} "
    f"({rms(attended) / rms(x):.2f} of x's), of the feed-forward branch "
    f"{rms(fed_forward):.3f} ({rms(fed_forward) / rms(x):.2f} of x's)"
)
print(
    "cosine similarity of each token's output with its input: min "
    f"{cosine.min().item():.3f}"
)
print(
    f"output per token: largest |mean| {out.mean(-1).abs().max().item():.1e}, "
    f"std between {out.std(-1, unbiased=False).min().item():.4f} and "
    f"{out.std(-1, unbiased=False).max().item():.4f}"
)
# sphinx_gallery_start_ignore
claim("RMS of the attention branch / the stream", rms(attended) / rms(x), below=0.5)
claim(
    "RMS of the feed-forward branch / the stream", rms(fed_forward) / rms(x), below=0.5
)
claim("lowest cosine of a token's output with its input", cosine.min(), above=0.8)
assert torch.allclose(
    out.std(-1, unbiased=False), torch.ones(N, L, device=device), atol=1e-3
)

# sphinx_gallery_end_ignore
# %%
# Where dropout goes, and where it does not
# -----------------------------------------
#
# Dropout, in training mode only, zeroes each value with probability ``p`` and scales
# the rest by :math:`1/(1-p)`. The block uses it in the three places
# ``nn.TransformerEncoderLayer`` uses it: on the attention weights, after the
# feed-forward network's ReLU, and on each branch before the sum (``dropout1``,
# ``dropout2``). It regularises what a branch *adds*, and leaves the residual stream
# alone. In evaluation mode it does nothing, so the output is deterministic:

with torch.no_grad():
    block.train()
    first, second = block(x)[0], block(x)[0]
    block.eval()
    third, fourth = block(x)[0], block(x)[0]
print(
    f"train mode: two calls differ by up to {(first - second).abs().max().item():.3f}"
)
print(
    f"eval mode:  two calls differ by up to {(third - fourth).abs().max().item():.3f}"
)
# sphinx_gallery_start_ignore
assert not torch.equal(first, second) and torch.equal(third, fourth)
# sphinx_gallery_end_ignore

# %%
# A common misplacement puts dropout *after* the LayerNorm, ``dropout(norm(x + f(x)))``.
# Then dropout hits the residual stream itself: every block erases a tenth of the
# stream's values, the values every later block and the output read, and the stream's
# scale is different in training (values scaled by :math:`1/(1-p)`) and in evaluation.
# Compare the two placements in training mode:


def misplaced(block, x):
    """Post-LN with each dropout moved after its LayerNorm: how *not* to do it."""
    attended, _ = block.self_attn(x)
    x = block.dropout1(block.norm1(x + attended))  # (N, L, E)
    return block.dropout2(block.norm2(x + block.ffn(x)))  # (N, L, E)


block.train()
with torch.no_grad():
    right, wrong = block(x)[0], misplaced(block, x)
block.eval()
for name, result in [
    ("dropout before the sum", right),
    ("dropout after the norm", wrong),
]:
    zeros = (result == 0).float().mean().item()
    std = result.std(-1, unbiased=False).mean().item()
    print(
        f"{name:<24} output values exactly 0: {zeros:.1%}; mean per-token std {std:.3f}"
    )
# sphinx_gallery_start_ignore
assert (right == 0).sum() == 0
zeroed = (wrong == 0).float().mean()
claim("dropout after the norm: fraction zeroed", zeroed, above=0.08, below=0.12)
claim(
    "dropout after the norm: mean per-token std",
    wrong.std(-1, unbiased=False).mean(),
    above=1.03,
)
# sphinx_gallery_end_ignore

# %%
# With dropout on the branches, no output value is zeroed and every token leaves with
# standard deviation 1, as in evaluation. Misplaced, about a tenth of the stream is
# erased and its standard deviation is inflated (the numbers printed above), so the next
# block sees different statistics in training and in evaluation.
#
# Post-LN or pre-LN: a measurement
# --------------------------------
#
# The original Transformer used post-LN; many later, deeper models (GPT-2, for one) use
# pre-LN. The reason shows up in a stack of blocks at initialisation. Below, stacks of
# 24 blocks with ``E = 64``, 8 heads and ``ffn_dim = 256`` (small, so that it runs fast)
# process a batch of random tokens; the pre-LN stack gets the final LayerNorm it needs
# (its stream is never normalised otherwise). The loss is the squared error against a
# random target. We record the size (RMS) of the residual stream after each block, and
# the norm of the gradient of the loss with respect to the stream entering each block:
# the signal from which that block and all blocks below it learn.

small = {"embed_dim": 64, "num_heads": 8, "ffn_dim": 256, "dropout": 0.0}


def measure(norm_first, depth, seed):
    """
    Run a stack once: RMS of the stream after each block, gradient norm entering each.
    """
    torch.manual_seed(seed)
    blocks = [
        TransformerBlock(**small, norm_first=norm_first).to(device)
        for _ in range(depth)
    ]
    final = nn.LayerNorm(64, device=device) if norm_first else nn.Identity()
    h = torch.randn(8, 16, 64, device=device, requires_grad=True)  # (N, L, E)
    inputs, sizes = [], []
    for b in blocks:
        if not h.is_leaf:
            h.retain_grad()
        inputs.append(h)
        h, _ = b(h)
        sizes.append(rms(h))
    out = final(h)
    loss = (out - torch.randn_like(out)).pow(2).mean()
    loss.backward()
    return sizes, [t.grad.norm().item() for t in inputs]


# The tensors are tiny: on a CPU, one thread runs them faster than several (starting the
# threads costs more than the work), so the measurements run single-threaded.
from attention.repro import num_threads

depth = 24
with num_threads(1):
    post_sizes, post_grads = measure(False, depth, seed)
    pre_sizes, pre_grads = measure(True, depth, seed)
print(
    f"stream RMS after block 1 and block {depth}: post-LN {post_sizes[0]:.3f} -> "
    f"{post_sizes[-1]:.3f}; pre-LN {pre_sizes[0]:.3f} -> {pre_sizes[-1]:.3f}"
)
print(
    f"gradient norm entering block 1 / entering block {depth}: "
    f"post-LN {post_grads[0] / post_grads[-1]:.2f}; pre-LN "
    f"{pre_grads[0] / pre_grads[-1]:.2f}"
)
# sphinx_gallery_start_ignore
assert all(abs(s - 1) < 1e-3 for s in post_sizes)
claim("pre-LN stream RMS, last block / first", pre_sizes[-1] / pre_sizes[0], above=1.3)
# sphinx_gallery_end_ignore
claim("post-LN gradient, first block / last", post_grads[0] / post_grads[-1], below=1)
claim("pre-LN gradient, first block / last", pre_grads[0] / pre_grads[-1], above=1)

# %%
# The residual stream first:


# sphinx_gallery_start_ignore
def plot_per_block(post, pre, *, xlabel, ylabel, title):
    """One value per block for the post-LN and the pre-LN stack, on one figure."""
    blocks_axis = range(1, depth + 1)
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.plot(blocks_axis, post, "o-", label="post-LN")
    ax.plot(blocks_axis, pre, "s-", label="pre-LN")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.set_title(f"{title} through {depth} blocks at initialisation")
    plt.show()


plot_per_block(
    post_sizes,
    pre_sizes,
    xlabel="block",
    ylabel="RMS of the residual stream after the block",
    title="Activations",
)
# sphinx_gallery_end_ignore

# %%
# Post-LN's stream is renormalised by every block: its RMS is 1 all the way. Pre-LN's
# stream is a sum that every block adds to, so it grows with depth (the numbers printed
# above); the final LayerNorm brings it back to scale. Now the gradients:

# sphinx_gallery_start_ignore
plot_per_block(
    post_grads,
    pre_grads,
    xlabel="block (1 = nearest the input)",
    ylabel="gradient norm of the loss\nw.r.t. the stream entering the block",
    title="Gradients",
)
# sphinx_gallery_end_ignore

# %%
# Read the plot from right to left, the way the gradient travels. In post-LN it has to
# cross every block's two LayerNorms: in this run's figure it weakens through the upper
# blocks and is nearly level below them, and it reaches the first block weaker than it
# left the last (the ratio printed above, below 1). In pre-LN the stream is a plain sum,
# so the gradient at the top reaches every block through the sum, and the branches add
# paths of their own: here it reaches the first block stronger (the ratio above 1). Both
# ratios are claims, and hold for seeds 0 to 9 on three CPU kernels (30 runs). The same
# measurement for stacks of 6 to 48 blocks shows how the two ratios change with depth:

print("blocks   gradient entering block 1 / entering the last block")
print("         post-LN   pre-LN")
ratios = {}
for d in (6, 12, 24, 48):
    with num_threads(1):
        post = measure(False, d, seed)[1]
        pre = measure(True, d, seed)[1]
    ratios[d] = post[0] / post[-1], pre[0] / pre[-1]
    print(f"{d:>6}   {ratios[d][0]:>7.2f}   {ratios[d][1]:>6.2f}")
post_ratios = [r[0] for r in ratios.values()]
claim(
    "post-LN ratio at 48 blocks / at 6 blocks",
    post_ratios[-1] / post_ratios[0],
    below=1,
)
claim("post-LN ratio at 48 blocks", post_ratios[-1], below=0.9)
claim("pre-LN ratio, lowest", min(r[1] for r in ratios.values()), above=1)

# %%
# In post-LN the ratio is lower at 48 blocks than at 6, and below 0.9 at 48, in all 30
# runs (the left column is this run), so the lower blocks of a deep post-LN stack learn
# from a weaker gradient than the upper ones; in pre-LN it reached the first block
# stronger than it left the last at each of the four depths (the right column, above 1
# in every row; the claim on its lowest holds over the same 30 runs). These are
# gradients entering the blocks at initialisation, not a training run.
# :cite:t:`xiong2020` made the argument in full: they showed that at initialisation the
# gradients of post-LN's parameters are largest near the output, which is why post-LN
# needs a learning-rate warm-up, and that pre-LN trains without one. Pre-LN pays with a
# stream that grows with depth and needs a final LayerNorm. At 6 blocks, the depth of
# :cite:t:`vaswani2017`, post-LN loses little in this run (the first line of the table),
# and ``nn.TransformerEncoderLayer`` still defaults to it (``norm_first=False``), as
# does this package.
#
# Equal to ``nn.TransformerEncoderLayer``
# ---------------------------------------
#
# :meth:`attention.TransformerBlock.from_torch` copies every parameter of a PyTorch
# encoder layer. With a padding mask, converted to PyTorch's polarity by
# :func:`attention.masks.to_torch_key_padding_mask`, both give the same outputs and the
# same gradients on the input and on the feed-forward network's first layer (the two
# compared), in both orders:

from attention import padding_mask
from attention.masks import to_torch_key_padding_mask

mask = padding_mask(torch.tensor([10, 7, 3, 9], device=device), L)  # (N, 1, 1, S)
for norm_first in (False, True):
    layer = nn.TransformerEncoderLayer(
        E,
        H,
        dim_feedforward=2048,
        dropout=0.1,
        batch_first=True,
        norm_first=norm_first,
        device=device,
    ).eval()
    ours = TransformerBlock.from_torch(layer)
    x_theirs, x_ours = (x.clone().requires_grad_() for _ in range(2))  # (N, L, E)
    theirs_out = layer(x_theirs, src_key_padding_mask=to_torch_key_padding_mask(mask))
    ours_out, _ = ours(x_ours, mask=mask)
    theirs_out.pow(2).sum().backward()
    ours_out.pow(2).sum().backward()
    out_diff = (ours_out - theirs_out).abs().max().item()
    input_diff = (x_ours.grad - x_theirs.grad).abs().max().item()
    grad_diff = (
        (ours.ffn.linear1.weight.grad - layer.linear1.weight.grad).abs().max().item()
    )
    print(
        f"norm_first={norm_first!s:<5}  outputs differ by {out_diff:.1e}; gradients "
        f"of the input by {input_diff:.1e}, of linear1 by {grad_diff:.1e}"
    )
    # sphinx_gallery_start_ignore
    # float32, sums over 512 and 2048 terms: agreement to about 1e-6 of the values'
    # size.
    assert torch.allclose(ours_out, theirs_out, atol=1e-5)
    assert torch.allclose(x_ours.grad, x_theirs.grad, atol=1e-4)
    assert torch.allclose(
        ours.ffn.linear1.weight.grad, layer.linear1.weight.grad, atol=1e-4
    )
    # sphinx_gallery_end_ignore

# %%
# The differences printed above are float32 rounding: the two implementations add the
# same numbers in a different order.
#
# What to remember
# ----------------
#
# - A block is two sub-layers, attention then a position-wise feed-forward network; each
#   is a branch added to the residual stream, with a LayerNorm after the sum (post-LN)
#   or at the start of the branch (pre-LN, ``norm_first=True``).
# - Only attention mixes tokens; the feed-forward network, which holds most of the
#   parameters, works on each token alone.
# - Dropout goes on the attention weights, inside the feed-forward network and on each
#   branch before the sum, never on the residual stream itself (after a post-LN
#   LayerNorm), where it would erase part of the stream.
# - At initialisation, post-LN keeps activations at scale but weakens the gradient on
#   its way down a deep stack; in pre-LN it reached the first block stronger in every
#   stack measured here, while the stream grows with depth and needs a final LayerNorm.
# - :meth:`attention.TransformerBlock.from_torch` matches ``nn.TransformerEncoderLayer``
#   in both orders.
#
# API used on this page: :class:`attention.TransformerBlock`,
# :class:`attention.FeedForward`, :class:`attention.MultiHeadAttention` (the block's
# ``self_attn``), :func:`attention.padding_mask` and
# :func:`attention.masks.to_torch_key_padding_mask`.

# %%
# Exercises
# ---------
#
# 1. **Count the parameters by hand.** Write the number of parameters of
#    ``TransformerBlock(E, H, ffn_dim=F)`` as a formula (the four projections of the
#    attention, the two linear layers, the two LayerNorms), evaluate it for the block of
#    :cite:t:`vaswani2017`, and compare with ``count(block)``. Does it depend on ``H``?
# 2. **Branches that add nothing.** Zero the weights and biases of the last layer of
#    both branches (``self_attn.out_proj`` and ``ffn.linear2``) of a small block, so
#    that each branch returns 0. Predict what a pre-LN block then returns, and what a
#    post-LN block returns, and check both.
# 3. **A causal block.** Change token 7 of every sentence again, as in the section on
#    the feed-forward network, but run the whole ``block`` with a causal mask
#    (:func:`attention.causal_mask`). Which output positions change, and which stay
#    exactly as they were?

# %%
# .. solution 1
#
# :math:`4(E^2 + E)` for the projections, :math:`2EF + F + E` for the feed-forward
# network and :math:`4E` for the LayerNorms. The heads split ``E`` among themselves,
# so ``H`` does not appear: 8 heads or 1, the same number of parameters.


def block_parameters(E, F):
    """The parameters of ``TransformerBlock(E, H, ffn_dim=F)``, for any ``H``."""
    return 4 * (E * E + E) + (2 * E * F + F + E) + 2 * 2 * E


print(f"by hand {block_parameters(512, 2048):,}; count(block) {count(block):,}")
assert block_parameters(512, 2048) == count(block)
assert block_parameters(64, 96) == count(TransformerBlock(64, 1, ffn_dim=96))

# %%
# .. solution 2
#
# Pre-LN adds the branches to the stream, so with both branches 0 the block is the
# identity, bit for bit. Post-LN still normalises after each sum: it returns
# ``norm2(norm1(x))``, every token rescaled to mean 0 and standard deviation 1.

silent = {}
for norm_first in (False, True):
    quiet = TransformerBlock(32, 4, ffn_dim=64, norm_first=norm_first).eval()
    with torch.no_grad():
        for last in (quiet.self_attn.out_proj, quiet.ffn.linear2):
            last.weight.zero_()
            last.bias.zero_()
        silent[norm_first] = (
            quiet(probe_input)[0],
            quiet.norm2(quiet.norm1(probe_input)),
        )
pre_out, _ = silent[True]
post_out, post_expected = silent[False]
print(f"pre-LN output equals its input: {torch.equal(pre_out, probe_input)}")
print(
    "post-LN output equals norm2(norm1(x)): "
    f"{torch.allclose(post_out, post_expected, atol=1e-6)}; per-token std "
    f"{post_out.std(-1, unbiased=False).min():.4f} to "
    f"{post_out.std(-1, unbiased=False).max():.4f}"
)
assert torch.equal(pre_out, probe_input)
assert torch.allclose(post_out, post_expected, atol=1e-6)

# %%
# .. solution 3
#
# With the causal mask, token 7 is a key only for queries 7, 8 and 9, and the rest of
# the block works on each token alone: positions 0 to 6 keep their exact values.

from attention import causal_mask

with torch.no_grad():
    before = block(x, causal_mask(L, device=device))[0]  # (N, L, E)
    after = block(changed, causal_mask(L, device=device))[0]  # (N, L, E)
moved = (after - before).abs().amax(dim=(0, 2)) > 0  # (L,)
print(f"positions whose block output changed: {moved.nonzero().flatten().tolist()}")
assert moved.tolist() == [i >= 7 for i in range(L)]

# %%
# Next: :ref:`sphx_glr_tutorials_2_building_and_checking_08_checking_gradients.py`
# checks the gradients of these modules against finite differences.

# sphinx_gallery_thumbnail_number = 3
