r"""
Scaled dot-product attention, step by step
==========================================

.. prerequisites:: 01_qkv_analogy
   :summary: The formula in four steps, with the shape of every tensor, and a
      measurement of why the scores are divided by the square root of D.

Scaled dot-product attention is the formula at the heart of every Transformer:

.. math::

   \text{Attention}(Q, K, V) = \text{softmax}\left(\frac{Q K^\top}{\sqrt{D}}\right) V

This page takes it apart into its four steps, with the shape of the tensor at each one,
then *measures* why the scores are divided by :math:`\sqrt{D}` instead of taking it on
trust. It ends with the package's own implementation, checked against PyTorch's.
"""

# %%
# The four steps and their shapes
# -------------------------------
#
# Take :math:`L = 3` queries and :math:`S = 5` keys, each of size :math:`D = 8` (the
# size of a query and a key must match, so that they can be compared; :math:`D` is often
# written :math:`d_k`, and it was :math:`E` on the previous page), and one value per
# key, of size :math:`D_v = 4`. The four sizes are all different on purpose, so that
# every shape printed below says which size is which.

import math

import torch

# claim(name, value, above=..., below=...) checks a measured number against its bound
# and records the margin; the section on the variance of the scores says why.
from attention.repro import claim, default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0

L, S, D, Dv = 3, 5, 8, 4
# Random numbers are drawn on the CPU, then moved: every device sees the same tensors.
query = torch.randn(L, D).to(device)  # (L, D)
key = torch.randn(S, D).to(device)  # (S, D)
value = torch.randn(S, Dv).to(device)  # (S, Dv)

# %%
# 1. **Scores.** Compare every query with every key by a dot product: one matrix
#    product.
#
#    .. math::
#
#       \underbrace{Q K^\top}_{L \times S} \quad\text{from}\quad
#       \underbrace{Q}_{L \times D}\;\underbrace{K^\top}_{D \times S}
#
# 2. **Scale.** Divide by :math:`\sqrt{D}`; the shape does not change.
# 3. **Softmax.** Over the last axis, the :math:`S` keys: each query's row becomes
#    weights that are positive and sum to 1.
# 4. **Weighted sum.** Each query gets the weighted average of the values:
#    :math:`(L \times S)\,(S \times D_v) \to L \times D_v`.

scores = query @ key.transpose(-2, -1)  # (L, D) @ (D, S) -> (L, S)
scaled = scores / math.sqrt(D)  # (L, S)
weights = scaled.softmax(dim=-1)  # (L, S)
output = weights @ value  # (L, S) @ (S, Dv) -> (L, Dv)

for name, tensor in [
    ("query", query),
    ("key", key),
    ("value", value),
    ("1. scores", scores),
    ("2. scaled", scaled),
    ("3. weights", weights),
    ("4. output", output),
]:
    print(f"{name:>10}: {tuple(tensor.shape)}")
print(
    "each row of the weights sums to",
    [round(x, 4) for x in weights.sum(dim=-1).tolist()],
)

# sphinx_gallery_start_ignore
assert scores.shape == (L, S) and weights.shape == (L, S) and output.shape == (L, Dv)
assert torch.allclose(weights.sum(-1), torch.ones(L, device=device))
# sphinx_gallery_end_ignore

# %%
# The same tensors drawn to scale, one square per number, so that the shapes can be seen
# fitting together:

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt

panels = [
    (query, "Q\n(L, D)", "RdBu_r"),
    (key.T, "Kᵀ\n(D, S)", "RdBu_r"),
    (scaled, "Q Kᵀ / √D\n(L, S)", "RdBu_r"),
    (weights, "softmax\n(L, S)", "Oranges"),
    (value, "V\n(S, Dv)", "RdBu_r"),
    (output, "output\n(L, Dv)", "RdBu_r"),
]
# two rows of three, so that the figure fits the page's column with legible numbers
fig, axes = plt.subplots(2, 3, figsize=(8, 6), layout="constrained")
for ax, (matrix, title, cmap) in zip(axes.flat, panels, strict=True):
    m = matrix.cpu()
    limit = m.abs().max().item()
    vmin = 0.0 if cmap == "Oranges" else -limit
    image = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=limit)
    fig.colorbar(image, ax=ax, shrink=0.8)  # each panel on its own scale
    ax.set_title(title)
    ax.set_xticks(range(m.shape[1]))
    ax.set_yticks(range(m.shape[0]))
    ax.set_xlabel(f"{m.shape[1]} columns")
    ax.set_ylabel(f"{m.shape[0]} rows")
fig.suptitle(
    "Scaled dot-product attention:\n(L, D) and (D, S) make (L, S); "
    "(L, S) and (S, Dv) make (L, Dv)"
)
plt.show()
# sphinx_gallery_end_ignore

# %%
# The inner sizes meet in each product: :math:`D` between :math:`Q` and :math:`K^\top`,
# :math:`S` between the weights and :math:`V`. The softmax panel has only positive
# entries, and the output has one row per query and one column per value entry.
#
# Any leading dimensions ride along: with a batch of :math:`N` sequences and :math:`H`
# heads the tensors are :math:`(N, H, L, D)`, and the same four lines work unchanged,
# because ``@`` multiplies over the last two axes only and ``softmax(dim=-1)``
# normalises over the last one.

query4, key4, value4 = (
    torch.randn(2, 6, n, d).to(device) for n, d in [(L, D), (S, D), (S, Dv)]
)
# (N, H, L, S)
weights4 = (query4 @ key4.transpose(-2, -1) / math.sqrt(D)).softmax(dim=-1)
output4 = weights4 @ value4  # (N, H, L, S) @ (N, H, S, Dv) -> (N, H, L, Dv)
print("weights:", tuple(weights4.shape), " output:", tuple(output4.shape))

# %%
# Why divide by :math:`\sqrt{D}`? Measuring it
# --------------------------------------------
#
# The dot products grow with D
# ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
#
# A score is a sum of :math:`D` products. If the entries of queries and keys are
# independent, with mean 0 and variance 1 (what unit-variance inputs give; PyTorch's
# default ``nn.Linear`` initialisation gives projected entries of variance about 1/3,
# which changes the constant but not the growth with D), each product :math:`q_i k_i`
# has variance 1, and the variances of independent terms add up:
#
# .. math::
#
#    \operatorname{Var}(q \cdot k) = \sum_{i=1}^{D} \operatorname{Var}(q_i k_i) = D,
#    \qquad
#    \operatorname{Var}\left(\frac{q \cdot k}{\sqrt{D}}\right) = 1.
#
# So the typical score grows like :math:`\sqrt{D}`. Here is the measurement: random
# queries and keys for :math:`D` from 1 to 1024, with :math:`S = 16` keys per query,
# drawn afresh for every query (no two queries share a key).

sizes = [2**i for i in range(11)]  # D = 1, 2, 4, ..., 1024
n_queries, n_keys = 1000, 16
# D -> (n_queries, n_keys) dot products, in float64 for the statistics below
raw_scores = {}
for d in sizes:
    q = torch.randn(n_queries, 1, d).to(device)  # (n, 1, D)
    k = torch.randn(n_queries, n_keys, d).to(device)  # (n, S, D)
    # (n, 1, D) @ (n, D, S) -> (n, S)
    raw_scores[d] = (q @ k.transpose(-2, -1))[:, 0].double()

variance = torch.tensor([raw_scores[d].var().item() for d in sizes])
variance_scaled = torch.tensor(
    [(raw_scores[d] / math.sqrt(d)).var().item() for d in sizes]
)
for d, v, vs in zip(sizes, variance, variance_scaled, strict=True):
    print(f"D = {d:4d}: Var(q.k) = {v:7.1f}   Var(q.k / sqrt(D)) = {vs:.2f}")

# %%
# These variances are measured on random numbers, so another seed prints slightly
# different ones. The page states what it claims about them with
# :func:`attention.repro.claim`: ``claim(name, value, above=..., below=...)`` checks
# that a measured number lies strictly between its bounds and stops the page with an
# error otherwise, so a claim that stops holding stops the site's build.

ratio = variance / torch.tensor(sizes, dtype=variance.dtype)
claim("Var(q.k) / D, lowest", ratio.min(), above=0.85)
claim("Var(q.k) / D, highest", ratio.max(), below=1.15)
claim("Var(q.k / sqrt(D)), lowest", variance_scaled.min(), above=0.85)
claim("Var(q.k / sqrt(D)), highest", variance_scaled.max(), below=1.15)

# sphinx_gallery_start_ignore
# the aside on nn.Linear's default initialisation: unit-variance inputs, projected
projected = torch.nn.Linear(64, 64, device=device)(torch.randn(4096, 64, device=device))
claim(
    "nn.Linear on unit-variance inputs: variance",
    projected.var(),
    above=0.28,
    below=0.4,
)
# sphinx_gallery_end_ignore

# %%
# Why bounds with a margin, rather than the values printed above? Because the site is
# built on machines that nobody here chooses, and the numbers move from one to the
# next. PyTorch's CPU kernels use the processor's vector instructions (AVX2, AVX-512,
# or none), which add the terms of a sum in different orders and so round differently;
# a computation that repeats many steps, like training, lets those last digits grow. So
# every claim on the site is a bound with a margin, checked over several seeds (set
# through ``ATTENTION_SEED``, which :func:`~attention.repro.seed_everything` reads),
# under three instruction sets and with one or two threads: the project's ``make
# robust`` runs every page that way and tabulates each claim's smallest margin (when
# ``ATTENTION_CLAIMS`` names a file, ``claim`` writes each value and its margin there).
# The rest of the site states its claims the same way; a check that only guards the
# build, rather than teaching something, is hidden from the page (the build still runs
# it, and the downloaded script keeps it).
#
# The variances, drawn:

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
# the unscaled variances as points only: a line through them would hide the dashed
# line D that they follow
ax.loglog(sizes, variance, "o", label="q · k (not scaled)")
ax.loglog(sizes, variance_scaled, "s-", label="q · k / √D (scaled)")
ax.loglog(sizes, sizes, "k--", lw=1.2, label="D")
ax.set_xlabel("D, the size of queries and keys")
ax.set_ylabel("variance of the score")
ax.set_title("Without the scale, the spread of the scores grows with D")
ax.legend()
plt.show()
# sphinx_gallery_end_ignore

# %%
# The unscaled variance follows the dashed line :math:`D`, as the printed values do; the
# scaled one stays close to 1 whatever :math:`D` is.
#
# Large scores saturate the softmax
# ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
#
# Why does the spread matter? The softmax looks at the *differences* between scores,
# through :math:`e^{s}`. When the scores are spread over tens of units, the largest one
# dwarfs the rest and the softmax becomes a hard argmax: nearly all the weight on one
# key. Two numbers say how saturated a row of weights is: its largest weight (1/16 when
# all 16 keys share equally, 1 for a hard lookup) and its entropy
# :math:`-\sum_j w_j \log w_j` (:math:`\log 16` when spread evenly, 0 for a hard
# lookup).


def saturation(scores):
    """Mean largest weight and mean entropy (in nats) of the rows of softmax(scores)."""
    w = scores.softmax(dim=-1)
    entropy = -(w * w.clamp_min(1e-300).log()).sum(dim=-1)
    return w.max(dim=-1).values.mean().item(), entropy.mean().item()


unscaled_stats = torch.tensor([saturation(raw_scores[d]) for d in sizes])  # (11, 2)
# (11, 2)
scaled_stats = torch.tensor([saturation(raw_scores[d] / math.sqrt(d)) for d in sizes])
for d, (mu, hu), (ms, hs) in zip(sizes, unscaled_stats, scaled_stats, strict=True):
    print(
        f"D = {d:4d}: largest weight {mu:.3f} vs {ms:.3f} scaled;  entropy {hu:.3f} vs "
        f"{hs:.3f}"
    )
print(
    f"(uniform weights: largest weight {1 / n_keys:.4f}, entropy log 16 = "
    f"{math.log(16):.3f})"
)

# sphinx_gallery_start_ignore
claim("largest D, not scaled: mean largest weight", unscaled_stats[-1, 0], above=0.9)
claim("largest D, not scaled: entropy", unscaled_stats[-1, 1], below=0.2)
claim("scaled: highest mean largest weight", scaled_stats[:, 0].max(), below=0.3)
claim("scaled: lowest entropy", scaled_stats[:, 1].min(), above=2.0)
claim(
    "scaled: |largest weight at D = 1024 - at D = 1|",
    (scaled_stats[-1, 0] - scaled_stats[0, 0]).abs(),
    below=0.1,
)
claim(
    "scaled: |entropy at D = 1024 - at D = 1|",
    (scaled_stats[-1, 1] - scaled_stats[0, 1]).abs(),
    below=0.15,
)
# dividing by sqrt(D) > 1 pulls each row's scores together: its largest weight can
# only fall (see below), so this holds for any scores, not only these
assert (unscaled_stats[1:, 0] >= scaled_stats[1:, 0]).all()
# sphinx_gallery_end_ignore

# %%

# sphinx_gallery_start_ignore
fig, (ax_max, ax_entropy) = plt.subplots(1, 2, figsize=(8, 4), layout="constrained")
for stats, label, style in [
    (unscaled_stats, "not scaled", "o-"),
    (scaled_stats, "scaled by 1/√D", "s-"),
]:
    ax_max.semilogx(sizes, stats[:, 0], style, base=2, label=label)
    ax_entropy.semilogx(sizes, stats[:, 1], style, base=2, label=label)
ax_max.axhline(1.0, color="k", lw=1, ls="--")
ax_max.set_ylabel("largest weight in a row (mean)")
ax_max.set_title("The largest weight goes to 1")
ax_entropy.axhline(math.log(16), color="k", lw=1, ls="--", label="log 16 (uniform)")
ax_entropy.set_ylabel("entropy of a row, nats (mean)")
ax_entropy.set_title("The entropy goes to 0")
for ax in (ax_max, ax_entropy):
    ax.set_xlabel("D, the size of queries and keys")
    ax.legend()
fig.suptitle("Without the scale, the softmax saturates as D grows (16 keys per query)")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Without the scale, the largest weight climbs towards 1 and the entropy falls towards
# 0: at :math:`D = 1024` the value printed above shows that a query puts almost all its
# weight on a single key. With the scale, both move little over the whole range: from
# the :math:`D = 1` row to the :math:`D = 1024` row the largest weight moves by less
# than 0.1 and the entropy by less than 0.15 nats (the second number of each pair
# above), where without the scale they cross most of their range. The scaled values
# move at all because a query's scaled scores are spread by :math:`|q| / \sqrt{D}`: at
# :math:`D = 1` that is :math:`|q|`, which differs a lot from one query to the next, so
# some rows are nearly flat and others sharper; as :math:`D` grows it comes close to 1
# for every query.
#
# Here is what that looks like for six queries at :math:`D = 512`, each with the first
# ten of its own keys, drawn with :func:`attention.plot_attention`:

import attention

example = raw_scores[512][:6, :10]  # 6 queries, 10 keys  (6, 10)
versions = {
    "not scaled": example.softmax(dim=-1),
    "scaled by 1/√D": (example / math.sqrt(512)).softmax(dim=-1),
}
for label, w in versions.items():
    largest = w.max(dim=-1).values.round(decimals=2).tolist()
    print(f"{label:>14}: largest weight of each row {largest}")

# sphinx_gallery_start_ignore
key_names = [str(j) for j in range(1, 11)]  # each row's own keys: not shared
query_names = [f"q{i}" for i in range(6)]
fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), layout="compressed")
for ax, (label, w) in zip(axes, versions.items(), strict=True):
    attention.plot_attention(
        w, x_tokens=key_names, y_tokens=query_names, ax=ax, title=label, vmax=1.0,
        colorbar=False,
    )  # fmt: skip
    ax.set_xlabel("the query's own keys, 1st to 10th")
fig.colorbar(axes[0].images[0], ax=axes, label="attention weight")  # one scale, one bar
fig.suptitle("The same scores at D = 512, with and without the scale")
plt.show()
# sphinx_gallery_end_ignore

# %%
# The six rows drawn are a sample. Over all 1000 queries, each with the first 10 of its
# own keys:

every_row = raw_scores[512][:, :10]  # (1000, 10)
top_weight = {
    "not scaled": every_row.softmax(dim=-1).amax(dim=-1),
    "scaled by 1/√D": (every_row / math.sqrt(512)).softmax(dim=-1).amax(dim=-1),
}
for label, top in top_weight.items():
    print(
        f"{label:>14}: mean largest weight {top.mean():.2f}; "
        f"rows with a largest weight over 0.95: {(top > 0.95).double().mean():.1%}"
    )

# sphinx_gallery_start_ignore
row_max = {label: w.max(-1).values for label, w in versions.items()}  # per query row
assert (row_max["not scaled"] >= row_max["scaled by 1/√D"]).all()  # by algebra
claim(
    "share of rows over 0.95, not scaled",
    (top_weight["not scaled"] > 0.95).double().mean(),
    above=0.7,
)
claim("mean largest weight, not scaled", top_weight["not scaled"].mean(), above=0.9)
claim("mean largest weight, scaled", top_weight["scaled by 1/√D"].mean(), below=0.4)
claim(
    "share of rows over 0.95, scaled",
    (top_weight["scaled by 1/√D"] > 0.95).double().mean(),
    below=0.01,
)
# sphinx_gallery_end_ignore

# %%
# Without the scale, most rows are a single bright square, a hard lookup: the share
# printed above has its largest weight over 0.95. In every drawn row the scaled weight
# is the smaller one, and it has to be, for any scores: the largest weight of the row
# :math:`c\,s` is :math:`1 / \sum_j e^{c\,(s_j - s_{\max})}`, and as :math:`c`
# falls from 1 (not scaled) to :math:`1/\sqrt{D}` every term with
# :math:`s_j < s_{\max}` grows and the others stay 1, so the largest weight falls.
# Over all the queries, the same scores divided by :math:`\sqrt{512}` bring the mean
# largest weight down to the second value printed above, and the share of rows over
# 0.95 down to the second percentage: on average a query's attention is spread over
# several keys.
#
# A saturated softmax passes almost no gradient
# ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
#
# Saturation is not only a matter of taste: it stops learning. The derivative of the
# softmax with respect to its input :math:`z` (with the scale, :math:`z = QK^\top /
# \sqrt{D}`) is
#
# .. math::
#
#    \frac{\partial w_i}{\partial z_j} = w_i\,(\delta_{ij} - w_j),
#
# which is 0 for every :math:`i, j` when one weight is 1 and the others are 0. So
# whatever gradient arrives from above, almost none reaches the scores, and the queries
# and keys that made them stop changing. Measured with autograd: a random gradient
# arrives at the weights, and we look at the size of the gradient that comes out on the
# softmax's input: the scaled scores with the scale, the raw ones without.


def gradient_through_softmax(scores):
    """Size of the gradient on each row's softmax input, for a random gradient on its
    output.
    """
    z = scores.clone().requires_grad_()
    # from the layers above  (n, S)
    upstream = torch.randn(z.shape, dtype=z.dtype).to(z.device)
    (z.softmax(dim=-1) * upstream).sum().backward()
    return z.grad.norm(dim=-1)  # (n,)


# (11, n)
grad_unscaled = torch.stack([gradient_through_softmax(raw_scores[d]) for d in sizes])
grad_scaled = torch.stack(
    [gradient_through_softmax(raw_scores[d] / math.sqrt(d)) for d in sizes]
)
for d, gu, gs in zip(
    sizes,
    grad_unscaled.median(dim=1).values,
    grad_scaled.median(dim=1).values,
    strict=True,
):
    print(f"D = {d:4d}: median gradient size {gu:.2e} not scaled, {gs:.2e} scaled")

# sphinx_gallery_start_ignore
median_unscaled = grad_unscaled.median(dim=1).values
median_scaled = grad_scaled.median(dim=1).values
claim(
    "largest D: gradient not scaled / scaled",
    median_unscaled[-1] / median_scaled[-1],
    below=1e-3,
)
claim("scaled: smallest median gradient", median_scaled.min(), above=0.1)
claim(
    "scaled: largest / smallest median gradient",
    median_scaled.max() / median_scaled.min(),
    below=1.2,
)
claim(
    "not scaled: gradient at the largest D / the smallest",
    median_unscaled[-1] / median_unscaled[0],
    below=1e-3,
)
# sphinx_gallery_end_ignore

# %%

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(6.5, 4.2), layout="constrained")
bottom = 1e-8  # lowered below the lowest band edge, so every band shows whole
for grads, label, style in [
    (grad_unscaled, "not scaled", "o-"),
    (grad_scaled, "scaled by 1/√D", "s-"),
]:
    low, median, high = grads.quantile(
        torch.tensor([0.25, 0.5, 0.75], dtype=grads.dtype), dim=1
    ).cpu()
    bottom = min(bottom, low.min().item() / 4)
    line = ax.loglog(sizes, median, style, base=2, label=f"{label}: median")[0]
    ax.fill_between(
        sizes,
        low,
        high,
        color=line.get_color(),
        alpha=0.2,
        label=f"{label}: middle half of the queries",
    )
ax.set_yscale("log", base=10)
ax.set_ylim(bottom, 2)
ax.set_xlabel("D, the size of queries and keys")
ax.set_ylabel("size of the gradient on\nthe softmax's input")
ax.set_title("Through a saturated softmax, the gradient vanishes")
ax.legend(fontsize="small", loc="lower left")
plt.show()
# sphinx_gallery_end_ignore

# %%
# With the scale, the gradient that reaches the softmax's input, the scaled scores,
# hardly changes with :math:`D`: the largest of its eleven medians (the right-hand
# column above) is less than a fifth above the smallest. Without it, the typical
# gradient shrinks by orders of magnitude as :math:`D` grows (the left-hand column):
# the model would barely learn where to look.
#
# One step further down, the raw products :math:`QK^\top`, and through them the
# queries and keys, receive the scaled scores' gradient divided by :math:`\sqrt{D}`
# (the chain rule through the division). At :math:`D = 1024` that is a factor of 32:

top = sizes[-1]
# the medians at D = 1024; on Q K^T with the scale: the scaled scores' over sqrt(D)
on_products = grad_scaled[-1].median() / math.sqrt(top)
without = grad_unscaled[-1].median()
print(
    f"D = {top}: median gradient on Q K^T {on_products:.2e} with the scale, "
    f"{without:.2e} without; ratio {on_products / without:.0f}"
)

# sphinx_gallery_start_ignore
claim(
    "largest D: gradient on QK^T, not scaled / scaled",
    without / on_products,
    below=1e-2,
)
# sphinx_gallery_end_ignore

# %%
# Even divided by :math:`\sqrt{D}`, the gradient with the scale is more than a hundred
# times the one without (the ratio printed). That is the whole reason for the
# :math:`\sqrt{D}`: it keeps the scores at a spread where the softmax is still soft.
#
# The package's implementation
# ----------------------------
#
# :func:`attention.scaled_dot_product_attention` is these four lines plus what a library
# needs: input checks, masks, dropout, and two options that later pages use. Steps 1
# and 2, the scores, are formed in one small function, shared by every path of the
# package that computes softmax attention in PyTorch:
#
# .. literalinclude:: ../../../attention/functional.py
#    :language: python
#    :pyobject: _scores
#
# The product is taken in float32 at least (``accumulation_dtype``), so that with
# ``float16`` inputs a score may pass 65504, ``float16``'s largest number, without
# overflowing; the queries are scaled *before* it, :math:`L \times D` multiplications
# rather than :math:`L \times S`. The ``bias`` and the mask come after the scale (the
# mask fill is explained in :ref:`blocking-keys`). The whole function, docstring
# included:
#
# .. literalinclude:: ../../../attention/functional.py
#    :language: python
#    :pyobject: scaled_dot_product_attention
#
# Line by line, after the docstring:
#
# - The ``check`` calls refuse bad input (wrong dtypes, query and key sizes that
#   differ, a mask that is not bool, a bias of the wrong shape) with a message that
#   says what was expected, and ``_check_qkv`` chooses the default scale
#   :math:`1/\sqrt{D}`.
# - The ``groups`` lines serve ``enable_gqa=True``, where several query heads share
#   one key and value head (:ref:`sphx_glr_tutorials_4_generation_13_kv_cache_gqa.py`);
#   by default ``groups`` is 1 and they do nothing.
# - ``_scores`` is steps 1 and 2; ``softmax(dim=-1)`` is step 3 and ``weights @ value``
#   is step 4. Both products work on the last two axes, so any batch or head
#   dimensions in front ride along, as above.
# - ``bias`` is added to the scores before the softmax (ALiBi, on
#   :ref:`sphx_glr_tutorials_4_generation_14_positions.py`, biases them by distance).
# - The ``mask`` lines: a mask is a bool tensor with ``True`` where a query may attend
#   to a key, and a blocked key gets weight exactly 0 (how the fill in ``_scores`` and
#   the zeroing after the softmax do it, and why both: :ref:`blocking-keys`). Masks are
#   the subject of :ref:`sphx_glr_tutorials_1_foundations_05_masks.py`.
# - ``dropout_p`` randomly zeroes weights whenever it is positive, and scales the ones
#   it keeps by :math:`1/(1 - p)` (the modules pass 0 in evaluation mode); it is 0 by
#   default.
#
# It returns the weights as well as the output, which is what lets these pages draw
# them. Here it is on the tensors from the top of the page, with one key blocked by a
# mask:

mask = torch.ones(L, S, dtype=torch.bool, device=device)  # (L, S): True = may attend
mask[:, 3] = False  # no query may look at key 3
masked_output, masked_weights = attention.scaled_dot_product_attention(
    query, key, value, mask
)
print(masked_weights)

# sphinx_gallery_start_ignore
assert (masked_weights[:, 3] == 0).all()
assert torch.allclose(masked_weights.sum(-1), torch.ones(L, device=device))
# sphinx_gallery_end_ignore

# %%
# Column 3 is exactly 0, and every row still sums to 1 over the keys that are left.
#
# Checked against PyTorch
# -----------------------
#
# PyTorch has the same operation as
# ``torch.nn.functional.scaled_dot_product_attention``. It returns only the output,
# whichever kernel runs (its fused kernels never hold the whole matrix of weights), and
# its boolean ``attn_mask`` has the same meaning as ours: ``True`` may attend. The
# package gives the same numbers as the four steps written out above and as PyTorch,
# with and without the mask.

import torch.nn.functional as F

ours, ours_weights = attention.scaled_dot_product_attention(query, key, value)
theirs = F.scaled_dot_product_attention(query, key, value)
theirs_masked = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

torch.testing.assert_close(ours, output)
torch.testing.assert_close(ours_weights, weights)
torch.testing.assert_close(ours, theirs)
torch.testing.assert_close(masked_output, theirs_masked)
print(
    f"largest difference from PyTorch: {(ours - theirs).abs().max().item():.1e} "
    "(float32)"
)
print(
    "with the mask:                   "
    f"{(masked_output - theirs_masked).abs().max().item():.1e}"
)

# %%
# The two agree to float32 rounding. (Golden tests like this one, in float64 and with
# copied weights, are the subject of
# :ref:`sphx_glr_tutorials_2_building_and_checking_09_testing_against_pytorch.py`.)
#
# What to remember
# ----------------
#
# - Scaled dot-product attention is four steps: scores :math:`QK^\top` :math:`(L, S)`,
#   divide by :math:`\sqrt{D}`, softmax over the keys, weighted sum of the values
#   :math:`(L, D_v)`. Leading batch and head dimensions ride along.
# - The variance of a dot product of two random :math:`D`-vectors, with independent
#   entries of mean 0 and variance 1, is :math:`D`; dividing by :math:`\sqrt{D}` brings
#   it back to 1.
# - Without the scale, large :math:`D` saturates the softmax (one key takes all the
#   weight) and the gradient through it vanishes; with it, attention stays soft and
#   trainable.
# - The package's :func:`attention.scaled_dot_product_attention` returns the weights
#   too, and matches ``torch.nn.functional.scaled_dot_product_attention``.
# - A number measured on random data, or on a trained model, moves with the seed and
#   the machine: the site states it with :func:`attention.repro.claim`, as a bound with
#   a margin, checked over several seeds and three instruction sets.
#
# Used on this page: :func:`attention.scaled_dot_product_attention`,
# :func:`attention.plot_attention`, :func:`attention.repro.claim`.

# %%
# Exercises
# ---------
#
# 1. **Predict the shapes.** A batch of :math:`N = 2` sequences with :math:`H = 4`
#    heads, :math:`L = 7` queries and :math:`S = 9` keys of size :math:`D = 16`, and
#    values of size :math:`D_v = 5`. Write down the shapes of the scores, the weights
#    and the output, then check them.
# 2. **Move the scale into the queries.** Show that multiplying the queries by
#    :math:`1/\sqrt{D}` and then taking the softmax of the plain :math:`QK^\top` gives
#    the package's output: the scale can sit on either side of the product.
# 3. **One key per query.** Build a mask that lets query :math:`i` attend to key
#    :math:`i` only. What are the weights and the output?
#
# .. solution 1
#
# The scores and the weights are :math:`(N, H, L, S)`; the output takes the keys' axis
# away and the values' size in: :math:`(N, H, L, D_v)`.

q1 = torch.randn(2, 4, 7, 16, device=device)  # (N, H, L, D)
k1 = torch.randn(2, 4, 9, 16, device=device)  # (N, H, S, D)
v1 = torch.randn(2, 4, 9, 5, device=device)  # (N, H, S, Dv)
scores1 = q1 @ k1.transpose(-2, -1)  # (N, H, L, D) @ (N, H, D, S) -> (N, H, L, S)
out1, weights1 = attention.scaled_dot_product_attention(q1, k1, v1)
print("scores", tuple(scores1.shape), " weights", tuple(weights1.shape))
print("output", tuple(out1.shape))
# sphinx_gallery_start_ignore
assert scores1.shape == weights1.shape == (2, 4, 7, 9)
assert out1.shape == (2, 4, 7, 5)
# sphinx_gallery_end_ignore

# %%
# .. solution 2
#
# In float64, so that the two orders of the arithmetic agree to many digits.

q64, k64, v64 = query.double(), key.double(), value.double()
# (L, D) @ (D, S) -> (L, S), then (L, S) @ (S, Dv) -> (L, Dv)
moved = ((q64 / math.sqrt(D)) @ k64.transpose(-2, -1)).softmax(dim=-1) @ v64
reference, _ = attention.scaled_dot_product_attention(q64, k64, v64)
print(f"largest difference: {(moved - reference).abs().max().item():.1e}")
torch.testing.assert_close(moved, reference, rtol=1e-12, atol=1e-12)

# %%
# .. solution 3
#
# A row with one allowed key puts all its weight there: the softmax of a single score is
# 1. The output of query :math:`i` is then value :math:`i`, exactly.

one_key = torch.eye(L, S, dtype=torch.bool, device=device)  # (L, S): query i, key i
out3, weights3 = attention.scaled_dot_product_attention(query, key, value, one_key)
print(weights3)
assert torch.equal(weights3, one_key.float())
torch.testing.assert_close(out3, value[:L])

# %%
# Next: :ref:`sphx_glr_tutorials_1_foundations_03_self_attention.py` makes the
# queries, keys and values from a sequence with learned projections.

# sphinx_gallery_thumbnail_number = 2
