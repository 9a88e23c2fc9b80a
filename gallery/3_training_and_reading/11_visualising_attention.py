"""
Visualising attention
=====================

.. prerequisites:: 04_multi_head 07_transformer_block

Attention weights are one of the few parts of a network that can be read directly: for
every query token, a probability distribution over the key tokens. This page draws them
as heatmaps with :func:`attention.plot_attention`, first for an untrained model, whose
heads attend almost uniformly (and the reason why), then for a small sentiment
classifier trained here on the CPU, whose heads have learned to look at the words that
decide the label. It measures what the heads do over a thousand held-out sentences,
rather than trusting one picture, and shows what is lost when the heads are averaged
into one map, as ``nn.MultiheadAttention`` does by default.

The classifier itself is the subject of
:ref:`sphx_glr_tutorials_11_classifier.py`.
"""

# %%
# Setup
# -----

import torch

from attention.repro import claim, default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else "cuda" if there is a GPU, else "cpu"
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# Drawing attention weights
# -------------------------
#
# A multi-head module returns its weights as an :math:`(N, H, L, S)` tensor: for each
# sentence and head, one row per query and one column per key, each row summing to 1.
# :func:`attention.plot_attention` draws one :math:`(L, S)` matrix as a heatmap, or an
# :math:`(H, L, S)` stack as a grid of heads, queries down the side and keys along the
# bottom. Its drawing part:
#
# .. literalinclude:: ../../attention/viz.py
#    :language: python
#    :pyobject: plot_attention
#    :start-at: panels = weights[None]
#    :end-at: return fig
#    :dedent: 4
#
# All panels of a grid share one colour scale (its top, ``top``, is the largest weight
# of the whole stack unless ``vmax`` is given), so a bright cell means the same weight
# in every head.
#
# The sentences come from :mod:`attention.data`: filler words, one *signal* word
# (``good``, ``awful``, ...) and sometimes ``not``; the label is the signal word's
# sentiment, flipped when ``not`` stands right before it. Here is one sentence with both
# kinds of ``not``: one right before the signal word, which flips it, and one elsewhere,
# which does not.

from attention.data import CLASSES, NEGATIVE, PAD_ID, POSITIVE, VOCAB, encode

sentence = "the movie was not good and not the music".split()
example = encode(sentence)[None].to(device)  # (1, L)
print(f"{' '.join(sentence)!r}: {len(sentence)} tokens")

# %%
# Before training: almost uniform
# -------------------------------
#
# A freshly initialised :class:`attention.AttentionClassifier` of the shape trained
# below (``embed_dim=32``, 4 heads, 2 layers). Asked with ``need_weights=True``, it
# returns one :math:`(N, H, L, L)` tensor per layer; here are the four heads of the
# first layer:

import matplotlib.pyplot as plt

from attention import AttentionClassifier, plot_attention

shape = {
    "embed_dim": 32,
    "num_heads": 4,
    "num_layers": 2,
    "max_len": 12,
    "dropout": 0.0,
}
untrained = AttentionClassifier(len(VOCAB), len(CLASSES), **shape).to(device).eval()
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
claim(
    "untrained, largest weight x L (uniform: 1)",
    first_layer.max() * len(sentence),
    below=3,
)

# %%
# The colour scale runs from 0 to 1, as in the trained model's figures below, and every
# cell is dark: every weight lies in the range printed above, nowhere near the 0.8 to 1
# of a head that focuses on one word. Each word spreads its attention over all nine
# words, somewhat unevenly. To measure "close to uniform" over many sentences, take the
# entropy of each row, :math:`-\sum_j w_j \log w_j`, and divide it by its largest
# possible value, :math:`\log n` for a row spread evenly over the :math:`n` real
# (non-padding) keys. The ratio is 1 for a uniform row and 0 for a row that puts all its
# weight on one key.

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
# Every head of both layers is within a few percent of uniform (the values printed
# above). The reason is the size of the scores. Softmax turns scores :math:`s_j` into
# weights proportional to :math:`e^{s_j}`, so the weights are only as uneven as the
# scores are spread: scores that differ by 0.5 give weights that differ by a factor
# :math:`e^{0.5} \approx 1.6`. At initialisation ``nn.Linear`` draws each weight
# uniformly from :math:`\pm 1/\sqrt{E}`, so the queries and keys are small, random and
# unrelated, and their scaled dot products are small and similar. Because
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
# Training the classifier
# -----------------------
#
# :func:`attention.training.fit_sentiment_classifier` trains a classifier of the shape
# above on 4000 generated sentences and returns the model, its history and 1000 held-out
# sentences (:ref:`sphx_glr_tutorials_11_classifier.py` walks through the recipe). It
# runs on the CPU, one line per epoch. It trains on one thread, but the model still
# depends on the machine: the processor's vector instructions round sums differently,
# and over hundreds of training steps the rounding differences grow into a visibly
# different model. So the heads below are picked by what they do, never by their number,
# and every claim is checked for ten seeds (``ATTENTION_SEED``) on each instruction set.

from attention.training import accuracy, fit_sentiment_classifier

model, history, (held_out_tokens, held_out_labels) = fit_sentiment_classifier(seed=seed)
model = model.to(device)
held_out_tokens, held_out_labels = (
    held_out_tokens.to(device),
    held_out_labels.to(device),
)
held_out_accuracy = accuracy(model, held_out_tokens, held_out_labels)
print(f"held-out accuracy {held_out_accuracy:.1%}")
claim("held-out accuracy", held_out_accuracy, above=0.85)

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
# sphinx_gallery_start_ignore
example_is_not = example[0] == VOCAB.index("not")  # (L,)
row_max_1 = example_weights[0][0].amax(-1).mean(-1)  # per head  (H,)
# uniform: 1 / L; 1.5 / L held for every seed and capability swept, 0.4 did not
claim(
    "layer 1, sharpest head's mean row maximum",
    row_max_1.max(),
    above=1.5 / len(sentence),
)
# sphinx_gallery_end_ignore

# %%
# On the same colour scale as the untrained model's figure, the even spread is gone: the
# heads differ from each other, and the sharpest gives each word's favourite key well
# over a uniform share of :math:`1/9`; in many runs most of each row goes to a few
# words, in some the first layer stays fairly spread. A single sentence can mislead,
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
# sphinx_gallery_start_ignore
# rows with one bright cell
one_cell = (example_weights[1][0].amax(-1) > 0.5).float().mean()
claim("layer 2, fraction of rows above 0.5", one_cell, above=0.4)
# sphinx_gallery_end_ignore

# %%
# Many rows are a single bright cell (over half of them, in most runs). Reading them
# word by word is less direct than in the first layer: the second layer's keys are the
# first layer's *outputs*, and each of those already mixes in the words it attended to.
# A column labelled ``not`` in layer 2 is the vector at that position after layer 1:
# the ``not`` plus what it gathered there.
#
# What the heads do, measured over the held-out set
# -------------------------------------------------
#
# For every head, four measurements averaged over the held-out sentences, next to what a
# uniform head would give:
#
# - *entropy*: the relative entropy from above (1 = uniform, lower = sharper);
# - *on "not"*: the total weight every word puts on the ``not`` s of its sentence
#   (sentences that contain one);
# - *on signal*: the weight every word puts on the signal word;
# - *signal on its "not" / on the other*: in sentences with both kinds of ``not``, the
#   weight the signal word's own query puts on the ``not`` right before it, and on the
#   distracting one.

with torch.no_grad():
    _, held_out_weights = model(held_out_tokens, need_weights=True)

signal_ids = torch.tensor([VOCAB.index(w) for w in POSITIVE + NEGATIVE], device=device)
real = held_out_tokens != PAD_ID  # (N, L)
is_signal = torch.isin(held_out_tokens, signal_ids)  # exactly one per sentence  (N, L)
is_not = held_out_tokens == VOCAB.index("not")  # (N, L)
flipping = torch.zeros_like(is_not)
# the "not" right before the signal
flipping[:, :-1] = is_not[:, :-1] & is_signal[:, 1:]
distracting = is_not & ~flipping
has_not, has_both = is_not.any(1), flipping.any(1) & distracting.any(1)  # (N,)


def weight_on(weights, keys):
    """
    Total weight each query puts on the keys where ``keys`` (N, L) is True: (N, H, L).
    """
    return (weights * keys[:, None, None, :]).sum(-1)


def mean_from(values, queries, sentences):
    """Average (N, H, L) values over the ``queries`` (N, L) of the chosen ``sentences``
    (N,).
    """
    return mean_over_queries(values, queries & sentences[:, None])


n_real = real.sum(1).float()  # sentence lengths  (N,)
uniform_not = (is_not.sum(1) / n_real)[has_not].mean().item()
uniform_signal = (1 / n_real).mean().item()
everyone = torch.ones_like(has_not)
stats = {}  # (layer, head) -> the four columns
for layer, w in enumerate(held_out_weights, 1):
    columns = (
        mean_over_queries(relative_entropy(w, real), real),
        mean_from(weight_on(w, is_not), real, has_not),
        mean_from(weight_on(w, is_signal), real, everyone),
        mean_from(weight_on(w, flipping), is_signal, has_both),
        mean_from(weight_on(w, distracting), is_signal, has_both),
    )
    for head, values in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        stats[layer, head] = values

print(
    f"{len(held_out_tokens)} held-out sentences, {int(has_both.sum())} with both kinds "
    "of 'not'"
)
print("                       entropy  on      on       signal on:")
print("                                'not'   signal   its 'not'  the other")
print(f"uniform head           1.000    {uniform_not:.3f}   {uniform_signal:.3f}")
for (layer, head), (sharp, on_not, on_signal, own, other) in stats.items():
    print(
        f"layer {layer}, head {head}:      {sharp:.3f}    {on_not:.3f}   "
        f"{on_signal:.3f}"
        f"    {own:.3f}      {other:.3f}"
    )

# %%
# Three things stand out in the table printed above.
#
# Training made the heads sharper than the untrained model's (whose relative entropy
# was above 0.95 for every head): on average over the eight heads by a wide margin,
# though in some runs a head of the first layer stays almost as spread as before. Which
# layer ends up the sharper depends on the run too: the second, in most of the seeds
# that the claims sweep tried, but not in all of them, so this page compares the two
# without claiming an order:

after = torch.tensor([[stats[layer, h][0] for h in range(4)] for layer in (1, 2)])
print(
    f"relative entropy, mean over heads: layer 1 {after[0].mean():.3f}, "
    f"layer 2 {after[1].mean():.3f}"
)
ratio = after / before.cpu()  # (2, H): relative entropy after training / before
print(
    f"relative entropy after / before training: mean over the heads "
    f"{ratio.mean():.2f}, highest {ratio.max():.2f}"
)
claim("mean entropy after / before training", ratio.mean(), below=0.85)

# %%
# Some head is a ``not`` detector: on average over the words of a sentence, whatever
# they are, it sends the ``not`` s more than twice the share of weight a uniform head
# would give them, in many trained models most of it:

not_layer, not_head = max(stats, key=lambda key: stats[key][1])
on_not = stats[not_layer, not_head][1]
print(
    f"layer {not_layer}, head {not_head}: a word puts {on_not:.2f} of its weight on "
    "the "
    f"'not's, on average (uniform: {uniform_not:.2f})"
)
claim("'not' head, weight on 'not's / uniform", on_not / uniform_not, above=2)

# %%
# Here is that head alone on the example sentence:

fig = plot_attention(
    example_weights[not_layer - 1][0, not_head],
    x_tokens=sentence,
    title=f"Layer {not_layer}, head {not_head}, the 'not' detector, on one sentence",
)
fig.set_size_inches(5.5, 4.5)
plt.show()
# sphinx_gallery_start_ignore
# (L,)
rows_on_nots = example_weights[not_layer - 1][0, not_head][:, example_is_not].sum(-1)
uniform_example = example_is_not.float().mean()  # 2 'not's of 9 words
claim(
    "'not' head on the example, weight on 'not's / uniform",
    rows_on_nots.mean() / uniform_example,
    above=1.2,
)
# sphinx_gallery_end_ignore

# %%
# The ``not`` columns draw more than a uniform share of the rows, more strongly in some
# trained models than in others, and not from every word.
# Finding a ``not`` is only half the task: the label depends on whether it stands *right
# before* the signal word. The last two columns of the table measure exactly that, from
# the signal word's position: the weight its query puts on the ``not`` that flips it,
# and on a distracting ``not`` in the same sentence. The head that separates them most:

order_layer, order_head = max(stats, key=lambda key: stats[key][3] - stats[key][4])
signal_own, signal_other = stats[order_layer, order_head][3:]
print(
    f"layer {order_layer}, head {order_head}, sentences with both kinds of 'not': the "
    "signal "
    f"word's query puts {signal_own:.2f} on the flipping 'not', {signal_other:.2f} on "
    "the other"
)
claim("order head, own 'not' minus the other", signal_own - signal_other, above=0)

# %%
# More weight on the ``not`` next to it than on the other one. By how much changes a lot
# from one trained model to the next: in most, one head puts several times as much on
# the flipping ``not``; in some, no single head separates the two well and the model
# combines several (rerun the page with another ``ATTENTION_SEED`` to see both). That
# takes word order, and attention by itself ignores order: permute the tokens and the
# weights permute with them. The only place where the model learns where a word stands
# is the positional encoding added to each token, so it is through it that this head
# scores the key one position before the signal word above a ``not`` further away.
#
# What averaging over heads hides
# -------------------------------
#
# ``nn.MultiheadAttention`` returns, by default (``average_attn_weights=True``), the
# weights *averaged over the heads*: one :math:`(N, L, S)` map instead of
# :math:`(N, H, L, S)`. To see what that does, copy the trained second layer's attention
# into an ``nn.MultiheadAttention`` (its query, key and value projections are packed
# into one ``in_proj_weight``) and feed it the input that layer received:

from torch import nn

from attention.masks import to_torch_key_padding_mask

attn = model.blocks[1].self_attn
torch_attn = nn.MultiheadAttention(attn.embed_dim, attn.num_heads, batch_first=True)
torch_attn = torch_attn.to(device).eval()
with torch.no_grad():
    projections = (attn.q_proj, attn.k_proj, attn.v_proj)
    torch_attn.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    torch_attn.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    torch_attn.out_proj.load_state_dict(attn.out_proj.state_dict())

captured = []  # the input of layer 2's attention, recorded by a forward pre-hook
handle = attn.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
with torch.no_grad():
    model(example)
handle.remove()
x = captured[0]  # (1, L, E)
pad_mask = to_torch_key_padding_mask((example != PAD_ID)[:, None, None, :])  # (N, S)
with torch.no_grad():
    _, averaged = torch_attn(x, x, x, key_padding_mask=pad_mask)  # (N, L, S)
    _, per_head = torch_attn(
        x, x, x, key_padding_mask=pad_mask, average_attn_weights=False
    )
print(
    f"average_attn_weights=True: {tuple(averaged.shape)}; False: "
    f"{tuple(per_head.shape)}"
)
assert torch.allclose(per_head, example_weights[1], atol=1e-5)
assert torch.allclose(averaged, example_weights[1].mean(1), atol=1e-5)

# %%
# With ``average_attn_weights=False`` PyTorch gives the same per-head weights as our
# module; with the default, it gives their mean. Next to the layer's most decisive head
# on this sentence (the one whose rows have the largest top weights):

decisive = example_weights[1][0].amax(-1).mean(-1)  # mean largest weight of a row  (H,)
sharp_head = int(decisive.argmax())
fig = plot_attention(
    torch.stack([example_weights[1][0, sharp_head], averaged[0]]),
    x_tokens=sentence,
    title="Layer 2: one head versus the average over heads",
)
fig.axes[0].set_title(f"head {sharp_head} (the most decisive here)")
fig.axes[1].set_title("average of the 4 heads")
fig.set_size_inches(7, 4)  # room for the titles and the rotated labels
plt.show()
# (L,)
sharp_rows, mean_rows = example_weights[1][0, sharp_head].amax(-1), averaged[0].amax(-1)
print(
    f"largest weight of a row, mean over the rows: head {sharp_head} "
    f"{sharp_rows.mean():.2f}, "
    f"average of the heads {mean_rows.mean():.2f}"
)
claim("decisive head's mean row maximum", sharp_rows.mean(), above=0.4)
claim(
    "decisive head minus average map", sharp_rows.mean() - mean_rows.mean(), above=0.1
)

# %%
# The head puts a large share of each row on one position; the average spreads each
# row over the columns that different heads chose, so it looks as if every word shared
# its attention among several words. That is no accident of this sentence. The largest
# entry of an average is at most the average of the largest entries, so the averaged map
# is always at most as decisive as the heads are on average; the gap is large when the
# heads look at different places. Over the held-out set:

with torch.no_grad():
    layer2 = held_out_weights[1]  # (N, H, L, L)
    row_max_heads = mean_over_queries(layer2.amax(-1), real)  # (H,)
    row_max_mean = mean_over_queries(layer2.mean(1, keepdim=True).amax(-1), real).item()
print(
    "largest weight of a row, layer 2: "
    + ", ".join(f"head {h} {v:.2f}" for h, v in enumerate(row_max_heads.tolist()))
    + f"; mean of the heads {row_max_heads.mean():.2f}; average map {row_max_mean:.2f}"
)
assert row_max_mean <= row_max_heads.mean().item() + 1e-6  # always true
claim(
    "heads' mean row maximum minus the average map's",
    row_max_heads.mean() - row_max_mean,
    above=0.1,
)

# %%
# The averaged map is much less decisive than the heads (the values printed above): it
# hides *which head does what*. Ask for ``average_attn_weights=False`` (or use this
# package's modules, which always return one map per head) when you want to read what
# the heads learned.
#
# What to remember
# ----------------
#
# - :func:`attention.plot_attention` draws an :math:`(L, S)` map, or an
#   :math:`(H, L, S)` stack as a grid of heads on one colour scale, queries down the
#   side, keys along the bottom.
# - An untrained model attends almost uniformly: its scores are small, and softmax of
#   nearly equal scores is nearly flat. Relative entropy (1 = uniform) measures it.
# - After training, heads specialise: here a head that finds every ``not``, and a head
#   whose query at the signal word picks the ``not`` right before it, which takes the
#   positional encoding. Second-layer heads read positions that already mix words, so
#   their maps are harder to read as word-to-word links.
# - Measure a pattern over many sentences before believing one heatmap.
# - Averaging over heads (``nn.MultiheadAttention``'s default) blurs sharp heads into a
#   map no head computes; keep the heads apart to interpret them.
#
# API used on this page: :func:`attention.plot_attention`,
# :class:`attention.AttentionClassifier`,
# :func:`attention.training.fit_sentiment_classifier`,
# :func:`attention.training.accuracy`, :func:`attention.data.encode`,
# :func:`attention.data.make_dataset`, :func:`attention.masks.to_torch_key_padding_mask`
# and :class:`attention.MultiHeadAttention` (each block's ``self_attn``).

# %%
# Exercises
# ---------
#
# 1. **The two ends of the entropy scale.** Build two weight tensors for the 1000
#    sample sentences: one that spreads every row evenly over the real keys, and one
#    that puts every row's whole weight on the first word. What does
#    ``relative_entropy`` return for each, on every real query row?
# 2. **Order is invisible to attention.** Feed layer 2's attention (``attn``) the input
#    it received for the example sentence (``x``, captured above), once as it is and
#    once with the positions reversed. Predict how the second call's weights and
#    outputs relate to the first call's, and check it.
# 3. **The score spread, two ways.** The page read the spread of the scores off the
#    weights, through :math:`\log w_j = s_j - \log\sum_k e^{s_k}`. Compute the scores
#    of the untrained model's first layer on the example sentence directly, from its
#    query and key projections, and compare their spread with ``score_spread``.

# %%
# .. solution 1
#
# The uniform row has the largest possible entropy, :math:`\log n`, so its ratio is 1;
# the one-hot row has entropy 0. Every trained or untrained head lies in between.

sample_lengths = sample_real.sum(-1)[:, None, None, None]  # (N, 1, 1, 1)
uniform_rows = sample_real[:, None, None, :] / sample_lengths  # (N, 1, 1, L)
uniform_rows = uniform_rows.expand(-1, 1, sample_real.shape[1], -1)  # (N, 1, L, L)
first_word = torch.zeros_like(uniform_rows)
first_word[..., 0] = 1.0  # every row on key 0, always a real word
entropy_uniform = relative_entropy(uniform_rows, sample_real)[:, 0][sample_real]
entropy_one_hot = relative_entropy(first_word, sample_real)[:, 0][sample_real]
print(
    f"uniform rows: between {entropy_uniform.min():.6f} and "
    f"{entropy_uniform.max():.6f}; one-hot rows: largest {entropy_one_hot.abs().max()}"
)
assert torch.allclose(entropy_uniform, torch.ones_like(entropy_uniform), atol=1e-5)
assert (entropy_one_hot == 0).all()

# %%
# .. solution 2
#
# Reversing the positions reverses the rows and the columns of every head's weights,
# and the rows of the output: attention itself sees a set of tokens, not a sequence.
# Only the positional encoding, added before layer 1, tells the model the order.

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
# .. solution 3
#
# A pre-LN block feeds ``norm1`` of its input to the attention; a forward pre-hook
# catches it, as in the section on averaging. The spreads agree to float32 rounding.

from attention.multi_head import split_heads

first_attn = untrained.blocks[0].self_attn
layer1_input = []
handle = first_attn.register_forward_pre_hook(
    lambda module, args: layer1_input.append(args[0])
)
with torch.no_grad():
    untrained(example)
handle.remove()
with torch.no_grad():
    h = layer1_input[0]  # (1, L, E)
    q = split_heads(first_attn.q_proj(h), first_attn.num_heads)  # (1, H, L, D)
    k = split_heads(first_attn.k_proj(h), first_attn.num_heads)  # (1, H, L, D)
    # (1, H, L, D) @ (1, H, D, L) -> (1, H, L, L)
    scores = q @ k.transpose(-2, -1) / first_attn.head_dim**0.5
from_scores = scores.amax(-1) - scores.amin(-1)  # (1, H, L)
from_weights = score_spread(untrained_weights[0], example != PAD_ID)  # (1, H, L)
print(
    "largest |spread from the scores - spread from the weights|: "
    f"{(from_scores - from_weights).abs().max():.1e}"
)
assert torch.allclose(from_scores, from_weights, atol=1e-4)

# %%
# Next: :ref:`sphx_glr_tutorials_09_checking_gradients.py` checks the gradients of
# attention.

# sphinx_gallery_thumbnail_number = 4
