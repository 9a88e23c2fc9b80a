"""
Reading attention: heatmaps, entropy and ablation
=================================================

.. prerequisites:: 04_multi_head 10_classifier
   :summary: The trained classifier read: heatmaps, what each head does over a thousand
      sentences, where it learned word order, and which heads it needs.

Attention weights are one of the few parts of a network that can be read directly: for
every query token, a probability distribution over the key tokens. This page reads the
sentiment classifier trained in
:ref:`sphx_glr_tutorials_3_training_and_reading_10_classifier.py`. It draws the weights
as heatmaps with :func:`attention.plot_attention`, first for an untrained model of the
same shape, whose heads spread their weight (and the reason why), then for the trained
one; it measures what each head does over a thousand held-out sentences, rather than
trusting one picture; it takes the positional encoding away to test where the model
learned word order; and it switches the heads off one at a time to find those the
model needs.
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
# Before training: spread over every word
# ---------------------------------------
#
# A freshly initialised :class:`attention.AttentionClassifier` of the trained model's
# shape (``embed_dim=32``, 4 heads, 2 layers). Asked with ``need_weights=True``, it
# returns one :math:`(N, H, L, L)` tensor per layer; here are the four heads of the
# first layer:

import matplotlib.pyplot as plt

from attention import AttentionClassifier, plot_attention

shape = {"embed_dim": 32, "num_heads": 4, "num_layers": 2, "max_len": 12}
untrained = AttentionClassifier(len(VOCAB), len(CLASSES), **shape, dropout=0.0)
untrained = untrained.to(device).eval()
with torch.no_grad():
    _, untrained_weights = untrained(example, need_weights=True)
plot_attention(
    untrained_weights[0][0],
    x_tokens=sentence,
    title="Untrained classifier, layer 1, per head",
    vmax=1.0,  # the scale of the trained model's figures below
)
plt.show()
first_layer = untrained_weights[0][0]  # (H, L, S)
print(
    f"weights between {first_layer.min():.2f} and {first_layer.max():.2f}; "
    f"uniform would be 1/{len(sentence)} = {1 / len(sentence):.2f}"
)
claim("untrained, largest weight on the example", first_layer.max(), below=0.4)

# %%
# The colour scale runs from 0 to 1, as in the trained model's figures below, and every
# cell is dark: no weight comes near the 0.8 to 1 of a head that focuses on one word.
# Nor are the weights equal: some are several times others (the range printed above).
# To measure how spread out a row is, over many sentences, take
# its entropy, :math:`-\sum_j w_j \log w_j`, and divide it by its largest possible
# value, :math:`\log n` for a row spread evenly over the :math:`n` real (non-padding)
# keys. The ratio is 1 for a uniform row and 0 for a row that puts all its weight on
# one key.

from attention.data import make_dataset


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


sample_tokens, _ = make_dataset(1000, seed=0)
sample_tokens = sample_tokens.to(device)
sample_real = sample_tokens != PAD_ID  # (N, L)
with torch.no_grad():
    _, sample_weights = untrained(sample_tokens, need_weights=True)
before = torch.stack(
    [
        mean_over_queries(relative_entropy(w, sample_real), sample_real)
        for w in sample_weights
    ]
)  # (layers, H)
print("untrained, entropy / uniform maximum, per head:")
for layer, row in enumerate(before, 1):
    print(f"  layer {layer}: " + "  ".join(f"{v:.3f}" for v in row.tolist()))
claim("untrained, lowest relative entropy of a head", before.min(), above=0.95)

# %%
# By this measure every head of both layers is within 5% of uniform (the values printed
# above): entropy changes little while no weight dominates its row, even when some
# weights are several times others. The reason for the spread is the size of the
# scores. Softmax turns scores :math:`s_j` into weights proportional to
# :math:`e^{s_j}`, so the weights are only as uneven as the scores are spread: scores
# that differ by 0.5 give weights that differ by a factor :math:`e^{0.5} \approx 1.6`.
# At initialisation ``nn.Linear`` draws each weight uniformly from
# :math:`\pm 1/\sqrt{E}`, so the queries and keys are small, random and unrelated, and
# their scaled dot products are small and similar. Because
# :math:`\log w_j = s_j - \log\sum_k e^{s_k}`, the spread of the scores in a row can be
# read off the weights themselves:


def score_spread(weights, real):
    """Largest minus smallest score of each query row, over the real keys: (N, H, L)."""
    log_w = weights.clamp_min(1e-30).log()  # equals the score minus a per-row constant
    keys = real[:, None, None, :]  # (N, 1, 1, L)
    largest = log_w.masked_fill(~keys, -torch.inf).amax(-1)
    smallest = log_w.masked_fill(~keys, torch.inf).amin(-1)
    return largest - smallest


spread = torch.cat(
    [
        mean_over_queries(score_spread(w, sample_real), sample_real)
        for w in sample_weights
    ]
)
print(
    "untrained: largest minus smallest score in a row, mean over heads "
    f"{spread.mean():.2f}"
)
print(
    f"so the most-attended key gets about {spread.mean().exp():.1f}x the "
    "least-attended one"
)
claim("untrained, mean score spread in a row", spread.mean(), below=1.5)

# %%
# After training: heads with a job
# --------------------------------
#
# The same sentence through the trained model, first layer:

with torch.no_grad():
    logits, example_weights = model(example, need_weights=True)
prediction = CLASSES[logits.argmax(-1).item()]
print(f"{' '.join(sentence)!r} -> {prediction}")
claim(
    "P(negative) for the example sentence",
    logits.softmax(-1)[0, CLASSES.index("negative")],
    above=0.5,
)

plot_attention(
    example_weights[0][0],
    x_tokens=sentence,
    title="Trained classifier, layer 1, per head",
    vmax=1.0,
)
plt.show()
row_max_1 = (
    example_weights[0][0].amax(-1).mean(-1)
)  # mean largest weight of a row  (H,)
print(
    "layer 1, largest weight of a row, mean over the rows: "
    + ", ".join(f"head {h} {v:.2f}" for h, v in enumerate(row_max_1.tolist()))
    + f" (uniform {1 / len(sentence):.2f})"
)
print(f"the sharpest head: {row_max_1.max() * len(sentence):.1f}x the uniform share")
claim(
    "layer 1, sharpest head's mean row maximum x L",
    row_max_1.max() * len(sentence),
    above=2.0,
)

# %%
# On the same colour scale as the untrained model's figure, the heads differ from each
# other, and the sharpest gives each word's favourite key more than twice the uniform
# share (the ratio is the last line printed above). A single sentence can mislead,
# though, so a later section measures these patterns over the 1000 held-out sentences.
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
claim("layer 2, fraction of rows above 0.5", one_cell, above=0.4)

# %%
# Many rows are a single bright cell (the share printed above). Reading them word by
# word is less direct than in the first layer: the second layer's keys are the first
# layer's *outputs*, and each of those already mixes in the words it attended to. A
# column labelled ``not`` in layer 2 is the vector at that position after layer 1: the
# ``not`` plus what it gathered there.
#
# What the heads do, measured over the held-out set
# -------------------------------------------------
#
# For every head, three measurements averaged over the real query positions of the
# held-out sentences, next to what a uniform head would give:
#
# - *entropy*: the relative entropy from above (1 = uniform, lower = sharper);
# - *on "not"*: the total weight a word puts on the ``not`` s of its sentence
#   (sentences that contain one);
# - *on signal*: the weight a word puts on the signal word.

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


def weight_on(weights, keys):
    """
    Total weight each query puts on the keys where ``keys`` (N, L) is True: (N, H, L).
    """
    return (weights * keys[:, None, None, :]).sum(-1)


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
# Training made the heads sharper than the untrained model's (whose relative entropy
# was above 0.95 for every head): much sharper on average, some heads much more than
# others; the table says which layer is the sharper in this run. Over the eight heads:

after = torch.tensor([[stats[layer, h][0] for h in range(4)] for layer in (1, 2)])
ratio = after / before.cpu()  # (2, H): relative entropy after training / before
print(
    f"relative entropy, mean over heads: layer 1 {after[0].mean():.3f}, "
    f"layer 2 {after[1].mean():.3f}"
)
print(
    f"relative entropy after / before training: mean over the heads "
    f"{ratio.mean():.2f}, highest {ratio.max():.2f}"
)
claim("mean entropy after / before training", ratio.mean(), below=0.85)

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

fig, axes = plt.subplots(1, 3, figsize=(9, 3.5), layout="constrained")
for ax, (kind, chosen) in zip(axes, kinds.items(), strict=True):
    right = chosen & (probabilities.argmax(-1) == held_out_labels)  # (N,)
    i = int(right.nonzero()[0])  # the first sentence of this kind classified right
    words, n = decode(held_out_tokens[i]), int(real[i].sum())
    panel = held_out_weights[not_layer - 1][i, not_head, :n, :n]  # (L, S)
    plot_attention(panel, x_tokens=words, ax=ax, vmax=1.0)
    ax.images[0].colorbar.remove()  # one colour bar for the three, drawn below
    predicted = int(probabilities[i].argmax())
    ax.set_title(
        f"{kind}\npredicted {CLASSES[predicted]} ({probabilities[i, predicted]:.0%})",
        fontsize=10,
    )
    if kind == "flipping 'not'":
        columns = panel.sum(0)  # the weight each key receives  (S,)
        not_column = columns[words.index("not")]
        others = columns[[w != "not" for w in words]]
        claim(
            "flipping 'not' column / the next brightest",
            not_column / others.max(),
            above=1,
        )
# the colour bar as tall as the panels, next to the last one
colour_bar = axes[-1].inset_axes([1.06, 0.0, 0.07, 1.0])
fig.colorbar(axes[-1].images[0], cax=colour_bar, label="attention weight")
fig.suptitle(f"Layer {not_layer}, head {not_head} on three held-out sentences")
plt.show()

# %%
# Each panel's title gives the model's prediction and its confidence. In the middle
# panel the ``not`` that flips the signal word has the brightest column. Over all
# held-out sentences of each kind, the weight a word puts, on average, on the signal
# word and on the ``not``:

for kind, chosen in kinds.items():
    signal_share, not_share = (
        mean_over_queries(
            weight_on(held_out_weights[not_layer - 1], keys), real & chosen[:, None]
        )[not_head].item()
        for keys in (is_signal, is_not)
    )
    not_ratio = not_share / uniform_signal
    print(
        f"{kind:<18} ({int(chosen.sum()):3d} sentences): on the signal word "
        f"{signal_share:.2f}, on the 'not' {not_share:.2f}"
        + ("" if kind == "no 'not'" else f" ({not_ratio:.1f}x uniform)")
    )
    if kind == "flipping 'not'":
        claim(f"{kind}: weight on the 'not' / uniform", not_ratio, above=1.5)
print(f"(a uniform head: {uniform_signal:.2f} on any one word)")

# %%
# In sentences whose ``not`` flips the signal word, the ``not`` the label depends on,
# this head sends it well over the share a uniform head would (the ratio printed above).
# The line for a distracting ``not`` is there to compare, and the page claims nothing
# about it: the head was picked for its weight on the ``not`` s of all sentences, which
# does not ask it to treat both kinds alike. Where it looks in a sentence without a
# flipping ``not`` (the first and third panels) is not what it was picked for either.
# Nor is its weight on a ``not`` the same wherever the ``not`` stands: exercise 2
# measures it with the distracting ``not`` before the signal word and after it. The
# next section takes the positions away and measures what the head still finds.
#
# Where the model learns word order
# ---------------------------------
#
# Finding a ``not`` is half the task; the label depends on whether it stands *right
# before* the signal word. Attention by itself ignores order: permute the tokens and the
# weights and outputs permute with them (exercise 1 checks it). The only part of this
# model that depends on where a word stands is the positional encoding, added to each
# token before the first layer. So take it away, and see what the model still knows:
# replace the vector of every position by the mean of all of them (*mean-ablation*:
# every token still gets the average position vector added, and nothing tells the
# positions apart any more; zeroing the vectors instead, *zero-ablation*, also moves
# every input away from the values the blocks were trained on). The ablated models are
# copies; ``pe`` is the :math:`(\text{max\_len}, E)` table of
# :class:`attention.PositionalEncoding`, one row per position:

import copy

pe = model.positions.pe  # (max_len, E)
no_order = copy.deepcopy(model)
no_order.positions.pe = pe.mean(0, keepdim=True).expand_as(pe).clone()  # (max_len, E)
zeroed = copy.deepcopy(model)
zeroed.positions.pe = torch.zeros_like(pe)  # (max_len, E)
with torch.no_grad():
    no_order_logits, no_order_weights = no_order(held_out_tokens, need_weights=True)
    zeroed_logits = zeroed(held_out_tokens)[0]  # (N, C)
predictions = {
    "model": held_out_logits.argmax(-1),  # (N,)
    "positions mean": no_order_logits.argmax(-1),
    "positions zeroed": zeroed_logits.argmax(-1),
}

# %%
# Next to them, the best rule blind to word order, from the previous page: a ``not``
# flips the signal word (always wrong on a sentence whose only ``not`` distracts, right
# on the others). The held-out accuracy by kind of sentence, and the sum of the two
# kinds with one ``not``:

signal_positive = torch.isin(
    held_out_tokens, torch.tensor([VOCAB.index(w) for w in POSITIVE], device=device)
).any(1)  # (N,)
predictions["order-blind rule"] = (signal_positive != has_not).long()  # (N,)
kinds["both"] = flips & distracts
print(f"{'kind':<18}  " + "".join(f"{name:>18}" for name in predictions))
for kind, chosen in kinds.items():
    print(
        f"{kind:<18}  "
        + "".join(
            f"{(p == held_out_labels)[chosen].float().mean():18.1%}"
            for p in predictions.values()
        )
    )
one_not = {
    name: sum(
        (p == held_out_labels)[kinds[kind]].float().mean().item()
        for kind in ("flipping 'not'", "distracting 'not'")
    )
    for name, p in predictions.items()
}
print(f"{'flipping + distr.':<18}  " + "".join(f"{v:18.1%}" for v in one_not.values()))
right_without = {
    kind: (predictions["positions mean"] == held_out_labels)[chosen].float().mean()
    for kind, chosen in kinds.items()
}
claim(
    "model, accuracy with a flipping + with a distracting 'not'",
    one_not["model"],
    above=1.5,
)
claim(
    "no positions, accuracy with a flipping + with a distracting 'not'",
    one_not["positions mean"],
    above=0.85,
    below=1.15,
)
claim("no positions, accuracy with no 'not'", right_without["no 'not'"], above=0.95)

# %%
# A sentence with one ``not`` and the same sentence with that ``not`` moved have the
# same words and opposite labels. Without the positions the model sees no difference
# between them, so whatever it answers, it is right on one and wrong on the other: its
# accuracies on the two kinds add up to about 100% (the last line), where the trained
# model, with the positions, gets most of both kinds right: its two accuracies add up to
# more than 150%. The order-blind rule is one way to make that trade, all flipping
# sentences right and all distracting ones wrong; which side the ablated model takes,
# and how far, is in its column. The control is in the same table: the sentences with no
# ``not``, whose label the words alone decide, stay right, so what the ablation removed
# is the order and not the model's other skills. Sentences with both kinds hang on what
# the model makes of two ``not`` s that now look alike, and the page claims nothing
# about them. Zeroing the positions removes the order too, but also moves every input
# off the values the blocks were trained on; its column shows what, if anything, that
# costs in this run.
#
# Inside the heads it is the same story. Without positions the two ``not`` s of a
# sentence enter the first layer as the same vector, so every query of every head, in
# both layers, must give them the same weight. The ``not`` head still sends the
# ``not`` s more than a uniform share: part of what it finds, it finds by the word
# alone.

both = kinds["both"]
not_gaps = [
    weight_on(w[both], flipping[both]) - weight_on(w[both], distracting[both])
    for w in no_order_weights  # per layer: (n, H, L, L) -> (n, H, L)
]
largest_difference = max(d.abs().max().item() for d in not_gaps)
print(
    "without positions, |weight on the flipping 'not' - on the distracting one|, "
    f"largest over {int(both.sum())} sentences, all queries and heads: "
    f"{largest_difference:.1e}"
)
assert largest_difference < 1e-5
on_not_without = mean_over_queries(
    weight_on(no_order_weights[not_layer - 1], is_not), real & has_not[:, None]
)[not_head].item()
print(
    f"the 'not' head without positions: {on_not_without:.2f} of a word's weight on the "
    f"'not's ({on_not_without / uniform_not:.1f}x uniform; with positions {on_not:.2f})"
)
claim(
    "'not' head without positions, on 'not's / uniform",
    on_not_without / uniform_not,
    above=1.5,
)

# %%
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
# ``forward``, and uses what it returns instead), without editing the model:
#
# .. literalinclude:: ../../../attention/ablation.py
#    :language: python
#    :pyobject: head_ablated
#
# As with the positions, there are two ways to switch a head off. *Zero-ablation*
# replaces its output with zeros. *Mean-ablation* replaces it with the head's mean
# output over every position of the held-out sentences (from
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
# the hooks are gone
assert accuracy(model, held_out_tokens, held_out_labels) == held_out_accuracy

print("accuracy points lost without the head:")
print("                  zero-ablated   mean-ablated")
for key in lost["zero"]:
    print(
        f"layer {key[0]}, head {key[1]}   {100 * lost['zero'][key]:8.1f}"
        f"       {100 * lost['mean'][key]:8.1f}"
    )

# %%

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
plt.show()

# %%
# The heads are far from equal. The most and least needed, and the heads read above:

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
layer, head = max(lost["zero"], key=lost["zero"].get)
print(f"most needed by zero-ablation: layer {layer}, head {head}")
differences = [abs(lost["zero"][k] - lost["mean"][k]) for k in lost["zero"]]
print(
    f"largest difference between the two ablations: {100 * max(differences):.1f} points"
)
claim("most needed head, points lost (mean-ablated)", 100 * lost["mean"][most], above=5)
claim("most needed head, points lost (zero-ablated)", 100 * lost["zero"][most], above=5)
claim(
    "least needed head, points lost (mean-ablated)", 100 * lost["mean"][least], below=3
)

# %%
# Losing the most needed head costs many points, the least needed at most a few. Head by
# head the two ablations differ, by up to the points printed above, and where two heads
# cost nearly the same, the two columns can rank them differently. The difference comes
# from the head's average output, which zero-ablation removes too although it is the
# same for every sentence: the mean-ablated number measures what the head contributes
# *sentence by sentence*, and the ranking above uses it.
#
# The ``not`` head, the clearest pattern in the heatmaps, is ranked like the others:
# its cost and its rank among the eight are printed above. Where a head looks and how
# much the model needs it are separate measurements: a head can put its weight on the
# word the label turns on while other heads carry the same information, and then
# removing it costs little.
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
# - An untrained model spreads its attention over every word: its scores are small,
#   and softmax of nearly equal scores is nearly flat. Relative entropy (1 = uniform)
#   measures it.
# - Measure a pattern over many sentences before believing one heatmap. Here one head
#   sends the ``not`` s more than twice a uniform share, and still more than 1.5 times
#   it with the positions taken away; second-layer heads read positions that
#   already mix words, so their maps are harder to read as word-to-word links.
# - Word order enters through the positional encoding only: with the positions
#   mean-ablated, the model cannot tell a flipping ``not`` from a distracting one (its
#   accuracies on the two add up to about 100%), and the sentences without a ``not``
#   (the control) stay right.
# - Ablation answers what a heatmap cannot: whether the model needs a head. Prefer
#   mean-ablation, which removes what a head reads in each input and keeps its average.
#
# API used on this page: :func:`attention.plot_attention`,
# :class:`attention.AttentionClassifier`, :class:`attention.PositionalEncoding`,
# :func:`attention.recipes.fit_sentiment_classifier`,
# :func:`attention.training.accuracy`, :func:`attention.ablation.head_ablated`,
# :func:`attention.ablation.mean_head_outputs`, :func:`attention.data.encode`,
# :func:`attention.data.decode`, :func:`attention.data.make_dataset`,
# :func:`attention.masks.to_torch_key_padding_mask` and
# :class:`attention.MultiHeadAttention` (each block's ``self_attn``).

# %%
# Exercises
# ---------
#
# 1. **Order is invisible to attention.** Feed layer 2's attention
#    (``model.blocks[1].self_attn``) the input it receives for the example sentence
#    (capture it with a forward pre-hook), once as it is and once with the positions
#    reversed. Predict how the second call's weights and outputs relate to the first
#    call's, and check it.
# 2. **The adjacent 'not', or the earlier one?** In the sentences with both kinds of
#    ``not``, measure, for every head, the weight the signal word's query puts on the
#    flipping ``not`` and on the distracting one, separately for the sentences where
#    the distracting ``not`` stands before the signal word and those where it stands
#    after. A head that prefers the ``not`` next to the signal word prefers it in both
#    groups; what does a head that prefers the earlier ``not`` do?
# 3. **Switch a head off in the weights.** ``head_ablated`` replaces a head's columns of
#    the *input* of ``out_proj``. Zero-ablate the most needed head in a copy of the
#    model instead, by zeroing the matching columns of ``out_proj.weight``, and check
#    that both give the same logits on the held-out set.

# %%
# .. solution 1
#
# Reversing the positions reverses the rows and the columns of every head's weights,
# and the rows of the output: attention itself sees a set of tokens, not a sequence.
# Only the positional encoding, added before layer 1, tells the model the order. A
# forward pre-hook, as in ``head_ablated``, records the input of layer 2's attention:

attn = model.blocks[1].self_attn
captured = []  # the input of layer 2's attention, recorded by the hook
handle = attn.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
with torch.no_grad():
    model(example)
handle.remove()
x = captured[0]  # (1, L, E)
with torch.no_grad():
    out_forward, w_forward = attn(x)  # (1, L, E), (1, H, L, L)
    out_reversed, w_reversed = attn(x.flip(1))
weights_gap = (w_reversed - w_forward.flip(-2, -1)).abs().max().item()
outputs_gap = (out_reversed - out_forward.flip(1)).abs().max().item()
print(
    f"reversed input against the reversed results: weights differ by {weights_gap:.1e}"
    f", outputs by {outputs_gap:.1e}"
)
assert torch.allclose(w_reversed, w_forward.flip(-2, -1), atol=1e-5)
assert torch.allclose(out_reversed, out_forward.flip(1), atol=1e-5)

# %%
# .. solution 2
#
# A head that prefers the earlier ``not`` puts more weight on the distracting ``not``
# when it comes first, and on the flipping one when it comes second: its preference
# swaps between the two groups, and averaged over both it can still look like a
# preference for the adjacent ``not``. Read the rows below with that in mind: the
# model needs the order somewhere (the ablation of the positions showed it), but not
# necessarily in one head's weights. Find in the rows below the head that the ablation
# found most needed: if it prefers the earlier ``not``, its two numbers swap between the
# two groups.

position = torch.arange(held_out_tokens.shape[1], device=device)  # (L,)
signal_at = (is_signal * position).sum(1)  # (N,)
distracting_at = (distracting * position).sum(1)  # (N,)
groups = {
    "before": kinds["both"] & (distracting_at < signal_at),
    "after": kinds["both"] & (distracting_at > signal_at),
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
# .. solution 3
#
# Column :math:`j` of ``out_proj.weight`` multiplies input feature :math:`j`, so zeroing
# the column removes the same term of the sum as zeroing the feature.

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

# sphinx_gallery_thumbnail_number = 4
