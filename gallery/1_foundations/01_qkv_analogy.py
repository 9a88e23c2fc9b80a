"""
Queries, keys and values: attention as a soft lookup
====================================================

.. prerequisites::
   :summary: Attention as a soft lookup: a query scored against keys, a softmax into
      weights, and a weighted blend of the values.
   :assumes: a PyTorch tensor and a matrix product

Attention is a way of looking things up. You give it a *query*; it compares the query
with a set of *keys*; and it returns the *values* that belong to the keys that match
best. A search engine does the same: the query is what you type, the keys are the titles
of the pages, and the values are the contents of the pages. What attention adds is one
small change: instead of returning the single best page, it returns a blend of all of
them, weighted by how well each one matched. That blend is the attention that
:cite:t:`bahdanau2015` introduced for translation. They scored each match with a small
learned network (*additive* attention); this page scores it with a dot product, as the
Transformer of :cite:t:`vaswani2017` does, which then divides the scores by a constant.

This page builds that picture with a toy search engine over five pages, then works
through attention on three tokens with every intermediate number printed and drawn,
small enough to check with pen and paper. It is the first page of the site. No model is
trained, and every result on the page was computed by the code above it when the site
was built.
"""

# %%
# Setup
# -----
#
# Nearly every page of the site opens with these two lines (one that runs only on the
# CPU keeps the second alone), from :mod:`attention.repro`, the package's module for
# reproducible examples.
# :func:`~attention.repro.default_device` picks the device the page runs on: the one
# named by the environment variable ``ATTENTION_DEVICE`` when it is set, else a GPU when
# there is one, else the CPU. :func:`~attention.repro.seed_everything` seeds the random
# number generators of Python, NumPy and PyTorch from ``ATTENTION_SEED`` (0 when it is
# not set), so that a page draws the same random numbers every time it runs, and
# ``ATTENTION_SEED=3 python 02_scaled_dot_product.py`` reruns the next page with other
# ones. This page draws none.

import torch

from attention.repro import default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0

# %%
# A toy search engine
# -------------------
#
# Five pages, each with a title. To compare a query with a title we turn both into
# vectors in the simplest way there is: count how often each of five topic words appears
# in the text. The title vectors are the **keys**.

TOPICS = ["cat", "dog", "food", "health", "toys"]


def embed(text):
    """Count each topic word in ``text``: a vector of len(TOPICS) numbers."""
    words = text.lower().split()
    return torch.tensor([float(words.count(topic)) for topic in TOPICS], device=device)


titles = [
    "cat food reviews",
    "dog food reviews",
    "cat health tips",
    "dog health tips",
    "cat toys",
]
keys = torch.stack([embed(title) for title in titles])  # (5 pages, 5 topics)
print("topics:", TOPICS)
for title, key in zip(titles, keys, strict=True):
    print(f"{title:>18}: {key.tolist()}")

# %%
# You type a query; it goes through the same ``embed``. How well it matches each title
# is the **dot product** of the two vectors: for each topic word, its count in the query
# times its count in the title, added up. No text here repeats a topic word, so every
# count is 0 or 1 and the score is the number of topic words the two have in common.

query = embed("food for my cat")
scores = keys @ query  # (5, 5) @ (5,) -> (5,)
for title, score in zip(titles, scores, strict=True):
    print(f"{title:>18}: score {score:.0f}")

# %%
# Hard lookup and soft lookup
# ---------------------------
#
# A search engine (or a Python ``dict``) does a **hard lookup**: it picks the best
# match, ``argmax``, and returns that one page. Attention does a **soft lookup**: the
# ``softmax`` turns the scores into positive weights that sum to 1, with the best match
# getting the largest share,
#
# .. math::
#
#    w_i = \frac{e^{s_i}}{\sum_j e^{s_j}},
#
# and every page contributes to the answer in proportion to its weight.

hard = torch.zeros_like(scores)
hard[scores.argmax()] = 1.0  # all the weight on the best match
soft = scores.softmax(dim=0)  # a share for every page

for title, h, s in zip(titles, hard, soft, strict=True):
    print(f"{title:>18}: hard {h:.0f}   soft {s:.3f}")
print(f"the soft weights sum to {soft.sum():.3f}")

# sphinx_gallery_start_ignore
assert titles[scores.argmax()] == "cat food reviews"
assert torch.isclose(soft.sum(), torch.tensor(1.0, device=device))
assert soft.argmax() == scores.argmax()
# sphinx_gallery_end_ignore

# %%
# A query can also match several pages equally well. Searching for just "cat" gives the
# three cat pages the same score. ``argmax`` has to pick one of them, and it picks the
# first; the soft lookup gives the three the same weight instead, the largest in the
# soft column, and keeps a smaller share for each dog page, which matches nothing.

query_cat = embed("cat")
scores_cat = keys @ query_cat  # (5,)
hard_cat = torch.zeros_like(scores_cat)
hard_cat[scores_cat.argmax()] = 1.0
soft_cat = scores_cat.softmax(dim=0)
for title, s, h, w in zip(titles, scores_cat, hard_cat, soft_cat, strict=True):
    print(f"{title:>18}: score {s:.0f}   hard {h:.0f}   soft {w:.3f}")

# sphinx_gallery_start_ignore
cat_pages = [i for i, title in enumerate(titles) if "cat" in title.split()]
assert hard_cat[cat_pages].tolist() == [1.0, 0.0, 0.0]
assert torch.allclose(
    soft_cat[cat_pages], soft_cat[cat_pages[0]].expand(len(cat_pages))
)
dog_pages = [i for i, title in enumerate(titles) if "dog" in title.split()]
assert (0 < soft_cat[dog_pages]).all() and (soft_cat[dog_pages] < soft_cat[0]).all()
# sphinx_gallery_end_ignore

# %%
# Side by side, for both queries:

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 2, figsize=(8, 3.8), sharey=True, layout="constrained")
positions = torch.arange(len(titles)).numpy()
for ax, typed, h, s in zip(
    axes, ["food for my cat", "cat"], [hard, hard_cat], [soft, soft_cat], strict=True
):
    ax.bar(positions - 0.2, h.cpu(), width=0.4, label="hard (argmax)", color="tab:gray")
    ax.bar(
        positions + 0.2, s.cpu(), width=0.4, label="soft (softmax)", color="tab:orange"
    )
    ax.set_xticks(positions, titles, rotation=30, ha="right")
    ax.set_title(f'query: "{typed}"')
    ax.set_xlabel("page (key)")
axes[0].set_ylabel("weight given to the page")
axes[0].legend()
fig.suptitle("Hard lookup takes one page; soft lookup gives every page a share")
plt.show()
# sphinx_gallery_end_ignore

# %%
# The grey bars are all or nothing; the orange bars always add up to 1, and they follow
# the scores: the better the title matches, the taller the bar. With the tie on the
# right, the hard lookup's choice of "cat food reviews" is an accident of the page
# order.
#
# What comes back: the values
# ---------------------------
#
# Now the **values**, the contents of the pages. In a real model they are long vectors
# computed from the tokens by a learned projection; here each page's content is summed
# up by two made-up numbers, so that it can be drawn as a point. The hard lookup returns
# the value of the best page. The soft lookup returns the weighted average of all the
# values, each weighted by its page's softmax weight.

values = torch.tensor(
    [[1.0, 1.0], [4.0, 1.2], [1.4, 3.6], [4.2, 3.8], [2.2, 4.6]], device=device
)  # (5 pages, 2)

hard_answer = hard @ values  # (5,) @ (5, 2) -> (2,): one page's value
soft_answer = soft @ values  # (5,) @ (5, 2) -> (2,): a blend of all five
print("hard answer:", hard_answer.tolist())
print("soft answer:", [round(x, 3) for x in soft_answer.tolist()])

# sphinx_gallery_start_ignore
assert torch.equal(hard_answer, values[0])
assert torch.allclose(soft_answer, (soft[:, None] * values).sum(0))
# sphinx_gallery_end_ignore

# %%

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
v, star = values.cpu(), soft_answer.cpu()
for i, title in enumerate(titles):
    ax.plot(
        [star[0], v[i, 0]],
        [star[1], v[i, 1]],
        color="tab:orange",
        lw=12 * soft[i].item(),
    )
    ax.annotate(
        title, v[i].tolist(), textcoords="offset points", xytext=(0, -24), ha="center"
    )
ax.scatter(
    v[:, 0],
    v[:, 1],
    s=2000 * soft.cpu() + 20,
    alpha=0.6,
    label="values (area = weight)",
)
ax.scatter(
    *hard_answer.cpu(),
    marker="s",
    s=160,
    fc="none",
    ec="black",
    lw=2,
    label="hard answer",
)
ax.scatter(*star, marker="*", s=400, color="tab:red", zorder=3, label="soft answer")
ax.set(
    xlim=(0, 5.2),
    ylim=(0, 5.6),
    xlabel="value, first number",
    ylabel="value, second number",
)
ax.set_title('Query "food for my cat": the soft answer blends the values')
ax.legend(loc="upper left", fontsize="small", markerscale=0.5)
plt.show()
# sphinx_gallery_end_ignore

# %%
# The hard answer sits exactly on one page. The soft answer (the red star) lies between
# the pages, pulled hardest towards the page with the largest weight (the biggest blue
# disc, the widest line: each line's width is its page's weight), and a little towards
# each of the others.
#
# From soft to hard: how sharp the scores are
# -------------------------------------------
#
# The two lookups are not as different as they look. Multiply the scores by a growing
# factor and the softmax puts more and more of the weight on the best page; in the limit
# it *is* the argmax when one page has the best score alone, and pages that tie for the
# best share the weight equally. With the scores shrunk towards zero, every page gets
# the same share.

sharpness = torch.logspace(-1, 1.5, 60, device=device)  # 0.1 ... 31.6
# (60, 1) * (5,) -> (60, 5)
weights_by_sharpness = (sharpness[:, None] * scores).softmax(dim=-1)

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
for score in scores.unique(sorted=True).flip(0):
    pages = [title for title, s in zip(titles, scores, strict=True) if s == score]
    # pages with equal scores have equal weights: one line each
    i = titles.index(pages[0])
    label = f"score {score:.0f}: " + ", ".join(pages)
    ax.plot(sharpness.cpu(), weights_by_sharpness[:, i].cpu(), label=label)
ax.set_xscale("log")
ax.set_xlabel("factor multiplying the scores")
ax.set_ylabel("softmax weight of each page")
ax.set_title('Query "food for my cat": sharper scores, harder lookup')
ax.legend(fontsize="small")
plt.show()
# sphinx_gallery_end_ignore

for row in (0, -1):
    rounded = [round(w, 3) for w in weights_by_sharpness[row].tolist()]
    print(f"factor {sharpness[row]:.1f}: weights {rounded}")

# sphinx_gallery_start_ignore
assert (weights_by_sharpness[0] - 0.2).abs().max() < 0.03  # nearly uniform
assert weights_by_sharpness[-1, 0] > 0.99  # nearly the hard lookup
# sphinx_gallery_end_ignore

# %%
# Pages with the same score always get the same weight, so the five pages make three
# lines. On the left the weights are all close to 1/5; on the right the best page's
# weight climbs to 1 and the others fall to 0. How sharp the scores are decides how
# "hard" attention is, and
# :ref:`sphx_glr_tutorials_1_foundations_02_scaled_dot_product.py` shows why attention
# divides its scores by a constant to keep them from getting too sharp.
#
# Why soft? Because it can learn
# ------------------------------
#
# A model learns by following gradients: it nudges its numbers in the direction that
# improves the answer. The soft answer changes smoothly when the query changes, so it
# has a gradient with respect to the query. The hard answer jumps from one page to
# another and is flat in between; PyTorch does not even record a path from the query to
# it.

query_param = query.clone().requires_grad_()
soft_out = (keys @ query_param).softmax(dim=0) @ values  # (2,)
hard_out = values[(keys @ query_param).argmax()]  # (2,)
soft_out.sum().backward()
print(
    "gradient of the soft answer w.r.t. the query:",
    [round(g, 3) for g in query_param.grad.tolist()],
)
print(
    "does the hard answer depend differentiably on the query?", hard_out.requires_grad
)

# sphinx_gallery_start_ignore
assert query_param.grad.abs().sum() > 0
assert not hard_out.requires_grad
# sphinx_gallery_end_ignore

# %%
# Attention over a sequence: every token asks, and every token answers
# --------------------------------------------------------------------
#
# Inside a model, the "pages" are the tokens of the text itself. Each token plays all
# three parts at once: it has a **query** (what it is looking for), a **key** (what it
# can be found by) and a **value** (what it passes on when it is found). With :math:`L`
# tokens and vectors of size :math:`E`, stacking them row by row gives three matrices
# :math:`Q`, :math:`K` and :math:`V`, each :math:`L \times E`. The lookup of every query
# at once is then
#
# .. math::
#
#    \text{Attention}(Q, K, V) = \text{softmax}\left(\frac{Q K^\top}{\sqrt{E}}\right) V,
#
# where the softmax acts on each row. Here is a worked example with :math:`L = 3` tokens
# and :math:`E = 4`, small enough to check by hand. The numbers are picked by hand too;
# the next pages show how a model makes them from the tokens.

tokens = ["the", "cat", "sat"]
Q = torch.tensor([[1.0, 0, 1, 0], [0, 2, 0, 0], [1, 1, 1, 1]], device=device)  # (L, E)
K = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 1], [2, 0, 0, 0]], device=device)  # (L, E)
V = torch.tensor([[1.0, 0, 0, 2], [0, 1, 0, 2], [0, 0, 1, 2]], device=device)  # (L, E)
L, E = Q.shape
for name, matrix in (("Q", Q), ("K", K), ("V", V)):
    print(f"{name} =\n{matrix}")

# %%
# The values were chosen so that the answer is easy to read: the first three numbers of
# each value mark which token it came from, and the last number is 2 for every token.

# sphinx_gallery_start_ignore
from attention import plot_matrix

features = [f"e{j}" for j in range(E)]
fig, axes = plt.subplots(1, 3, figsize=(8, 2.8), layout="constrained")
names = ["Q: queries", "K: keys", "V: values"]
for ax, matrix, name in zip(axes, [Q, K, V], names, strict=True):
    plot_matrix(matrix, x_labels=features, y_labels=tokens, ax=ax, title=name)
    ax.set_xlabel("vector entry")
axes[0].set_ylabel("token")
fig.suptitle("The inputs: one row per token, E = 4 numbers each")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Step 1: scores. Entry :math:`(i, j)` of :math:`QK^\top` is the dot product of token
# :math:`i`'s query with token :math:`j`'s key: how well ``j`` matches what ``i`` looks
# for.

scores = Q @ K.T  # (L, E) @ (E, L) -> (L, L)
print(scores)
q, k = Q[0].tolist(), K[0].tolist()
terms = " + ".join(f"{a:g}*{b:g}" for a, b in zip(q, k, strict=True))
print(
    f'for example, query "{tokens[0]}" . key "{tokens[0]}" = {terms} = {scores[0, 0]:g}'
)

# %%
# Step 2: scale. Divide every score by :math:`\sqrt{E}`, here the number printed below.

import math

print("sqrt(E) =", math.sqrt(E))
scaled = scores / math.sqrt(E)  # (L, L)
print(scaled)

# %%
# Step 3: softmax, row by row. Each row becomes a set of weights that sum to 1: how much
# of its attention each query token gives to each key token.

weights = scaled.softmax(dim=-1)  # (L, L)
print(weights)
print("row sums:", weights.sum(dim=-1))

# sphinx_gallery_start_ignore
assert torch.allclose(weights.sum(-1), torch.ones(L, device=device))
# sphinx_gallery_end_ignore

# %%
# Step 4: the weighted sum of the values. Row :math:`i` of the output is token
# :math:`i`'s soft answer: :math:`\sum_j w_{ij} v_j`.

output = weights @ V  # (L, L) @ (L, E) -> (L, E)
print(output)

# %%
# All four steps in one picture:

# sphinx_gallery_start_ignore
fig, axes = plt.subplots(2, 2, figsize=(8, 6.4), layout="constrained")
axes = axes.ravel()
# scores and scaled scores on one colour scale, to compare them
top = scores.max().item()
steps = [
    (scores, "1. scores  Q Kᵀ", tokens, "Purples", top),
    (scaled, "2. scaled  Q Kᵀ / √E", tokens, "Purples", top),
    (weights, "3. weights  softmax", tokens, "Oranges", None),
    (output, "4. output  weights · V", features, "Greens", None),
]
for ax, (matrix, title, cols, cmap, vmax) in zip(axes, steps, strict=True):
    plot_matrix(
        matrix, x_labels=cols, y_labels=tokens, ax=ax, title=title, cmap=cmap, vmax=vmax
    )
for ax in axes[:3]:
    ax.set_xlabel("key token")
    ax.set_ylabel("query token")
axes[3].set_xlabel("vector entry")
axes[3].set_ylabel("query token")
fig.suptitle("Attention on three tokens, step by step")
plt.show()
# sphinx_gallery_end_ignore

# sphinx_gallery_start_ignore
assert torch.allclose(weights[2], torch.full((L,), 1 / 3, device=device))
assert weights[0, 0] == weights[0, 2] and weights[0, 1] < weights[0, 0]
assert weights[1].argmax() == 1
assert torch.allclose(output[:, :3], weights)
assert torch.allclose(output[:, 3], torch.full((L,), 2.0, device=device))
# sphinx_gallery_end_ignore

# %%
# Panels 1 and 2 share one colour scale, so the division by :math:`\sqrt{E}` shows as
# paler cells. Read the picture row by row. "the" matches "the" and "sat" equally well
# and "cat" not at all, so its weights split between those two (with a little left for
# "cat": the softmax gives every key some weight). "cat" looks mostly at itself. "sat"
# has the same score for every key, so its weights are exactly equal, a third each.
# Because the first three numbers of each value mark its token, the first three columns
# of the output are the weights themselves; and because every value ends in 2 and the
# weights of a row sum to 1, the last column of the output is 2 in every row.

# %%
# The same result from the package
# --------------------------------
#
# :func:`attention.scaled_dot_product_attention` does these four steps in one call and
# returns the weights along with the output. It gives the numbers worked out above.

import attention

package_output, package_weights = attention.scaled_dot_product_attention(Q, K, V)
print(package_output)
torch.testing.assert_close(package_output, output)
torch.testing.assert_close(package_weights, weights)
print("the package agrees with the step-by-step computation")

# %%
# What to remember
# ----------------
#
# - Attention is a lookup: a **query** is compared with every **key**, and the
#   **values** of the keys that match come back.
# - It is a *soft* lookup: the softmax turns the scores into weights that sum to 1, and
#   the answer is the weighted average of the values. Equal scores get equal weights;
#   sharper scores make it closer to a hard, argmax lookup.
# - Being soft makes it differentiable, so a model can learn its queries, keys and
#   values.
# - For a sequence, every token has a query, a key and a value; with them stacked into
#   :math:`Q, K, V`, attention is :math:`\text{softmax}(QK^\top/\sqrt{E})\,V`.
#
# Used on this page: :func:`attention.scaled_dot_product_attention`,
# :func:`attention.plot_matrix`, :func:`attention.repro.default_device` and
# :func:`attention.repro.seed_everything`.

# %%
# Exercises
# ---------
#
# 1. **Another query.** Search the five pages for "dog health". Which page gets the
#    largest soft weight, and which pages share the same weight?
# 2. **Shift every score.** Add 10 to every score of the query "food for my cat". Do
#    the soft weights change? Why?
# 3. **Predict a column.** Change the last entry of every value in :math:`V` from 2 to
#    5. Before running it, say what the last column of the output becomes.
#
# .. solution 1
#
# "dog health tips" matches both words and gets the largest weight. Two pairs tie, since
# equal scores always get equal weights: "dog food reviews" and "cat health tips" match
# one word each, and "cat food reviews" and "cat toys" match none.

scores_dog = keys @ embed("dog health")  # (5,)
soft_dog = scores_dog.softmax(dim=0)
for title, s, w in zip(titles, scores_dog, soft_dog, strict=True):
    print(f"{title:>18}: score {s:.0f}   soft {w:.3f}")
assert titles[soft_dog.argmax()] == "dog health tips"
for pair in [("dog food reviews", "cat health tips"), ("cat food reviews", "cat toys")]:
    tied = [titles.index(title) for title in pair]
    torch.testing.assert_close(soft_dog[tied[0]], soft_dog[tied[1]])

# %%
# .. solution 2
#
# They do not change: :math:`e^{s_i + c} / \sum_j e^{s_j + c}` has the factor
# :math:`e^c` on top and below. Only the differences between scores matter.

scores_food = keys @ query  # (5,), as at the top of the page
shifted = scores_food + 10
print("weights:", [round(w, 3) for w in scores_food.softmax(dim=0).tolist()])
print("shifted:", [round(w, 3) for w in shifted.softmax(dim=0).tolist()])
torch.testing.assert_close(shifted.softmax(dim=0), scores_food.softmax(dim=0))

# %%
# .. solution 3
#
# 5 in every row: each row of weights sums to 1, so a column that holds the same
# number in every value comes out as that number.

V5 = V.clone()
V5[:, 3] = 5.0
output5 = weights @ V5  # (L, L) @ (L, E) -> (L, E)
print(output5[:, 3])
torch.testing.assert_close(output5[:, 3], torch.full((L,), 5.0, device=device))

# %%
# Next: :ref:`sphx_glr_tutorials_1_foundations_02_scaled_dot_product.py` takes the
# formula apart, shape by shape, and measures why the scores are divided by
# :math:`\sqrt{E}`.

# sphinx_gallery_thumbnail_number = 2
