"""
Multi-head attention
====================

.. prerequisites:: 03_self_attention
   :summary: Heads as a view and a transpose: MultiHeadAttention on a batch, checked
      against eight separate attentions, and one head compared with eight.

One attention over all 512 dimensions of a token, or eight attentions over 64 dimensions
each? Multi-head attention takes the second option: it cuts the projected queries, keys
and values into ``H`` slices (the *heads*), lets each slice attend on its own, glues the
results back together and mixes them with one more linear layer. This page shows that
the cut is only a ``view`` and a ``transpose``, runs
:class:`attention.MultiHeadAttention` on a batch of sentences, checks it against eight
separate attentions, and compares one head with eight. It builds on the previous
pages: queries, keys and values are learned projections of the tokens, and attention is
:math:`\\text{softmax}(QK^\\top/\\sqrt{D})\\,V`.
"""

# %%
# Setup
# -----
#
# Everything runs on the GPU when there is one, else on the CPU; the seed makes every
# run on the same machine print the same numbers (another machine's kernels may round
# the last digits differently, as
# :ref:`sphx_glr_tutorials_1_foundations_02_scaled_dot_product.py` explains).

import torch

from attention.repro import default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# Heads are slices of the embedding
# ---------------------------------
#
# With ``E = 512`` and ``H = 8`` each head works in ``D = E / H = 64`` dimensions: head
# 0 gets features 0 to 63 of every token, head 1 features 64 to 127, and so on. Two
# small functions do the cutting and the gluing:
#
# .. literalinclude:: ../../../attention/multi_head.py
#    :language: python
#    :pyobject: split_heads
#
# .. literalinclude:: ../../../attention/multi_head.py
#    :language: python
#    :pyobject: merge_heads
#
# ``view`` reads the last dimension ``E`` as ``(H, D)``; ``transpose(1, 2)`` moves the
# head dimension in front of the tokens, so that every head is a separate ``(L, D)``
# matrix and one batched matrix product serves all heads at once. Here is a batch of 4
# sentences of 10 tokens of 512 dimensions:

from attention.multi_head import merge_heads, split_heads

N, L, E, H = 4, 10, 512, 8
D = E // H
x = torch.randn(N, L, E, device=device)  # (N, L, E)
heads = split_heads(x, H)  # (N, H, L, D)
back = merge_heads(heads)  # (N, L, E)
print(f"x      {tuple(x.shape)}  (N, L, E)")
print(f"heads  {tuple(heads.shape)}  (N, H, L, D) with D = {E} / {H} = {D}")
print(f"merged {tuple(back.shape)}  (N, L, E)")
print(f"head 3 holds features {3 * D} to {4 * D - 1} of every token")

# sphinx_gallery_start_ignore
assert torch.equal(back, x)
assert all(torch.equal(heads[:, h], x[..., h * D : (h + 1) * D]) for h in range(H))
# sphinx_gallery_end_ignore

# %%
# Splitting copies nothing: ``heads`` reads the very memory of ``x``, in a different
# order. A tensor is *contiguous* when its numbers lie in memory in the order its shape
# reads them, last axis fastest. Read in its shape's order (head, token, feature),
# ``heads`` jumps through ``x``'s memory: after token 0's 64 features of head 0 come
# token 1's, which start ``E`` numbers after token 0's. So it is not contiguous. Merging
# it back transposes it to ``x``'s order again, so ``reshape`` can return a view too.
# Attention's output, though, is computed head by head and laid out as ``(N, H, L, D)``
# in memory (like ``heads.contiguous()`` below); for such a tensor ``reshape`` has to
# copy.


def same_memory(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


head_by_head = heads.contiguous()  # (N, H, L, D), laid out head by head
print(
    f"heads shares x's memory: {same_memory(heads, x)}; contiguous: "
    f"{heads.is_contiguous()}"
)
print(f"merge_heads(heads) shares x's memory: {same_memory(back, x)}")
print(
    f"merge_heads(head_by_head) shares its input's memory: "
    f"{same_memory(merge_heads(head_by_head), head_by_head)}"
)
# sphinx_gallery_start_ignore
assert same_memory(heads, x) and not heads.is_contiguous() and same_memory(back, x)
assert not same_memory(merge_heads(head_by_head), head_by_head)
# sphinx_gallery_end_ignore

# %%
# A picture of the split
# ----------------------
#
# 512 features are too many to draw, so the picture uses one sentence of ``L = 4``
# tokens with ``E = 12`` features and ``H = 3`` heads of ``D = 4``. Each cell shows
# which feature of the original token it holds; its colour is the head the feature
# belongs to, and the shade gets darker from token 0 to token 3. Every panel is drawn
# from the tensor that ``view``, ``split_heads`` and ``merge_heads`` returned, not by
# hand.

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle

# sphinx_gallery_end_ignore

L_toy, E_toy, H_toy = 4, 12, 3
D_toy = E_toy // H_toy
# Cell value = token * E + feature, so every cell remembers where it came from.
# (1, L, E)
toy = torch.arange(L_toy * E_toy, dtype=torch.float32).view(1, L_toy, E_toy)
viewed = toy.view(1, L_toy, H_toy, D_toy)  # (1, L, H, D)
split = split_heads(toy, H_toy)  # (1, H, L, D)
merged = merge_heads(split)  # (1, L, E)
# sphinx_gallery_start_ignore
assert torch.equal(split.transpose(1, 2), viewed) and torch.equal(merged, toy)
# sphinx_gallery_end_ignore

# sphinx_gallery_start_ignore
# Okabe and Ito's blue, orange and purple: told apart with any colour vision
head_colours = [to_rgb(c) for c in ("#0072b2", "#e69f00", "#cc79a7")][:H_toy]


def draw_panel(ax, blocks, top, title, group_labels, row_labels):
    """Draw 2-D blocks side by side from row ``top`` down; each cell shows its feature
    index.
    """
    left = 0
    for g, block in enumerate(blocks.tolist()):
        if group_labels:
            ax.text(
                left + len(block[0]) / 2,
                top - 0.15,
                group_labels[g],
                ha="center",
                fontsize=10,
            )
        for r, row in enumerate(block):
            for c, value in enumerate(row):
                token, feature = divmod(int(value), E_toy)
                colour = [
                    ch * (1 - 0.18 * token) for ch in head_colours[feature // D_toy]
                ]
                ax.add_patch(
                    Rectangle((left + c, top + r), 1, 1, fc=colour, ec="white")
                )
                ax.text(
                    left + c + 0.5,
                    top + r + 0.5,
                    feature,
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=10,
                )
        left += len(block[0]) + 1
    for r, label in enumerate(row_labels):
        ax.text(-0.3, top + r + 0.5, label, ha="right", va="center", fontsize=10)
    ax.text(-4, top - 1.1, title, fontsize=11)


tokens = [f"token {i}" for i in range(L_toy)]
head_names = [f"head {h}" for h in range(H_toy)]
fig, ax = plt.subplots(figsize=(8, 8.6), layout="constrained")
draw_panel(
    ax, toy, 0, "1. x: (N, L, E), one sentence of 4 tokens x 12 features", None, tokens
)
draw_panel(
    ax,
    viewed[0],
    7,
    "2. x.view(N, L, H, D): each token read as 3 heads x 4 features",
    tokens,
    head_names,
)
draw_panel(
    ax,
    split[0],
    13,
    "3. .transpose(1, 2) -> (N, H, L, D): each head, all 4 tokens",
    head_names,
    tokens,
)
draw_panel(
    ax,
    merged,
    20,
    "4. merge_heads -> (N, L, E): every feature back in place",
    None,
    tokens,
)
ax.set_xlim(-4.2, 19.2)
ax.set_ylim(24.3, -2)
ax.set_aspect("equal")
ax.axis("off")
ax.set_title(
    "Splitting E = 12 features into H = 3 heads of D = 4\n"
    "(cell: index of the feature; colour: its head; darker: later token)"
)
plt.show()
# sphinx_gallery_end_ignore

# %%
# In panel 2 the memory is untouched, only read as ``(H, D)`` per token. In panel 3 each
# head's block holds its own 4 features of *every* token, the layout a batched matrix
# product needs: head 1 is a ``(4, 4)`` matrix of features 4 to 7 of tokens 0 to 3.
# ``split_heads`` is panels 1 to 3; ``merge_heads`` goes back from 3 to 4, which equals
# 1.
#
# The module
# ----------
#
# :class:`attention.MultiHeadAttention` projects the tokens to queries, keys and values
# with three ``(E, E)`` linear layers, splits each into heads, runs
# :func:`attention.scaled_dot_product_attention` on all heads at once (the head
# dimension is just one more batch dimension), merges the heads and applies the output
# projection:
#
# .. literalinclude:: ../../../attention/multi_head.py
#    :language: python
#    :pyobject: MultiHeadAttention.forward
#
# The projection step and the attention call are two small methods of their own, the
# ones :class:`attention.FusedMultiHeadAttention` overrides to pack the projections and
# to call PyTorch's fused kernel:
#
# .. literalinclude:: ../../../attention/multi_head.py
#    :language: python
#    :pyobject: MultiHeadAttention._project
#
# .. literalinclude:: ../../../attention/multi_head.py
#    :language: python
#    :pyobject: MultiHeadAttention._attend
#
# The batch of 4 sentences, 10 tokens and 512 dimensions, with 8 heads:

from attention import MultiHeadAttention

mha = MultiHeadAttention(E, H).to(device).eval()
out, weights = mha(x)
print(f"input   {tuple(x.shape)}  (N, L, E)")
print(f"output  {tuple(out.shape)}  (N, L, E)")
print(
    f"weights {tuple(weights.shape)}  (N, H, L, S): one (L, S) matrix per sentence and "
    "head"
)
# sphinx_gallery_start_ignore
assert out.shape == (4, 10, 512) and weights.shape == (4, 8, 10, 10)
assert torch.allclose(weights.sum(-1), torch.ones(N, H, L, device=device))
# sphinx_gallery_end_ignore

# %%
# Eight separate attentions
# -------------------------
#
# The splitting is only bookkeeping: the same result comes from eight independent
# attentions, head ``h`` using rows ``64 h`` to ``64 h + 63`` of each projection matrix,
# with the eight outputs concatenated and passed through ``out_proj``.

from attention import scaled_dot_product_attention


def project(linear, x, rows):
    """Rows ``rows`` of a linear layer: one head's slice of the projection."""
    # (N, L, E) @ (E, D) -> (N, L, D)
    return x @ linear.weight[rows].T + linear.bias[rows]


with torch.no_grad():
    head_outputs = []
    for h in range(H):
        rows = slice(h * D, (h + 1) * D)
        q, k, v = (project(p, x, rows) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
        o, w = scaled_dot_product_attention(q, k, v)  # (N, L, D), (N, L, L)
        # sphinx_gallery_start_ignore
        assert torch.allclose(w, weights[:, h], atol=1e-6)
        # sphinx_gallery_end_ignore
        head_outputs.append(o)
    concat = torch.cat(head_outputs, dim=-1)  # H x (N, L, D) -> (N, L, E)
    by_hand = mha.out_proj(concat)  # (N, L, E)
diff = (by_hand - out).abs().max().item()
print(f"largest difference between the module and 8 separate attentions: {diff:.1e}")
assert diff < 1e-5  # float32: the two orders of summation differ in the last bits only

# sphinx_gallery_start_ignore
# Attention's output is laid out head by head, as said above: merge_heads copies it.
with torch.no_grad():
    q_heads = split_heads(mha.q_proj(x), H)  # (N, H, L, D)
    # (N, H, L, D)
    attended = scaled_dot_product_attention(q_heads, q_heads, q_heads)[0]
assert attended.is_contiguous() and not same_memory(merge_heads(attended), attended)
# sphinx_gallery_end_ignore

# %%
# The output projection mixes the heads
# -------------------------------------
#
# After ``merge_heads`` the heads still sit side by side: features 0 to 63 come from
# head 0 only, and so on. ``out_proj`` is what lets every output feature read every
# head. To see it, change the output of head 3 alone and look at which features move,
# before and after the projection.

with torch.no_grad():
    nudged = concat.clone()
    nudged[..., 3 * D : 4 * D] += 1.0  # change head 3's output only
    before = (nudged - concat).abs()[0, 0]  # first token: (E,)
    after = (mha.out_proj(nudged) - mha.out_proj(concat)).abs()[0, 0]  # (E,)
moved_before = int((before > 0).sum())
moved_after = int((after > 0).sum())
print(f"features changed before out_proj: {moved_before} of {E}")
print(f"features changed after  out_proj: {moved_after} of {E}")
# sphinx_gallery_start_ignore
assert moved_before == D and moved_after == E
# sphinx_gallery_end_ignore

# sphinx_gallery_start_ignore
fig, axes = plt.subplots(2, 1, figsize=(8, 4), sharex=True, layout="constrained")
for ax, change, label in [
    (axes[0], before, "concatenated heads"),
    (axes[1], after, "after out_proj"),
]:
    ax.plot(change.cpu().numpy(), lw=0.8)
    for h in range(1, H):
        ax.axvline(h * D, color="grey", lw=0.5, ls=":")
    ax.set_ylabel("|change|")
    ax.set_title(label, fontsize=10)
axes[1].set_xlabel("feature (dotted lines: head boundaries, every 64 features)")
fig.suptitle("Changing head 3's output: which features of a token move")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Before the projection only head 3's band of 64 features moves; after it, all 512 do
# (the counts printed above). Without ``out_proj`` each output feature would come from
# one head.
#
# One head versus eight heads
# ---------------------------
#
# More heads cost no more parameters and no more multiply-adds in the matrix products:
# each head reads its own block of ``D`` rows of the three input projections, ``(E, E)``
# each, instead of the whole matrix; ``out_proj`` stays one ``(E, E)`` matrix applied to
# the glued heads; and computing the scores takes ``H * L * L * D = L * L * E``
# multiply-adds either way (so does ``weights @ V``). What grows with ``H`` is
# everything that works on the scores one by one: each head has its own ``(L, L)``
# matrix of scores, so the masking, the softmax and the weights tensor that comes back
# all handle ``H`` times as many numbers. The counts, printed by the code:


from attention.training import count_parameters as count

one = MultiHeadAttention(E, 1).to(device).eval()
eight = MultiHeadAttention(E, 8).to(device).eval()
print(f"1 head : {count(one):,} parameters")
print(
    f"8 heads: {count(eight):,} parameters  (4 matrices of {E}x{E} plus 4 biases of "
    f"{E})"
)
print(
    f"multiply-adds for the scores of one sentence: 1 head {1 * L * L * E:,}, "
    f"8 heads {8 * L * L * D:,}"
)
with torch.no_grad():
    weights_one, weights_eight = one(x)[1], eight(x)[1]  # (N, 1, L, L), (N, 8, L, L)
print(
    f"scores (softmax inputs) per sentence: 1 head {weights_one[0].numel():,}, "
    f"8 heads {weights_eight[0].numel():,}"
)
# sphinx_gallery_start_ignore
assert count(one) == count(eight) == 4 * E * E + 4 * E and L * L * E == 8 * L * L * D
assert weights_eight.numel() == 8 * weights_one.numel()
# sphinx_gallery_end_ignore

# %%
# The parameter tensors even have the same shapes, so the one-head module can load the
# eight-head module's weights. Then the only difference left is how the scores are
# computed. One head takes the dot product over all 512 dimensions and divides by
# :math:`\sqrt{512}`; each of eight heads takes it over its own 64 dimensions and
# divides by :math:`\sqrt{64}`. The one head's score is therefore :math:`\sqrt{H}` times
# the *average* of the eight heads' scores: it blends them before the softmax into a
# single distribution per query, where eight heads keep eight.

one.load_state_dict(eight.state_dict())
with torch.no_grad():
    # (N, 8, L, 64)
    q8, k8 = split_heads(eight.q_proj(x), 8), split_heads(eight.k_proj(x), 8)
    # (N, 1, L, 512)
    q1, k1 = split_heads(one.q_proj(x), 1), split_heads(one.k_proj(x), 1)
    # (N, 8, L, D) @ (N, 8, D, L) -> (N, 8, L, L)
    scores8 = q8 @ k8.transpose(-2, -1) / 64**0.5
    # (N, 1, L, E) @ (N, 1, E, L) -> (N, 1, L, L)
    scores1 = q1 @ k1.transpose(-2, -1) / 512**0.5
blend = 8**0.5 * scores8.mean(dim=1, keepdim=True)  # (N, 1, L, L)
print(
    f"one head's scores vs sqrt(8) x mean of 8 heads' scores: "
    f"largest difference {(scores1 - blend).abs().max().item():.1e}"
)
assert torch.allclose(scores1, blend, atol=1e-5)

# %%
# To see the difference, give both modules a sentence. The token vectors come from a
# random embedding table and the projections are untrained, so the patterns below are
# the random starting point that training would shape
# (:ref:`sphx_glr_tutorials_3_training_and_reading_10_classifier.py` trains heads).

sentence = "the cat sat on the mat because it was tired".split()
vocab = {word: i for i, word in enumerate(dict.fromkeys(sentence))}
embedding = torch.nn.Embedding(len(vocab), E, device=device)
ids = torch.tensor([[vocab[w] for w in sentence]], device=device)  # (1, L)
with torch.no_grad():
    tokens_in = embedding(ids)  # (1, L, E)
    _, w_one = one(tokens_in)  # (1, 1, L, L)
    _, w_eight = eight(tokens_in)  # (1, 8, L, L)

query = sentence.index("it")
favourite = [sentence[int(j)] for j in w_eight[0, :, query].argmax(-1)]
print(f"'it' attends most to, head by head: {favourite}")
print(f"different words among them: {len(set(favourite))}")
print(
    "'it' attends most to, with one head: "
    f"{sentence[int(w_one[0, 0, query].argmax())]!r}"
)
largest = max(w_one.max().item(), w_eight.max().item())
print(f"uniform weight 1/L = {1 / L:.2f}; largest weight in any panel: {largest:.2f}")
# Equal tokens get equal keys (no positions yet): the two "the" columns match in every
# panel.
assert torch.allclose(w_eight[..., 0], w_eight[..., 4])

# sphinx_gallery_start_ignore
from attention.repro import claim

claim(
    "untrained heads: different favourite words of 'it'", len(set(favourite)), above=1
)
claim("untrained heads: largest weight in any panel", largest, below=0.5)
# sphinx_gallery_end_ignore

# sphinx_gallery_start_ignore

# a grid of nine equal panels, every one with its tokens: the one head first, then the
# eight
fig, axes = plt.subplots(3, 3, figsize=(8, 9.4), layout="constrained")
vmax = largest
panels = [(w_one[0, 0], "one head (D = 512)")]
panels += [(w_eight[0, h], f"head {h} of 8 (D = 64)") for h in range(8)]
for ax, (panel, title) in zip(axes.flat, panels, strict=True):
    image = ax.imshow(panel.cpu().numpy(), vmin=0, vmax=vmax, cmap="viridis")
    ax.set_title(title, fontsize=10)
    ax.set_xticks(range(L), sentence, rotation=90, fontsize=9)
    ax.set_yticks(range(L), sentence, fontsize=9)
for ax in axes[-1]:
    ax.set_xlabel("key")
for ax in axes[:, 0]:
    ax.set_ylabel("query")
colorbar = fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
colorbar.ax.axhline(1 / L, color="white", lw=2)  # the uniform weight, marked
fig.suptitle(
    "Same parameters (untrained): one head with D = 512\nversus eight heads with D = 64"
    f" (uniform weight 1/L = {1 / L:.2f}, white on the colour bar)"
)
plt.show()

# sphinx_gallery_end_ignore

# %%
# Top left, the one head: one distribution per query. In the other eight panels, eight
# per query. The eight heads' favourite keys for "it" are not all the same word (the
# count printed above; more than one in every run of the project's sweep), but no
# weight comes near 1: the largest in any panel, printed above beside the uniform 1/L,
# stays below 0.5 in every run. The differences are random starting points, not
# patterns. The columns of the two "the" tokens are identical in every
# panel: equal tokens give equal keys, since nothing tells the model about positions
# yet.
#
# The number of heads must divide the embedding
# ---------------------------------------------
#
# ``D = E / H`` has to be a whole number. The module checks it before building anything:

import textwrap

try:
    MultiHeadAttention(512, 7)
except ValueError as error:
    print(textwrap.fill(f"ValueError: {error}", 88))
else:
    raise AssertionError("512 features cannot be split into 7 heads")

# %%
# What to remember
# ----------------
#
# - Multi-head attention splits ``E`` into ``H`` heads of ``D = E / H`` features:
#   ``split_heads`` is a ``view`` plus a ``transpose`` ``(N, L, E) -> (N, H, L, D)``
#   that copies nothing; ``merge_heads`` undoes it (copying only when its input is laid
#   out head by head).
# - Each head is a full attention over its own slice of the projections; the module is
#   exactly ``H`` separate attentions run as one batched product, then concatenated.
# - ``out_proj`` is what mixes the heads; without it each output feature would depend on
#   a single head.
# - Eight heads have the same parameters and the same multiply-adds in the products as
#   one head, but ``H`` times as many scores to mask and softmax, and ``H`` times as
#   many weights; a single head's score is :math:`\sqrt{H}` times the average of the
#   heads' scores, so it has one distribution per query where eight heads have eight.
# - The weights come back per head: ``(N, H, L, S)``.
#
# API used on this page: :class:`attention.MultiHeadAttention`,
# :func:`attention.scaled_dot_product_attention`, ``split_heads`` / ``merge_heads``
# from ``attention.multi_head``, and :func:`attention.repro.claim` (in the exercises).

# %%
# Exercises
# ---------
#
# 1. **Another split.** :math:`E = 96` with :math:`H = 12` heads on a batch of
#    :math:`N = 2` sequences of :math:`L = 5` tokens: what is :math:`D`, and what are
#    the shapes of the split queries, the output and the weights?
# 2. **Which head counts work?** For which :math:`H` from 1 to 16 does
#    ``MultiHeadAttention(512, H)`` build?
# 3. **Average before or after the softmax?** The one-head module's scores are
#    :math:`\sqrt{8}` times the mean of the eight heads' scores. Are its weights
#    ``w_one`` the mean of the eight heads' weights ``w_eight``? Predict, check on the
#    sentence, and check whether the mean of the eight heads' weights is still a set of
#    weights (rows that sum to 1).
#
# .. solution 1
#
# :math:`D = 96 / 12 = 8`; the weights have one :math:`(L, L)` matrix per sequence and
# head.

mha96 = MultiHeadAttention(96, 12).to(device)
x96 = torch.randn(2, 5, 96, device=device)  # (N, L, E)
out96, weights96 = mha96(x96)
q96 = split_heads(mha96.q_proj(x96), 12)  # (N, L, E) -> (N, H, L, D)
print("D =", 96 // 12, " queries", tuple(q96.shape))
print("output", tuple(out96.shape), " weights", tuple(weights96.shape))
assert q96.shape == (2, 12, 5, 8)
assert out96.shape == (2, 5, 96) and weights96.shape == (2, 12, 5, 5)

# %%
# .. solution 2
#
# The divisors of 512: the powers of two.

works = []
for h in range(1, 17):
    try:
        MultiHeadAttention(512, h)
    except ValueError:
        continue
    works.append(h)
print("head counts that build:", works)
assert works == [1, 2, 4, 8, 16]

# %%
# .. solution 3
#
# No: the softmax of a (scaled) mean of scores is not the mean of the softmaxes. The
# mean of the eight heads' weights is a set of weights (every row still sums to 1), but
# no head computed it: it is what ``nn.MultiheadAttention`` returns by default
# (``average_attn_weights=True``), a summary of the heads, not one of them.

from attention.repro import claim

mean_of_heads = w_eight.mean(dim=1, keepdim=True)  # (1, 1, L, L)
gap = (w_one - mean_of_heads).abs().max().item()
print(f"largest |one head's weight - mean of 8 heads' weights|: {gap:.3f}")
# every row of the mean sums to 1, as the weights of a single head do
rows_sum_to_1 = torch.allclose(mean_of_heads.sum(-1), w_one.new_ones(1, 1, L))
print(f"every row of the mean sums to 1: {rows_sum_to_1}")
claim("one head's weights vs the mean of the eight heads' weights", gap, above=0.02)
assert rows_sum_to_1

# %%
# Next: :ref:`sphx_glr_tutorials_1_foundations_05_masks.py` decides which token may look
# at which.

# sphinx_gallery_thumbnail_number = 1
