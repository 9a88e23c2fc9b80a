r"""
Single-head self-attention
==========================

.. prerequisites:: 02_scaled_dot_product
   :summary: Self-attention's three projections read line by line, then set by hand so
      that a short sentence's weights can be checked by eye.

In *self*-attention the queries, the keys and the values all come from the same
sequence: every token looks at every token of its own sentence, itself included. Each
token's vector is turned into a query, a key and a value by three learned linear maps,
and scaled dot-product attention does the rest.

This page reads the package's :class:`attention.SelfAttention` line by line with the
shape of every tensor, then sets its three projections by hand on a tiny made-up
embedding, so that the attention weights of a short sentence mean something you can
check by eye.
"""

# %%
# The module
# ----------
#
# :class:`attention.SelfAttention` holds three ``nn.Linear`` layers of size
# :math:`E \to E`, one per role, without biases unless ``bias=True`` is asked for:
#
# .. literalinclude:: ../../../attention/single_head.py
#    :language: python
#    :pyobject: SelfAttention.__init__
#
# Its forward pass projects the same ``x`` three times, then calls the
# :func:`attention.scaled_dot_product_attention` of the previous page:
#
# .. literalinclude:: ../../../attention/single_head.py
#    :language: python
#    :pyobject: SelfAttention.forward
#
# Line by line:
#
# - ``check_features`` and ``check_mask`` refuse bad input before any arithmetic: ``x``
#   must be a float tensor :math:`(N, L, E)` with the module's :math:`E`, dtype and
#   device, and an optional mask must be bool and broadcast to :math:`(N, 1, L, L)`.
#   The 1 is the head axis that ``q[:, None]`` inserts below: a mask built for
#   multi-head attention's :math:`(N, H, L, S)` that is the same for every head has 1
#   there (the padding mask is :math:`(N, 1, 1, S)`), so it serves one head unchanged,
#   by broadcasting (masks are the subject of
#   :ref:`sphx_glr_tutorials_1_foundations_05_masks.py`).
# - ``q``, ``k`` and ``v`` are three projections of the same ``x``, each
#   :math:`(N, L, E)`.
# - ``q[:, None]`` inserts a *head* axis of size 1, :math:`(N, 1, L, E)`, where such a
#   mask expects it; :func:`attention.scaled_dot_product_attention` treats everything
#   before the last two axes as batch, so the axis rides along, and the result comes
#   back as :math:`(N, 1, L, E)` and weights :math:`(N, 1, L, L)`. The next page puts
#   several heads on that axis.
# - ``out[:, 0]`` and ``weights[:, 0]`` remove the head axis again.
#
# With :math:`X` the :math:`(L, E)` matrix of one sentence's token vectors, that is
#
# .. math::
#
#    Q = X W_Q^\top,\quad K = X W_K^\top,\quad V = X W_V^\top,\qquad
#    \text{out} = \text{softmax}\left(\frac{Q K^\top}{\sqrt{E}}\right) V.
#
# A sentence and its embedding
# ----------------------------
#
# A model first turns each word into a vector with an embedding table. Real embeddings
# are learned and have hundreds of entries; this one is made by hand with :math:`E = 5`
# entries, each a yes/no feature a reader can name: is the word an animal, a food, an
# action, a word that describes animals, a word that describes food? "and" has none of
# them.

import torch

from attention.repro import claim, default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0

words = ["hungry", "cats", "and", "dogs", "eat", "fresh", "fish"]
FEATURES = ["animal", "food", "action", "describes animals", "describes food"]
word_features = {
    "hungry": ["describes animals"],
    "cats": ["animal"],
    "and": [],
    "dogs": ["animal"],
    "eat": ["action"],
    "fresh": ["describes food"],
    "fish": ["food"],
}
table = torch.zeros(len(words), len(FEATURES), device=device)  # (vocabulary, E)
for i, word in enumerate(words):
    for feature in word_features[word]:
        table[i, FEATURES.index(feature)] = 1.0
embedding = torch.nn.Embedding.from_pretrained(table)

# (N, L) = (1, 7): one sentence
token_ids = torch.arange(len(words), device=device)[None]
x = embedding(token_ids)  # (N, L, E)
N, L, E = x.shape
print(f"N = {N} sentence, L = {L} tokens, E = {E} features;  x: {tuple(x.shape)}")

# %%
# :func:`attention.plot_matrix` draws a small labelled table, used for the embedding
# here and for the other tables on this page.

import matplotlib.pyplot as plt

from attention import plot_matrix

fig, ax = plt.subplots(figsize=(4.4, 4.4), layout="constrained")
title = "The embedding: one row per word"
plot_matrix(x[0], x_labels=FEATURES, y_labels=words, ax=ax, title=title)
ax.set_xlabel("feature (embedding entry)")
ax.set_ylabel("word")
plt.show()

# %%
# Line by line, with the shapes
# -----------------------------
#
# A freshly made :class:`attention.SelfAttention` has random projections. Run it, then
# redo its forward pass by hand, one line at a time:

import math

import attention

head = attention.SelfAttention(E).to(device)
out, weights = head(x)

q = head.q_proj(x)  # (N, L, E): what each token looks for
k = head.k_proj(x)  # (N, L, E): what each token offers to be found by
v = head.v_proj(x)  # (N, L, E): what each token passes on
scores = q @ k.transpose(-2, -1) / math.sqrt(E)  # (N, L, E) @ (N, E, L) -> (N, L, L)
by_hand_weights = scores.softmax(dim=-1)  # (N, L, L)
by_hand_out = by_hand_weights @ v  # (N, L, L) @ (N, L, E) -> (N, L, E)

for name, tensor in [
    ("x", x),
    ("q", q),
    ("k", k),
    ("v", v),
    ("scores", scores),
    ("weights", by_hand_weights),
    ("out", by_hand_out),
]:
    print(f"{name:>8}: {tuple(tensor.shape)}")
torch.testing.assert_close(by_hand_weights, weights)
torch.testing.assert_close(by_hand_out, out)
print("the module gives the same weights and output as the lines above")

# %%
# Two things to see in the shapes:
#
# - ``q``, ``k`` and ``v`` are all made from the same ``x``: that is what makes it
#   *self* attention. So there are as many keys as queries, and the weights are square,
#   :math:`(N, L, L)`: one row per token asking, one column per token answering.
# - The output has the shape of the input, :math:`(N, L, E)`: each token's vector is
#   replaced by a blend of the value vectors of the tokens it attends to. That is what
#   lets Transformer layers be stacked.
#
# Here are the weights of the random head, drawn with :func:`attention.plot_attention`,
# words on both axes (queries down the side, keys along the bottom), on a colour scale
# from 0 to 1:

fig, ax = plt.subplots(figsize=(5, 4.2), layout="constrained")
attention.plot_attention(weights[0], x_tokens=words, ax=ax, title="A random head")
ax.images[0].set_clim(0.0, 1.0)
plt.show()
print(
    f"weights between {weights.min():.3f} and {weights.max():.3f}; uniform would be "
    f"{1 / L:.3f}; largest |weight - 1/L| {(weights - 1 / L).abs().max():.3f}"
)

# %%
# Every word spreads its attention almost evenly over the whole sentence, with small
# differences that mean nothing: the freshly initialised projections are small and
# random, so the scores are small and random too, and the softmax of small scores is
# close to uniform. The projections are random, so the page states this as a claim
# with a margin (:func:`attention.repro.claim`, explained on the previous page): no
# weight is further than 0.05 from the uniform :math:`1/L`. It holds in the 30 runs of
# the project's sweep (seeds 0 to 9 on three CPU kernels), where the largest distance
# seen was about 0.03; this run's is the last number printed above.

claim("random head, largest |weight - 1/L|", (weights - 1 / L).abs().max(), below=0.05)

# %%
# Training would shape the weights; here we shape them by hand instead.
#
# Setting the projections by hand
# -------------------------------
#
# Give the head one job: connect each word to the words it goes with. Decide what each
# part should mean:
#
# - the **key** of a word says what the word *is*: the key projection copies the
#   features (:math:`W_K = I`);
# - the **query** of a word says what it *looks for*: a word that describes animals
#   looks for an animal, one that describes food looks for a food, an action looks for
#   animals and food (who eats what), and animals and foods look for an action;
# - the **value** passes the word's own features on (:math:`W_V = I`).
#
# ``nn.Linear`` computes ``x @ weight.T``, so ``weight[i, j]`` is how much input feature
# ``j`` puts into output entry ``i``. The query weight therefore reads as a table: row
# "what is looked for", column "what the word is". A strength of 6 makes the matches
# stand out after the division by :math:`\sqrt{E}`.

looks_for = {
    "describes animals": ["animal"],
    "describes food": ["food"],
    "action": ["animal", "food"],
    "animal": ["action"],
    "food": ["action"],
}
strength = 6.0
W_Q = torch.zeros(E, E, device=device)  # (E out, E in)
for has, wanted in looks_for.items():
    for feature in wanted:
        W_Q[FEATURES.index(feature), FEATURES.index(has)] = strength

with torch.no_grad():
    head.q_proj.weight.copy_(W_Q)
    head.k_proj.weight.copy_(torch.eye(E))
    head.v_proj.weight.copy_(torch.eye(E))

fig, ax = plt.subplots(figsize=(5.2, 4.4), layout="constrained")
plot_matrix(
    W_Q,
    x_labels=FEATURES,
    y_labels=FEATURES,
    ax=ax,
    title="The query projection W_Q",
    cmap="Purples",
)
ax.set_xlabel("feature the word has (input)")
ax.set_ylabel("feature the query looks for (output)")
plt.show()

# %%
# Read a column: a word with the feature at the bottom of that column makes a query for
# the features in the column's coloured cells. The "action" column has two: a verb looks
# for both its subject and its object.
#
# What the head does with a sentence
# ----------------------------------

out, weights = head(x)  # (N, L, E), (N, L, L)
fig, ax = plt.subplots(figsize=(5, 4.2), layout="constrained")
attention.plot_attention(weights[0], x_tokens=words, ax=ax, title="A hand-set head")
ax.images[0].set_clim(0.0, 1.0)
plt.show()

for word, row in zip(words, weights[0], strict=True):
    strong = [(words[j], w) for j, w in enumerate(row.tolist()) if w > 1.5 / L]
    rest = 1 - sum(w for _, w in strong)
    if strong:
        found = ", ".join(f"{other} {w:.2f}" for other, w in strong)
        print(
            f"{word:>7} -> {found}  (the other {L - len(strong)} words share "
            f"{rest:.2f})"
        )
    else:
        print(f"{word:>7} -> no word stands out: each gets {row.max():.2f}")

# sphinx_gallery_start_ignore
w0 = weights[0]
index = {word: i for i, word in enumerate(words)}


def most_attended(word, n):
    return {words[j] for j in w0[index[word]].topk(n).indices.tolist()}


assert most_attended("hungry", 2) == {"cats", "dogs"}
assert most_attended("fresh", 1) == {"fish"}
assert most_attended("eat", 3) == {"cats", "dogs", "fish"}
for noun in ("cats", "dogs", "fish"):
    assert most_attended(noun, 1) == {"eat"}
assert torch.allclose(w0[index["and"]], torch.full((L,), 1 / L, device=device))
assert torch.allclose(
    w0[index["hungry"], index["cats"]], w0[index["hungry"], index["dogs"]]
)
# sphinx_gallery_end_ignore

# %%
# Read the heatmap row by row (a row is one word asking; the printed lines list the
# words that get more than one and a half times an equal share of its attention):
#
# - "hungry" splits most of its attention between "cats" and "dogs", the two animals,
#   and "fresh" puts most of its weight on "fish";
# - "eat" looks at "cats", "dogs" and "fish" in equal parts: who eats, and what;
# - "cats", "dogs" and "fish" each look at "eat";
# - "and" has no features, so its query is zero, every score in its row is 0, and the
#   softmax of equal scores is uniform: its row is flat.
#
# The head has no way to know that "hungry" sits next to "cats": the weights depend on
# what the words are, not on where they are. (The last section checks this.)


# %%
# What comes out
# --------------
#
# With :math:`W_V = I`, the values are the embeddings, so each word's output is the
# weighted average of the feature vectors of the words it attended to. Before and after:

fig, axes = plt.subplots(1, 2, figsize=(7.4, 4.6), layout="constrained")
labels = {"x_labels": FEATURES, "y_labels": words, "vmax": 1.0}
plot_matrix(x[0], ax=axes[0], title="Input x (the embedding)", **labels)
plot_matrix(out[0], ax=axes[1], title="Output of the head", cmap="Greens", **labels)
for ax in axes:
    ax.set_xlabel("feature")
axes[0].set_ylabel("word")
fig.suptitle("Each word's vector becomes a blend of the words it looks at")
plt.show()

eat_out = out[0, words.index("eat")]  # (E,)
print(
    '"eat" after attention:',
    {f: round(value, 2) for f, value in zip(FEATURES, eat_out.tolist(), strict=True)},
)

# sphinx_gallery_start_ignore
assert torch.isclose(
    eat_out[FEATURES.index("animal")], 2 * eat_out[FEATURES.index("food")]
)
assert eat_out[FEATURES.index("animal")] > eat_out[FEATURES.index("food")] > 0.2
assert eat_out[FEATURES.index("action")] < 0.05
# sphinx_gallery_end_ignore

# %%
# Each output row now carries what its word found, not what it was: the output of "eat"
# holds "animal" and "food" (twice as much "animal", since it found two animals, as the
# printed values show) and almost none of its own "action". In a real model the value
# projection is learned too, and a residual connection adds the input back
# (:ref:`sphx_glr_tutorials_2_building_and_checking_07_transformer_block.py`), so a
# word keeps its own meaning and gains its context.
#
# Self-attention does not see word order
# --------------------------------------
#
# Shuffle the words and run the same head: every weight moves with its pair of words,
# and nothing else changes.

perm = torch.tensor([4, 6, 0, 2, 5, 1, 3], device=device)  # a new order of the 7 words
shuffled_out, shuffled_weights = head(x[:, perm])  # (N, L, E), (N, L, L)
print("shuffled sentence:", " ".join(words[i] for i in perm.tolist()))
same = torch.allclose(shuffled_weights, weights[:, perm][:, :, perm])
print("weights of the shuffled sentence == shuffled weights:", same)
assert same
assert torch.allclose(shuffled_out, out[:, perm])

# %%
# That is why a Transformer must be told where each token is. The original one adds a
# vector that encodes the position to each token's embedding before the first layer
# (:class:`attention.PositionalEncoding`, used in
# :ref:`sphx_glr_tutorials_3_training_and_reading_10_classifier.py`); later models
# rotate the queries and keys by their position, or add a penalty for distance to the
# scores (:ref:`sphx_glr_tutorials_4_generation_14_positions.py` compares them).
#
# What to remember
# ----------------
#
# - Self-attention makes the queries, keys and values from one sequence, with three
#   linear maps :math:`E \to E`; its weights are square, :math:`(N, L, L)`, and its
#   output has the input's shape :math:`(N, L, E)`.
# - The query says what a token looks for, the key what it is, the value what it passes
#   on; training sets those meanings, and here we set them by hand.
# - Each output vector is a blend of value vectors, so a token's new vector carries what
#   it found in the sequence.
# - Without positions, self-attention treats a sentence as a set of words: shuffle the
#   input, and the output is shuffled the same way. Positions have to be given to it.
#
# Used on this page: :class:`attention.SelfAttention`,
# :func:`attention.scaled_dot_product_attention`, :func:`attention.plot_attention`,
# :func:`attention.plot_matrix`, :class:`attention.PositionalEncoding` and
# :func:`attention.repro.claim`.

# %%
# Exercises
# ---------
#
# 1. **Count the parameters.** How many numbers does :class:`attention.SelfAttention`
#    learn for :math:`E = 5`, and for :math:`E = 512`? Work it out, then count them.
# 2. **A sentence of one word.** Run the hand-set head on "eat" alone. Before running
#    it, say what the weights and the output are.
# 3. **Silence a feature.** Set to zero the column of :math:`W_Q` for the feature
#    "describes food". What happens to the row of "fresh"?
#
# .. solution 1
#
# Three :math:`E \times E` projections without bias: :math:`3E^2`.

for size in (E, 512):
    learned = sum(p.numel() for p in attention.SelfAttention(size).parameters())
    print(f"E = {size}: {learned:,} parameters")
    assert learned == 3 * size * size

# %%
# .. solution 2
#
# With one key, its weight is 1, so the output is that word's value: with
# :math:`W_V = I`, its own embedding.

alone = x[:, [words.index("eat")]]  # (N, 1, E)
out_alone, weights_alone = head(alone)  # (N, 1, E), (N, 1, 1)
print("weights:", weights_alone.tolist(), " output:", out_alone[0, 0].tolist())
assert weights_alone.tolist() == [[[1.0]]]
torch.testing.assert_close(out_alone, alone)

# %%
# .. solution 3
#
# "fresh" has no other feature, so its query becomes zero: every score in its row is
# 0 and the row is uniform, like the row of "and". The other rows keep their pattern.

import copy

muted = copy.deepcopy(head)
with torch.no_grad():
    muted.q_proj.weight[:, FEATURES.index("describes food")] = 0.0
_, muted_weights = muted(x)  # (N, L, L)
fresh = words.index("fresh")
print('"fresh" now:', [round(w, 3) for w in muted_weights[0, fresh].tolist()])
torch.testing.assert_close(
    muted_weights[0, fresh], torch.full((L,), 1 / L, device=device)
)
others = [i for i in range(L) if i != fresh]
torch.testing.assert_close(muted_weights[0, others], weights[0, others])

# %%
# Next: :ref:`sphx_glr_tutorials_1_foundations_04_multi_head.py` runs several heads side
# by side, each with its own queries, keys and values.

# sphinx_gallery_thumbnail_number = 4
