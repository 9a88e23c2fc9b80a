"""
Reading attention: heatmaps, entropy and ablation
=================================================

.. prerequisites:: 04_multi_head 10_classifier
   :summary: The trained classifier read: heatmaps, what each head does over a thousand
      sentences, and which heads it needs.

Attention weights are one of the few parts of a network that can be read directly: for
every query token, a probability distribution over the key tokens. This page reads the
sentiment classifier trained in
:ref:`sphx_glr_tutorials_3_training_and_reading_10_classifier.py`. It draws the weights
as heatmaps with :func:`attention.plot_attention`; it measures what each head does over
a thousand held-out sentences, rather than trusting one picture; and it switches the
heads off one at a time, because where a head looks does not say whether the model
needs it.
"""

# %%
# Setup
# -----
#
# :func:`attention.recipes.fit_sentiment_classifier` trains once per process and hands
# out copies: in the site's build, the previous page trained the model and this page
# reads a copy of it, without training again (the training history is printed there).
# Run on its own, this page trains the same model first.

import torch

from attention.recipes import fit_sentiment_classifier
from attention.repro import claim, default_device, seed_everything
from attention.training import accuracy

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

model, history, (held_out_tokens, held_out_labels) = fit_sentiment_classifier(seed=seed)
model = model.to(device)
held_out_tokens = held_out_tokens.to(device)  # (N, L), padded to L = 12
held_out_labels = held_out_labels.to(device)  # (N,)
held_out_accuracy = accuracy(model, held_out_tokens, held_out_labels)
print(
    f"the classifier of the previous page, trained once in this process "
    f"({history[-1]['seconds']:.0f} s): held-out accuracy {held_out_accuracy:.1%} on "
    f"{len(held_out_labels)} sentences"
)

# %%
# Drawing attention weights
# -------------------------
#
# A multi-head module returns its weights as an :math:`(N, H, L, S)` tensor: for each
# sentence and head, one row per query and one column per key, each row summing to 1.
# :func:`attention.plot_attention` draws one :math:`(L, S)` matrix as a heatmap, or an
# :math:`(H, L, S)` stack as a grid of heads, queries down the side and keys along the
# bottom, with the tokens on the axes. All panels of a grid share one colour scale, so
# a bright cell means the same weight in every head; ``vmax=1.0`` fixes the top of the
# scale, so that several figures can be compared too.
#
# The sentences come from :mod:`attention.data`: filler words, one *signal* word
# (``good``, ``awful``, ...) and sometimes ``not``; the label is the signal word's
# sentiment, flipped when ``not`` stands right before it. Here is one sentence with both
# kinds of ``not``: one right before the signal word, which flips it, and one elsewhere,
# which does not.

from attention.data import CLASSES, NEGATIVE, PAD_ID, POSITIVE, VOCAB, decode, encode

sentence = "the movie was not good and not the music".split()
example = encode(sentence)[None].to(device)  # (1, L)
print(f"{' '.join(sentence)!r}: {len(sentence)} tokens")

# %%
# The trained heads on one sentence
# ---------------------------------
#
# Asked with ``need_weights=True``, the classifier returns its logits and one
# :math:`(N, H, L, L)` tensor of weights per layer. The four heads of the first layer:

import matplotlib.pyplot as plt

from attention import plot_attention

with torch.no_grad():
    logits, example_weights = model(example, need_weights=True)
probability = logits.softmax(-1)[0]  # (C,)
prediction = int(probability.argmax())
print(f"{' '.join(sentence)!r} -> {CLASSES[prediction]}, {probability[prediction]:.0%}")
# sphinx_gallery_start_ignore
claim(
    "P(negative) for the example sentence",
    probability[CLASSES.index("negative")],
    above=0.5,
)
# sphinx_gallery_end_ignore

plot_attention(
    example_weights[0][0],
    x_tokens=sentence,
    title="Trained classifier, layer 1, per head",
    vmax=1.0,
)
plt.show()
row_max_1 = example_weights[0][0].amax(-1).mean(-1)  # mean largest weight of a row (H,)
print(
    "layer 1, largest weight of a row, mean over the rows: "
    + ", ".join(f"head {h} {v:.2f}" for h, v in enumerate(row_max_1.tolist()))
    + f" (uniform {1 / len(sentence):.2f})"
)
print(f"the sharpest head: {row_max_1.max() * len(sentence):.1f}x the uniform share")
# sphinx_gallery_start_ignore
claim(
    "layer 1, sharpest head's mean row maximum x L",
    row_max_1.max() * len(sentence),
    above=2.0,
)
# sphinx_gallery_end_ignore

# %%
# The heads differ from each other, and the sharpest gives each word's favourite key
# more than twice the uniform share (the ratio is the last line printed above). A single
# sentence can mislead, though, so the next section measures these patterns over the
# 1000 held-out sentences.
#
# The second layer:

plot_attention(
    example_weights[1][0],
    x_tokens=sentence,
    title="Trained classifier, layer 2, per head",
    vmax=1.0,
)
plt.show()
one_cell = (example_weights[1][0].amax(-1) > 0.5).float().mean()  # rows, all heads
print(f"layer 2: {one_cell:.0%} of the rows put more than half their weight on one key")
# sphinx_gallery_start_ignore
claim("layer 2, fraction of rows above 0.5", one_cell, above=0.4)
from attention.head_view import save_head_view

# every layer and head on the example: (H, L, L) each
save_head_view("11-sentiment", sentence, [w[0] for w in example_weights])
# sphinx_gallery_end_ignore

# %%
# Many rows are a single bright cell (the share printed above). Reading them word by
# word is less direct than in the first layer: the second layer's keys are the first
# layer's *outputs*, and each of those already mixes in the words it attended to. A
# column labelled ``not`` in layer 2 is the vector at that position after layer 1: the
# ``not`` plus what it gathered there.
#
# .. head-view:: 11-sentiment
#
# What the heads do, measured over the held-out set
# -------------------------------------------------
#
# For every head, three measurements averaged over the real (non-padding) query
# positions of the held-out sentences, next to what a uniform head would give:
#
# - *entropy*: a row's entropy :math:`-\sum_j w_j \log w_j` divided by its largest
#   value, :math:`\log n` for a row spread evenly over the :math:`n` real keys: 1 for a
#   uniform row, 0 for a row that puts all its weight on one key;
# - *on "not"*: the total weight a word puts on the ``not`` s of its sentence
#   (sentences that contain one);
# - *on signal*: the weight a word puts on the signal word.


def relative_entropy(weights, real):
    """Entropy of each query row over the real keys, divided by log(number of real
    keys).

    ``weights`` (N, H, L, L) and ``real`` (N, L) bool; returns (N, H, L)."""
    # padding keys have weight 0 already  (N, H, L, L)
    w = weights * real[:, None, None, :]
    entropy = -(w * w.clamp_min(1e-30).log()).sum(-1)  # (N, H, L)
    n = real.sum(-1).to(w.dtype)  # (N,)
    return entropy / n.log()[:, None, None]


def mean_over_queries(values, real):
    """Average (N, H, L) values over the real query positions: (H,)."""
    q = real[:, None, :].to(values.dtype)  # (N, 1, L)
    return (values * q).sum((0, 2)) / q.sum((0, 2))


def weight_on(weights, keys):
    """
    Total weight each query puts on the keys where ``keys`` (N, L) is True: (N, H, L).
    """
    return (weights * keys[:, None, None, :]).sum(-1)


with torch.no_grad():
    held_out_logits, held_out_weights = model(held_out_tokens, need_weights=True)

signal_ids = torch.tensor([VOCAB.index(w) for w in POSITIVE + NEGATIVE], device=device)
real = held_out_tokens != PAD_ID  # (N, L)
is_signal = torch.isin(held_out_tokens, signal_ids)  # exactly one per sentence  (N, L)
is_not = held_out_tokens == VOCAB.index("not")  # (N, L)
flipping = torch.zeros_like(is_not)  # the "not" right before the signal word  (N, L)
flipping[:, :-1] = is_not[:, :-1] & is_signal[:, 1:]
distracting = is_not & ~flipping  # (N, L)
has_not = is_not.any(1)  # (N,)

n_real = real.sum(1).float()  # sentence lengths  (N,)
uniform_not = (is_not.sum(1) / n_real)[has_not].mean().item()
uniform_signal = (1 / n_real).mean().item()
stats = {}  # (layer, head) -> the three columns
for layer, w in enumerate(held_out_weights, 1):
    columns = (
        mean_over_queries(relative_entropy(w, real), real),
        mean_over_queries(weight_on(w, is_not), real & has_not[:, None]),
        mean_over_queries(weight_on(w, is_signal), real),
    )
    for head, values in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        stats[layer, head] = values

print("                 entropy   on 'not'   on signal")
print(f"uniform head     1.000     {uniform_not:.3f}      {uniform_signal:.3f}")
for (layer, head), (sharp, on_not, on_signal) in stats.items():
    print(
        f"layer {layer}, head {head}  {sharp:.3f}     {on_not:.3f}      {on_signal:.3f}"
    )

# %%
# Some head is a ``not`` detector: on average over the words of a sentence, whatever
# they are, it sends the ``not`` s a much larger share of weight than a uniform head
# would. Take the head, of either layer, that puts the most weight on ``not``:

not_layer, not_head = max(stats, key=lambda key: stats[key][1])
on_not = stats[not_layer, not_head][1]
print(
    f"layer {not_layer}, head {not_head}: a word puts {on_not:.2f} of its weight on "
    f"the 'not's, on average ({on_not / uniform_not:.1f}x a uniform head's "
    f"{uniform_not:.2f})"
)
claim("'not' head, weight on 'not's / uniform", on_not / uniform_not, above=2)

# %%
# The ``not`` head on three kinds of sentence
# -------------------------------------------
#
# Draw that head on three held-out sentences, one without ``not``, one where ``not``
# flips the signal word, and one with only a distracting ``not``: the first held-out
# sentence of each kind that the model classifies right. The axes carry each sentence's
# words (padding dropped), and the three panels share one colour scale, from 0 to 1:

probabilities = held_out_logits.softmax(-1)  # (N, C)
flips, distracts = flipping.any(1), distracting.any(1)  # (N,)
kinds = {
    "no 'not'": ~has_not,
    "flipping 'not'": flips & ~distracts,
    "distracting 'not'": ~flips & distracts,
}
panels = {}  # kind -> (sentence, its words, the head's (L, S) weights)
for kind, chosen in kinds.items():
    right = chosen & (probabilities.argmax(-1) == held_out_labels)  # (N,)
    i = int(right.nonzero()[0])  # the first sentence of this kind classified right
    words, n = decode(held_out_tokens[i]), int(real[i].sum())
    panels[kind] = i, words, held_out_weights[not_layer - 1][i, not_head, :n, :n]

# sphinx_gallery_start_ignore
fig, axes = plt.subplots(1, 3, figsize=(9, 3.5), layout="constrained")
for ax, (kind, (i, words, panel)) in zip(axes, panels.items(), strict=True):
    plot_attention(panel, x_tokens=words, ax=ax, vmax=1.0)
    ax.images[0].colorbar.remove()  # one colour bar for the three, drawn below
    predicted = int(probabilities[i].argmax())
    ax.set_title(
        f"{kind}\npredicted {CLASSES[predicted]} ({probabilities[i, predicted]:.0%})",
        fontsize=10,
    )
# the colour bar as tall as the panels, next to the last one
colour_bar = axes[-1].inset_axes([1.06, 0.0, 0.07, 1.0])
fig.colorbar(axes[-1].images[0], cax=colour_bar, label="attention weight")
fig.suptitle(f"Layer {not_layer}, head {not_head} on three held-out sentences")
# sphinx_gallery_end_ignore
plt.show()

# %%
# Each panel's title gives the model's prediction and its confidence. The flipping
# ``not`` had the middle panel's brightest column (its weights summed over the queries)
# in all 30 runs that tuned the page (seeds 0-9, three CPU kernels) and in 59 of 60 on
# seeds never used to tune it (20 seeds on the same kernels; at seed 687856 on the
# default kernel the ``not`` column summed to 0.87 of the brightest, ``dull``'s). This
# run's two brightest:

_, words, panel = panels["flipping 'not'"]
received, top = panel.sum(0).topk(2)  # the two brightest columns  (2,) each
pairs = zip(received.tolist(), top.tolist(), strict=True)
print("middle panel:", ", ".join(f"{words[j]!r} {r:.2f}" for r, j in pairs))

# %%
# Over all held-out sentences of each kind, the weight a word puts, on average, on the
# signal word and on the ``not``:

not_ratio = {}  # kind -> weight on the 'not' / a uniform head's on one word
for kind, chosen in kinds.items():
    signal_share, not_share = (
        mean_over_queries(
            weight_on(held_out_weights[not_layer - 1], keys), real & chosen[:, None]
        )[not_head].item()
        for keys in (is_signal, is_not)
    )
    not_ratio[kind] = not_share / uniform_signal
    print(
        f"{kind:<18} ({int(chosen.sum()):3d} sentences): on the signal word "
        f"{signal_share:.2f}, on the 'not' {not_share:.2f}"
        + ("" if kind == "no 'not'" else f" ({not_ratio[kind]:.1f}x uniform)")
    )
print(f"(a uniform head: {uniform_signal:.2f} on any one word)")
# sphinx_gallery_start_ignore
claim(
    "flipping 'not': weight on the 'not' / uniform",
    not_ratio["flipping 'not'"],
    above=1.5,
)
# sphinx_gallery_end_ignore

# %%
# In sentences whose ``not`` flips the signal word, the ``not`` the label depends on,
# this head sends it well over the share a uniform head would (the ratio printed
# above). That does not make it a detector of the flipping ``not``: it was picked for
# its weight on every ``not``, the line for a distracting ``not`` is there to compare,
# and its weight on a ``not`` is not the same wherever the ``not`` stands (exercise 1
# measures it with the distracting ``not`` before the signal word and after it).
#
# Switching heads off: which heads does the model need?
# -----------------------------------------------------
#
# A heatmap says where a head reads from, not whether the model needs what it reads.
# To find out, switch the head off and measure what the model loses. Each block's
# attention concatenates its 4 heads into the input of ``out_proj``, head :math:`h` in
# the columns :math:`hD` to :math:`(h+1)D - 1`
# (:ref:`sphx_glr_tutorials_1_foundations_04_multi_head.py`).
# :func:`attention.ablation.head_ablated` replaces those columns while the model runs,
# with a *forward pre-hook* (PyTorch calls it with the module's inputs just before
# ``forward``, and uses what it returns instead), without editing the model.
#
# There are two ways to switch a head off. *Zero-ablation* replaces its output with
# zeros. *Mean-ablation* replaces it with the head's mean output over every position of
# the padded held-out batch, padding included (from
# :func:`attention.ablation.mean_head_outputs`), which keeps the average signal the
# later layers were trained to expect and removes only what depends on the sentence.
# Both, for each of the eight heads:

from attention.ablation import head_ablated, mean_head_outputs

H = model.blocks[0].self_attn.num_heads
lost = {"zero": {}, "mean": {}}  # ablation -> (layer, head) -> accuracy lost
for layer, block in enumerate(model.blocks, 1):
    means = mean_head_outputs(model, block.self_attn, held_out_tokens)  # (H, D)
    for head in range(H):
        for ablation, replacement in (("zero", None), ("mean", means[head])):
            with head_ablated(block.self_attn, head, replacement=replacement):
                ablated = accuracy(model, held_out_tokens, held_out_labels)
            lost[ablation][layer, head] = held_out_accuracy - ablated
# sphinx_gallery_start_ignore
# the hooks are gone
assert accuracy(model, held_out_tokens, held_out_labels) == held_out_accuracy

import numpy as np

fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
where = np.arange(len(lost["zero"]))
for offset, (ablation, drops) in zip((-0.2, 0.2), lost.items(), strict=True):
    ax.bar(where + offset, [100 * d for d in drops.values()], width=0.4, label=ablation)
ax.set_xticks(where, [f"layer {layer}\nhead {head}" for layer, head in lost["zero"]])
ax.set_xlabel("head switched off")
ax.set_ylabel("held-out accuracy lost (points)")
ax.legend(title="ablation")
ax.set_title("Head ablation: the accuracy lost without each head")
# sphinx_gallery_end_ignore
plt.show()

# %%
# The heads are far from equal. The most and least needed, and the ``not`` head:

most = max(lost["mean"], key=lost["mean"].get)  # (layer, head), by mean-ablation
least = min(lost["mean"], key=lost["mean"].get)
for name, (layer, head) in (
    ("most needed", most),
    ("least needed", least),
    ("the 'not' head", (not_layer, not_head)),
):
    print(
        f"{name + ':':<16} layer {layer}, head {head}: "
        f"{100 * lost['zero'][layer, head]:.1f} points zero-ablated, "
        f"{100 * lost['mean'][layer, head]:.1f} mean-ablated"
    )
ranking = sorted(lost["mean"], key=lost["mean"].get, reverse=True)  # most needed first
print(
    f"the 'not' head ranks {ranking.index((not_layer, not_head)) + 1} of "
    f"{len(ranking)} by points lost (mean-ablated)"
)
differences = [abs(lost["zero"][k] - lost["mean"][k]) for k in lost["zero"]]
print(
    f"largest difference between the two ablations: {100 * max(differences):.1f} points"
)
claim("most needed head, points lost (mean-ablated)", 100 * lost["mean"][most], above=5)
claim(
    "least needed head, points lost (mean-ablated)", 100 * lost["mean"][least], below=3
)
# sphinx_gallery_start_ignore
claim("most needed head, points lost (zero-ablated)", 100 * lost["zero"][most], above=5)
# sphinx_gallery_end_ignore

# %%
# Losing the most needed head costs many points, the least needed at most a few. Head by
# head the two ablations differ, by up to the points printed above: zero-ablation also
# removes the head's average output, which is the same for every sentence, so the
# mean-ablated number measures what the head contributes *sentence by sentence*, and
# the ranking above uses it.
#
# The ``not`` head, the clearest pattern in the heatmaps, need not be the head the
# model needs most: its cost and its rank among the eight are printed above. Where a
# head looks and how much the model needs it are separate measurements: a head can put
# its weight on the word the label turns on while other heads carry the same
# information, and then removing it costs little.
#
# The model in your browser
# -------------------------
#
# The site's build exports this classifier to ONNX with
# :func:`attention.export.export_onnx` and checks that ONNX Runtime gives its logits to
# within :math:`10^{-4}`. On the site it runs in your browser (ONNX Runtime Web, about
# 15 MB, loaded only when you start it): type a sentence in the task's words, see the
# prediction, and focus a word to see where each head of each layer looks from it.
#
# .. widget:: classifier
#    :model: sentiment
#
# What to remember
# ----------------
#
# - :func:`attention.plot_attention` draws an :math:`(L, S)` map, or an
#   :math:`(H, L, S)` stack as a grid of heads on one colour scale, queries down the
#   side, keys along the bottom.
# - Measure a pattern over many sentences before believing one heatmap. Here one head
#   sends the ``not`` s more than twice a uniform share; second-layer heads read
#   positions that already mix words, so their maps are harder to read as word-to-word
#   links.
# - Ablation answers what a heatmap cannot: whether the model needs a head. Prefer
#   mean-ablation, which removes what a head reads in each input and keeps its average.
#
# API used on this page: :func:`attention.plot_attention`,
# :class:`attention.AttentionClassifier`,
# :func:`attention.recipes.fit_sentiment_classifier`,
# :func:`attention.training.accuracy`, :func:`attention.ablation.head_ablated`,
# :func:`attention.ablation.mean_head_outputs`, :func:`attention.data.encode` and
# :func:`attention.data.decode`.

# %%
# Exercises
# ---------
#
# 1. **The adjacent 'not', or the earlier one?** In the sentences with both kinds of
#    ``not``, measure, for every head, the weight the signal word's query puts on the
#    flipping ``not`` and on the distracting one, separately for the sentences where
#    the distracting ``not`` stands before the signal word and those where it stands
#    after. A head that prefers the ``not`` next to the signal word prefers it in both
#    groups; what does a head that prefers the earlier ``not`` do?
# 2. **Switch a head off in the weights.** ``head_ablated`` replaces a head's columns of
#    the *input* of ``out_proj``. Zero-ablate the most needed head in a copy of the
#    model instead, by zeroing the matching columns of ``out_proj.weight``, and check
#    that both give the same logits on the held-out set.

# %%
# .. solution 1
#
# A head that prefers the earlier ``not`` puts more weight on the distracting ``not``
# when it comes first, and on the flipping one when it comes second: its preference
# swaps between the two groups, and averaged over both it can still look like a
# preference for the adjacent ``not``. Find in the rows below the head that the
# ablation found most needed: if it prefers the earlier ``not``, its two numbers swap
# between the two groups.

position = torch.arange(held_out_tokens.shape[1], device=device)  # (L,)
signal_at = (is_signal * position).sum(1)  # (N,)
distracting_at = (distracting * position).sum(1)  # (N,)
both = flips & distracts  # sentences with both kinds of 'not'  (N,)
groups = {
    "before": both & (distracting_at < signal_at),
    "after": both & (distracting_at > signal_at),
}
print("signal word's weight on: flipping / distracting 'not'")
print("                  distracting before    distracting after")
for layer, w in enumerate(held_out_weights, 1):
    shares = {
        group: [
            mean_over_queries(weight_on(w, keys), is_signal & chosen[:, None])
            for keys in (flipping, distracting)
        ]
        for group, chosen in groups.items()
    }  # group -> [flipping (H,), distracting (H,)]
    for head in range(H):
        cells = [f"{f[head]:.2f} / {d[head]:.2f}" for f, d in shares.values()]
        print(f"layer {layer}, head {head}   {cells[0]:>18}   {cells[1]:>18}")
print(f"({int(groups['before'].sum())} and {int(groups['after'].sum())} sentences)")

# %%
# .. solution 2
#
# Column :math:`j` of ``out_proj.weight`` multiplies input feature :math:`j`, so zeroing
# the column removes the same term of the sum as zeroing the feature.

import copy

layer, head = most
pruned = copy.deepcopy(model)
pruned_attn = pruned.blocks[layer - 1].self_attn
D = pruned_attn.head_dim
with torch.no_grad():
    pruned_attn.out_proj.weight[:, head * D : (head + 1) * D] = 0
    with head_ablated(model.blocks[layer - 1].self_attn, head):
        hooked_logits = model(held_out_tokens)[0]  # (N, C)
    pruned_logits = pruned(held_out_tokens)[0]  # (N, C)
print(
    f"layer {layer}, head {head} off, hook against weights: logits differ by up to "
    f"{(hooked_logits - pruned_logits).abs().max():.1e}; accuracy "
    f"{accuracy(pruned, held_out_tokens, held_out_labels):.1%}"
)
assert torch.allclose(hooked_logits, pruned_logits, atol=1e-5)

# %%
# Next: :ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py` trains a
# decoder, whose heads learn to copy.

# sphinx_gallery_thumbnail_number = 3
