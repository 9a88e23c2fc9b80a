"""
An encoder-decoder: cross-attention read as an alignment
========================================================

.. prerequisites:: 07_transformer_block 12_decoder_induction_heads 13_kv_cache_gqa
   :summary: An encoder-decoder trained to rewrite dates: cross-attention, greedy and
      beam search, and how far its weights read as an alignment.

Every model so far attends within one sequence. Translation, summarisation and speech
recognition map one sequence to *another*: an **encoder** reads the source, and a
**decoder** writes the target one token at a time, its queries attending to the
encoder's keys and values. This *cross-attention* is where attention began: in
:cite:t:`bahdanau2015` the decoder of a translation model learns, for each word it
writes, weights over the source words, and those weights read as an *alignment*
between the two sentences. This page trains the encoder-decoder Transformer of
:cite:t:`vaswani2017` on a task made in code, rewriting dates into ISO 8601, and
measures how far its cross-attention is such an alignment, head by head and layer by
layer, on the dates it gets right and wrong. It also compares greedy decoding with beam
search.
"""

# %%
# Setup
# -----

import torch

from attention.repro import claim, default_device, num_threads, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# The task: one date, many ways of writing it
# -------------------------------------------
#
# People write the same day as ``3 March 2021``, ``March 3rd, 21`` or ``Wed
# 03/03/2021``; ISO 8601 writes it ``2021-03-03``. :mod:`attention.dates` makes the task
# with Python's :mod:`datetime` and :mod:`random`: ten formats, each a template whose
# fields (``{d}``, ``{Month}``, ``{yyyy}``, ...) :func:`attention.dates.write_date`
# fills in, recording which characters spell the year, the month, the day and the
# weekday. One date in every format, with those characters marked (``y``, ``m``, ``d``,
# ``w``):

import datetime

from attention.dates import FORMATS, write_date

day = datetime.date(2021, 3, 3)
for format in FORMATS:
    text, spans = write_date(day, format)
    marks = [" "] * len(text)
    for part, (start, end) in spans.items():
        marks[start:end] = part[0] * (end - start)
    print(f"{text:<26} {''.join(marks):<26} {format}")

# %%
# To write the year, a model must find it in the source, at the start, at the end or in
# between, as four digits or two; a two-digit year ``yy`` means 20yy below 50 and 19yy
# from 50 on, so every day from 1950 to 2049 has one written form per format and each
# written form one day. The month is a name, an abbreviation or a number; where the
# day and the month are both numbers, the day comes first unless the year opens the
# date (``2021/3/3``). The weekday is a distraction: it says nothing that the rest of
# the date does not.
#
# :func:`attention.dates.split_dates` holds out one day in ten, at random; the held-out
# examples (:func:`attention.dates.make_dates` with ``split="held_out"``) are days that
# no training example shows, in any format:

from attention.dates import FIRST_DAY, LAST_DAY, make_dates, split_dates

train_days, held_out_days = split_dates()
print(
    f"{len(train_days)} training days and {len(held_out_days)} held-out days, "
    f"from {FIRST_DAY} to {LAST_DAY}"
)
for example in make_dates(4, seed=1):
    print(f"{example.source:<30} -> {example.target}")

# %%
# Characters as tokens
# --------------------
#
# The model reads and writes one character at a time. The source has one token per
# character a format may write, and padding; the target has the eleven symbols that ISO
# 8601 uses (the ten digits and ``-``), padding, and the tokens that begin and end a
# sequence (``<bos>``, ``<eos>``). :func:`attention.dates.encode_sources` and
# :func:`attention.dates.encode_targets` turn text into ids:

from attention.dates import SOURCE_VOCAB, TARGET_VOCAB, encode_sources, encode_targets

print(f"source vocabulary: {len(SOURCE_VOCAB)} tokens; target: {TARGET_VOCAB}")
print(f"{example.source!r} -> {encode_sources([example.source])[0].tolist()}")
print(f"{example.target!r} -> {encode_targets([example.target])[0].tolist()}")

# %%
# The encoder-decoder
# -------------------
#
# :class:`attention.Seq2SeqTransformer` is the model of :cite:t:`vaswani2017`, with the
# layers of :class:`torch.nn.Transformer` (and equal to it, weight for weight, in the
# package's tests). The **encoder** is a stack of the Transformer blocks of
# :ref:`sphx_glr_tutorials_2_building_and_checking_07_transformer_block.py`: the
# source characters attend to each other (padding excluded), and its output, the
# *memory*, holds one vector per source character. The **decoder** is a stack of
# :class:`attention.TransformerDecoderBlock` s, each with three parts: causal
# self-attention over the target written so far, as in the decoder of
# :ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py`; then
# **cross-attention**, whose queries come from the target and whose keys and values
# come from the memory; then the feed-forward network. The keys and values of the
# memory are the same at every step of writing the target, so they are computed once per
# source:
#
# .. literalinclude:: ../../../attention/block.py
#    :language: python
#    :pyobject: TransformerDecoderBlock.cross_kv
#
# and every target position's query is scored against them with the one kernel of the
# package, the source padding masked out:
#
# .. literalinclude:: ../../../attention/block.py
#    :language: python
#    :pyobject: TransformerDecoderBlock._cross_attention
#
# Cross-attention is the decoder's only view of the source. Its weights over the source,
# one row per target position, are what the rest of the page reads.
#
# Training
# --------
#
# The decoder is trained like the one of
# :ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py`, with teacher
# forcing: it reads ``<bos>`` and the true target, and at each position predicts the
# next character; the loss is the cross-entropy of all eleven (ten characters and
# ``<eos>``). :func:`attention.recipes.fit_date_model` trains a small model this way: an
# encoder of one layer, a decoder of two, ``embed_dim=64``, four heads, 300 steps of 128
# training examples, each seen once, on one CPU thread. It returns the model, its
# history (``exact``: the batch's share of dates whose every character was predicted
# under teacher forcing) and 1000 held-out examples:

from attention.recipes import fit_date_model
from attention.training import count_parameters, format_history

model, history, (src, tgt) = fit_date_model(seed=seed)
print(
    f"{len(model.encoder)} encoder and {len(model.decoder)} decoder layers, "
    f"{count_parameters(model):,} parameters"
)
print(format_history(history, every=50, keys=("exact",)))

# %%
# The held-out examples are :func:`attention.dates.make_dates` ``(1000,
# split="held_out", seed=2)``; the page keeps them as text, with their spans:

held_out = make_dates(len(src), split="held_out", seed=2)
# sphinx_gallery_start_ignore
assert torch.equal(encode_sources([e.source for e in held_out], src.shape[1]), src)
# sphinx_gallery_end_ignore
model, src = model.to(device), src.to(device)

# %%
# Held-out accuracy: greedy decoding and beam search
# --------------------------------------------------
#
# At test time there is no true target to read:
# :meth:`attention.Seq2SeqTransformer.generate` writes one, starting from ``<bos>`` and
# feeding each character back in, with the decoder's self-attention keys and values in a
# :class:`attention.KVCache` and the cross-attention's computed once
# (:meth:`~attention.Seq2SeqTransformer.cross_kv`). *Greedy decoding* takes the most
# likely character at every step; *beam search* keeps the four most likely partial
# outputs at every step and returns the finished one of best score, its mean
# log-probability per token (:mod:`attention.search`). A date counts as right only if
# all ten characters are (*exact match*). Both run on one thread, so that the result
# does not depend on the core count.

from attention.dates import BOS_ID, EOS_ID, decode_target

targets = [e.target for e in held_out]
with num_threads(1):
    greedy, greedy_scores = model.generate(
        src, 11, bos_id=BOS_ID, eos_id=EOS_ID, return_scores=True
    )  # (N, 12): <bos>, ten characters, <eos>
    beam, beam_scores = model.generate(
        src, 11, bos_id=BOS_ID, eos_id=EOS_ID, beam_size=4, return_scores=True
    )
greedy_text = [decode_target(row) for row in greedy.cpu()]
beam_text = [decode_target(row) for row in beam.cpu()]
pairs = zip(greedy_text, beam_text, targets, strict=True)
greedy_right, beam_right = torch.tensor([(g == t, b == t) for g, b, t in pairs]).T
greedy_accuracy, beam_accuracy = greedy_right.float().mean(), beam_right.float().mean()
print(f"held-out exact match: greedy {greedy_accuracy:.1%}, beam {beam_accuracy:.1%}")
learned = greedy_accuracy > 0.9  # this run's model has learned to read dates

# %%
# Greedy decoding's exact match was above 90% in all 30 runs that tuned this page and
# in 58 of 60 on seeds never used to tune it, so the claims below about what the model
# learned (how it reads a date, how much beam search adds) are checked in the runs above
# 90%.
#
# Cross-attention as an alignment
# -------------------------------
#
# Run the model once more over the held-out sources and its own greedy outputs, with
# teacher forcing and ``need_weights=True``, to read the weights it wrote them with.
# ``weights.cross[layer]`` is :math:`(N, H, T, S)`: row :math:`t` is the query that
# wrote output character :math:`t` (the input at :math:`t` is the character before it),
# and its :math:`S` weights over the source sum to 1.

with torch.no_grad(), num_threads(1):
    _, weights = model(src, greedy[:, :-1], need_weights=True)
cross = torch.stack(weights.cross, dim=1).cpu()  # (N, layers, H, T, S)
N, num_layers, H, T, S = cross.shape
print(f"cross-attention weights {tuple(cross.shape)}: N, layers, H, T, S")
# sphinx_gallery_start_ignore
assert greedy.shape[1] == 12  # every source wrote its ten characters and <eos>
# sphinx_gallery_end_ignore

# %%
# The weights of every head of both decoder layers for one held-out date, written day
# first, so that ISO 8601's order (year, month, day) runs backwards through it (the
# shortest one greedy decoding got right).
# Source characters run along the bottom (``␣`` a space), the characters the model wrote
# down the side; one column per layer, one row per head (heads from 0):

# sphinx_gallery_start_ignore
formats = [e.format for e in held_out]
written_day_first = "the {dth} of {Month} {yyyy}"
day_first = [m for m in range(N) if formats[m] == written_day_first and greedy_right[m]]
n = min(day_first, key=lambda m: len(held_out[m].source))  # the shortest one

import matplotlib.pyplot as plt

from attention import plot_attention


def source_tokens(text):
    """The characters of ``text`` as heatmap labels, a space shown as ␣."""
    return ["␣" if c == " " else c for c in text]


def written_tokens(row):
    """The characters a row of outputs wrote, <bos> dropped: the query labels."""
    return [TARGET_VOCAB[i] for i in row[1:].tolist()]


def first_right(format):
    """The first held-out date in ``format`` that greedy decoding got right."""
    return next(n for n in range(N) if formats[n] == format and greedy_right[n])


length = len(held_out[n].source)
fig, axes = plt.subplots(
    H, num_layers, figsize=(8, 9.6), sharex=True, sharey=True,
    gridspec_kw={"left": 0.08, "right": 0.995, "bottom": 0.12, "top": 0.97,
                 "wspace": 0.02, "hspace": 0.1},
)  # fmt: skip
for layer in range(num_layers):
    for head in range(H):
        axis = axes[head, layer]
        plot_attention(
            cross[n, layer, head, :, :length],  # (T, S)
            x_tokens=source_tokens(held_out[n].source),
            y_tokens=written_tokens(greedy[n]),
            ax=axis,
            vmax=1.0,
            colorbar=False,
            title=f"layer {layer + 1}, head {head}",
        )
        axis.set_aspect("auto")  # fill the grid's cell
        if head < H - 1:
            axis.set_xlabel("")
        if layer > 0:
            axis.set_ylabel("")
fig.set_layout_engine("constrained")
fig.colorbar(
    axes[0, 0].images[0], ax=axes, orientation="horizontal", shrink=0.5, aspect=30,
    label="attention weight",
)  # fmt: skip
_ = fig.suptitle(f"Cross-attention of every head writing {held_out[n].target}")
from attention.head_view import save_head_view

save_head_view(
    "15-dates",
    written_tokens(greedy[n]),
    cross[n, :, :, :, :length],  # (layers, H, T, S)
    key_tokens=source_tokens(held_out[n].source),
)
# sphinx_gallery_end_ignore

# %%
# Where a row puts its weight, it is mostly on the part of the source that row writes:
# the year's digits on the year at the end, the month's on the month's name, the day's
# on the day's number and its suffix. Not in every head: some rows look elsewhere,
# several at the opening ``the``. The alignment runs from the bottom left to the top
# right, against the source's order. The rows of the dashes and of ``<eos>``, which no
# source character determines, look wherever.
#
# .. head-view:: 15-dates
#
# Measured, not eyeballed
# -----------------------
#
# For each output digit, the *share* of a head's weight on the source characters that
# spell its field (the year's four digits on the year, and so on), averaged over the
# held-out dates; the mean of the four heads of each layer too, and what a head
# spreading its weight evenly over the source would get:

PARTS = ("year", "month", "day")
DIGITS = [0, 1, 2, 3, 5, 6, 8, 9]  # output positions of the digits: yyyy-mm-dd
FIELD = [0, 0, 0, 0, 1, 1, 2, 2]  # the part each of them writes
columns = ["y1", "y2", "y3", "y4", "m1", "m2", "d1", "d2"]  # their names
in_part = torch.zeros(N, len(PARTS), S)  # 1 on the characters that spell each part
for row, example in enumerate(held_out):
    for p, part in enumerate(PARTS):
        start, end = example.spans[part]
        in_part[row, p, start:end] = 1.0
digit_weights = cross[:, :, :, DIGITS]  # (N, layers, H, 8, S)
on_field = (digit_weights * in_part[:, None, None, FIELD]).sum(-1)  # (N, layers, H, 8)
share = on_field.mean(0)  # (layers, H, 8)
head_mean = share.mean(1)  # (layers, 8): the share of the heads' mean weights
lengths = (src != 0).sum(1).cpu()  # (N,)
uniform = (in_part[:, FIELD].sum(-1) / lengths[:, None]).mean(0)  # (8,)

# sphinx_gallery_start_ignore
from attention import plot_matrix

rows, labels = [], []
for layer in range(num_layers):
    for head in range(H):
        rows.append(share[layer, head])
        labels.append(f"layer {layer + 1}, head {head}")
    rows.append(head_mean[layer])
    labels.append(f"layer {layer + 1}, mean of heads")
rows.append(uniform)
labels.append("spread evenly")
fig = plot_matrix(torch.stack(rows), x_labels=columns, y_labels=labels, vmax=1.0)
fig.axes[0].set_xlabel("output digit (year y1-y4, month m1-m2, day d1-d2)")
fig.axes[0].set_title("Share of each output digit's weight on the field it writes")
fig.set_size_inches(7, 6.2)
fig.tight_layout()
# sphinx_gallery_end_ignore

# %%
# The layer to read is layer 2: the mean of its heads puts most of each digit's weight
# on the digit's field, well above an even spread's share (the bottom row), for the
# month, the day and the year's last two digits. Layer 1 is aligned too; how closely is
# printed below. The century digits, ``19`` or ``20``, are the exception: a two-digit
# year does not spell them, and the model works them out from what it reads. For the
# mean of layer 2's heads, the weakest digit of each field (the century digits counted
# apart) against the largest share an even spread gives it, then each layer's share
# averaged over the digits:

fields = {
    "year's last two digits": [2, 3],
    "month's digits": [4, 5],
    "day's digits": [6, 7],
    "year's first two digits": [0, 1],
}
weakest = {name: head_mean[1, cols].min().item() for name, cols in fields.items()}
even = {name: uniform[cols].max().item() for name, cols in fields.items()}
for name, value in weakest.items():
    print(
        f"layer 2, {name}: at least {value:.2f} of the weight on their field "
        f"(spread evenly: {even[name]:.2f})"
    )
layer_share = head_mean.mean(1)  # (layers,)
print(
    f"mean over the digits: layer 1 {layer_share[0]:.2f}, layer 2 {layer_share[1]:.2f}"
)
aligned = list(fields)[:3]  # the fields the source spells
if learned:
    claim(
        "layer 2: the weakest share above an even spread's",
        min(weakest[name] - even[name] for name in aligned),
        above=0.2,
    )
# sphinx_gallery_start_ignore
if learned:
    for name, most in zip(aligned, (0.85, 0.5, 0.5), strict=True):
        claim(f"layer 2: share of the {name} on their field", weakest[name], above=most)
    claim(
        "layer 2: century digits below every other field, on the mean of their digits",
        min(head_mean[1, fields[name]].mean() for name in aligned)
        - head_mean[1, :2].mean(),
        above=0.05,
    )
    claim("layer 1: share on the field, over the digits", layer_share[0], above=0.5)
# sphinx_gallery_end_ignore

# %%
# Within the year, the last two digits find their characters. For the dates whose year
# has four digits, the weight of each output digit of the year on each of the year's
# source characters, for the mean of layer 2's heads: the last two digits (rows ``y3``,
# ``y4``) point at the characters they copy, on the diagonal, while the century digits,
# on average over the two, put less of their weight on the year at all.

four = torch.tensor([e.spans["year"][1] - e.spans["year"][0] == 4 for e in held_out])
start = torch.tensor([e.spans["year"][0] for e in held_out])[four]  # (N4,)
year_chars = start[:, None] + torch.arange(4)  # (N4, 4): the year's characters
layer2 = cross[four, 1].mean(1)[:, :4]  # (N4, 4, S): layer 2, heads' mean, year digits
index = year_chars[:, None, :].expand(-1, 4, -1)  # (N4, 4 digits, 4 characters)
on_char = layer2.gather(2, index).mean(0)  # (4, 4): digit j's weight on character k
# sphinx_gallery_start_ignore
fig = plot_matrix(
    on_char,
    x_labels=["1st", "2nd", "3rd", "4th"],
    y_labels=["y1", "y2", "y3", "y4"],
    vmax=1.0,
    title="Layer 2, mean of heads: the year's digits\non the year's characters",
)
fig.axes[0].set_xlabel("character of the year in the source")
fig.axes[0].set_ylabel("output digit")
fig.set_size_inches(4.5, 4)
fig.tight_layout()
# sphinx_gallery_end_ignore
on_year = on_char.sum(1)  # (4,): each digit's weight on the year's four characters
print(
    "on the year's characters: "
    + ", ".join(f"{c} {w:.2f}" for c, w in zip(columns, on_year.tolist(), strict=False))
    + f"; on the character copied: y3 {on_char[2, 2]:.2f}, y4 {on_char[3, 3]:.2f} "
    f"(over the {int(four.sum())} dates with a four-digit year)"
)
# sphinx_gallery_start_ignore
off_diagonal = on_char[2:].masked_fill(torch.eye(4, dtype=torch.bool)[2:], 0.0)
if learned:
    claim("layer 2: weight of y3 on the year's 3rd character", on_char[2, 2], above=0.4)
    claim("layer 2: weight of y4 on the year's 4th character", on_char[3, 3], above=0.6)
    claim(
        "layer 2: y3 and y4 on the character they copy, before any other",
        (on_char[[2, 3], [2, 3]] - off_diagonal.amax(1)).min(),
        above=0.15,
    )
    claim(
        "layer 2: century digits less on the year than y3 and y4, on their means",
        on_year[2:].mean() - on_year[:2].mean(),
        above=0.1,  # >= 0.235 over seeds 0-3, 11, 12, 18, 20-25; y1 alone up to 0.91
    )
# sphinx_gallery_end_ignore

# %%
# A two-digit year does not spell the century at all, and the century digits put less
# of their weight on it than on a four-digit year. Their share on the year, for the
# dates with a four-digit year and for those with two:

century_four = on_field[four, 1, :, :2].mean()  # layer 2, y1 and y2, heads' mean
century_two = on_field[~four, 1, :, :2].mean()
print(
    f"century digits on the year: {century_four:.2f} for a four-digit year, "
    f"{century_two:.2f} for a two-digit one"
)
# sphinx_gallery_start_ignore
if learned:
    claim(
        "layer 2: century digits, four-digit minus two-digit year",
        century_four - century_two,
        above=0.05,
    )
# sphinx_gallery_end_ignore

# %%
# The same alignment, wherever the format puts the fields: the mean of layer 2's heads
# for three more held-out dates, on one scale.

# sphinx_gallery_start_ignore
shown = ["{Wkd} {dd}/{mm}/{yyyy}", "{Month} {dth}, {yy}", "{yyyy} {mon} {d}"]
fig, axes = plt.subplots(3, 1, figsize=(7, 11), layout="constrained")
for axis, format in zip(axes, shown, strict=True):
    k = first_right(format)
    length = len(held_out[k].source)
    plot_attention(
        cross[k, 1, :, :, :length].mean(0),  # (T, S): layer 2, mean of heads
        x_tokens=source_tokens(held_out[k].source),
        y_tokens=written_tokens(greedy[k]),
        ax=axis,
        vmax=1.0,
        title=held_out[k].source,
    )
    axis.set_xlabel("source character")
    axis.set_ylabel("written character")
fig.suptitle("Layer 2, mean of heads: the alignment follows the format")
plt.show()
# sphinx_gallery_end_ignore

# %%
# One caution. The keys are not the source characters but the encoder's output at
# their positions, and the encoder's self-attention has already mixed some of each
# character's neighbours into it: a weight on a position is a weight on what the encoder
# put there. The shares above measure where the decoder reads, not which characters the
# information came from.
#
# What averaging over heads hides
# -------------------------------
#
# The share is linear in the weights, so the mean of the heads has the mean of their
# shares: at the level of fields, averaging loses nothing. What it hides is *which
# character* each head reads. The share of output digits for which all four heads of a
# layer put their largest weight on the same source character, and how flat each head's
# rows are against their mean's (the entropy, in nats, of each row's weights, averaged
# over the digits and the dates):

peak = digit_weights.argmax(-1)  # (N, layers, H, 8): each head's top source character
agree = (peak == peak[:, :, :1]).all(dim=2).float().mean(dim=(0, 2))  # (layers,)


def entropy(w):
    """Entropy in nats of each row of weights (last dimension), 0 log 0 = 0."""
    return -(w * w.clamp_min(1e-12).log()).sum(-1)


head_entropy = entropy(digit_weights).mean(dim=(0, 3))  # (layers, H)
mean_entropy = entropy(digit_weights.mean(2)).mean(dim=(0, 2))  # (layers,)
for layer in range(num_layers):
    print(
        f"layer {layer + 1}: all heads on one character for {agree[layer]:.0%} of the "
        "digits; entropy of each head "
        + ", ".join(f"{e:.2f}" for e in head_entropy[layer].tolist())
        + f", of their mean {mean_entropy[layer]:.2f}"
    )
# sphinx_gallery_start_ignore
if learned:
    claim("layer 2: digits on which all heads agree", agree[1], below=0.5)
    claim(
        "layer 2: entropy of the mean minus its heads' mean entropy",
        mean_entropy[1] - head_entropy[1].mean(),
        above=0.15,
    )
# sphinx_gallery_end_ignore

# %%
# In layer 2 the four heads agree on the character for a minority of the digits, and
# their mean is flatter than a head by the gap in the entropies above (a mean of
# distributions is never sharper than they are on average; the size of the gap is the
# evidence): the heads split the reading of a field between them. A heatmap of the
# heads' mean is the right picture of *where* a layer reads, and the picture of no head.
#
# The mistakes
# ------------
#
# The held-out dates greedy decoding got wrong, with their first wrong character marked:


def first_difference(a, b):
    """The first position where the strings ``a`` and ``b`` differ."""
    return next(
        t for t, (x, y) in enumerate(zip(a.ljust(10), b, strict=True)) if x != y
    )


wrong = [n for n in range(N) if not greedy_right[n]]
first_wrong = [first_difference(greedy_text[n], targets[n]) for n in wrong]
for n, t in list(zip(wrong, first_wrong, strict=True))[:10]:
    mark = " " * t + "^"
    print(f"{held_out[n].source:<30} {targets[n]} wrote {greedy_text[n]}\n{mark:>52}")
print(f"{len(wrong)} of {N} wrong ({max(0, len(wrong) - 10)} more not shown)")

# %%
# What the model wrote at the first wrong digit, against the digit due, and whether it
# is a character of the source's field (the characters that spell the day, for a digit
# of the day):

from collections import Counter

part_at = dict(zip(DIGITS, (PARTS[f] for f in FIELD), strict=True))  # position: part
kinds = Counter()
for n, t in zip(wrong, first_wrong, strict=True):
    wrote, due = greedy_text[n][t : t + 1], targets[n][t]
    field = (
        held_out[n].source[slice(*held_out[n].spans[part_at[t]])]
        if t in part_at
        else ""
    )
    if not (wrote.isdigit() and field):
        kinds["no digit, or not at a digit"] += 1
    elif wrote == "0":
        kinds["a 0 where the field's digit was due"] += 1
    elif wrote in field and due == "0":
        kinds["a digit of the field where a 0 was due"] += 1
    elif wrote in field:
        kinds["another digit of the field"] += 1
    else:
        kinds["a digit the field does not write"] += 1
for kind, count in kinds.most_common():
    print(f"{kind:<40} {count}")
# sphinx_gallery_start_ignore
outside = (
    kinds["a digit the field does not write"] + kinds["no digit, or not at a digit"]
)
in_field = 1 - outside / max(1, len(wrong))
if learned:
    claim(
        "first wrong characters that are a 0 or a digit of the field",
        in_field,
        above=0.5,
    )
# sphinx_gallery_end_ignore

# %%
# Most first wrong digits are a ``0`` or a digit that the right field does write, put
# in the wrong place: the model found the field and misread which of its characters
# comes next, or whether a ``0`` goes first. The share on the right field of the row
# that wrote the first wrong digit (the mean of layer 2's heads), against the same row
# where the date came out right:

layer2_field = on_field[:, 1].mean(1)  # (N, 8): layer 2, heads' mean
digit_mistakes = [
    (n, t) for n, t in zip(wrong, first_wrong, strict=True) if t in DIGITS
]
at_mistakes = [layer2_field[n, DIGITS.index(t)].item() for n, t in digit_mistakes]
for t in sorted({t for _, t in digit_mistakes}):
    column = DIGITS.index(t)
    here = [v for (_, u), v in zip(digit_mistakes, at_mistakes, strict=True) if u == t]
    right = layer2_field[greedy_right, column].mean()
    print(
        f"output {columns[column]}: {sum(here) / len(here):.2f} at its {len(here)} "
        f"mistakes, {right:.2f} where the date came out right"
    )
mistake_share = sum(at_mistakes) / max(1, len(at_mistakes))
spread = [
    in_part[n, FIELD[DIGITS.index(t)]].sum() / lengths[n] for n, t in digit_mistakes
]
spread = sum(spread) / max(1, len(spread))
print(
    f"all first wrong digits: {mistake_share:.2f} of the weight on the right field "
    f"(spread evenly: {spread:.2f})"
)
# sphinx_gallery_start_ignore
if learned:
    claim(
        "layer 2: share on the right field at the mistakes, above an even spread's",
        mistake_share - spread,
        above=0.2,
    )
# sphinx_gallery_end_ignore

# %%
# The row that wrote the first wrong digit still reads the right field, with far more
# weight there than an even spread would put (next to the dates that came out right, in
# the printed shares). The mistake whose wrong row puts the most weight on the right
# field, drawn as the dates above were (the mean of layer 2's heads):

n, t = max(digit_mistakes, key=lambda m: layer2_field[m[0], DIGITS.index(m[1])])
# sphinx_gallery_start_ignore
length = len(held_out[n].source)
fig, ax = plt.subplots(figsize=(8, 3.0), layout="constrained")
plot_attention(
    cross[n, 1, :, :, :length].mean(0),
    x_tokens=source_tokens(held_out[n].source),
    y_tokens=written_tokens(greedy[n]),
    ax=ax,
    vmax=1.0,
    title=f"{held_out[n].source} written {greedy_text[n]} (right: {targets[n]})",
)
ax.set_xlabel("source character")
ax.set_ylabel("written character")
plt.show()
# sphinx_gallery_end_ignore
best_share = layer2_field[n, DIGITS.index(t)]
print(f"the wrong row, {columns[DIGITS.index(t)]}: {best_share:.2f} on its field")
# sphinx_gallery_start_ignore
if learned:
    claim("the drawn mistake's share on the right field", best_share, above=0.8)
# sphinx_gallery_end_ignore


def on_digits(n, t):
    """Layer 2's weight (heads' mean) of output t of date n on the characters of its
    field that spell the digit written, and on those that spell the digit due."""
    start, end = held_out[n].spans[part_at[t]]
    row = cross[n, 1, :, t, start:end].mean(0)  # (field,): layer 2, heads' mean
    chars = held_out[n].source[start:end]
    wrote, due = greedy_text[n][t], targets[n][t]
    return tuple(
        sum(w for w, c in zip(row.tolist(), chars, strict=True) if c == d)
        for d in (wrote, due)
    )


wrote_w, due_w = on_digits(n, t)
print(
    f"within the field: {wrote_w:.2f} on the characters {greedy_text[n][t]!r} (written)"
    f", {due_w:.2f} on {targets[n][t]!r} (due)"
)
in_field_pairs = [
    on_digits(m, u)
    for m, u in digit_mistakes
    if greedy_text[m][u] != targets[m][u]
    and all(
        d in held_out[m].source[slice(*held_out[m].spans[part_at[u]])]
        for d in (greedy_text[m][u], targets[m][u])
    )
]
leaning = sum(w > d for w, d in in_field_pairs)
print(
    f"first wrong digits whose written and due digits are both in the field: "
    f"{len(in_field_pairs)}; more weight on the digit written than on the digit due: "
    f"{leaning}"
)

# %%
# The wrong row's weight sits on the right field: the model found the field. Which of
# its characters the row reads is printed with the figure: the drawn row's weight on
# the digit it wrote and on the digit due, and how many of the first wrong digits whose
# written and due digits both stand in the field lean to the digit written. The row
# finds the right field; which character inside it weighs most is not the same in every
# mistake, as those counts show.
#
# Greedy decoding against beam search
# -----------------------------------
#
# Beam search keeps the four partial outputs of highest summed log-probability and ends
# a hypothesis when ``<eos>`` is among the best candidates. Where it and greedy decoding
# disagree on the held-out dates (the number after each output is its score, its mean
# log-probability per token):

differ = [n for n in range(N) if greedy_text[n] != beam_text[n]]
fixes = [n for n in differ if beam_right[n] and not greedy_right[n]]
breaks = [n for n in differ if greedy_right[n] and not beam_right[n]]
higher = sum(bool(beam_scores[n] > greedy_scores[n]) for n in fixes)
early = [n for n in breaks if len(beam_text[n]) < 10]  # shorter than a date
lower = sum(bool(beam_scores[n] < greedy_scores[n]) for n in early)
print(
    f"{len(differ)} of {N} outputs differ. Right where greedy decoding was wrong: "
    f"{len(fixes)}, {higher} of higher score; wrong where it was right: {len(breaks)}, "
    f"{len(early)} ended early, {lower} of them of lower score than greedy's output"
)
for n in differ[:4]:
    print(
        f"{held_out[n].source:<29} greedy {greedy_text[n]:<10} {greedy_scores[n]:6.3f}"
        f"   beam {beam_text[n]:<10} {beam_scores[n]:6.3f}"
    )
# sphinx_gallery_start_ignore
fixed, fixed_higher = len(fixes), higher
higher_or_short = sum(
    bool(beam_scores[n] > greedy_scores[n] or len(beam_text[n]) < 10) for n in differ
)
claim("beam search's fixes not of higher score", fixed - fixed_higher, below=0.5)
claim(
    "beam search's outputs neither of higher score nor ended early",
    len(differ) - higher_or_short,
    below=0.5,
)
if learned:
    claim(
        "beam search minus greedy, exact match",
        beam_accuracy - greedy_accuracy,
        below=0.005,
    )
# sphinx_gallery_end_ignore

# %%
# Where beam search fixes a mistake, it found an output of higher score that greedy
# decoding passed by. Where it breaks a right output, its output is a wrong date the
# model scores higher or one that ended early (the counts above say which, in this
# run): beam search stops once four hypotheses have ended (fairseq's rule, which the
# package follows), so short, unlikely outputs can fill the beam before a likelier one
# finishes. Here beam search is not measurably more accurate than greedy decoding (both
# accuracies printed above; every build whose model is above 90% checks that it gains
# under half a point), for four hypotheses per source where greedy decoding runs one.
#
# The model in your browser
# -------------------------
#
# The site's build exports this model with :func:`attention.export.export_onnx` and
# checks ONNX Runtime against PyTorch to within :math:`10^{-4}`. On the site it runs in
# your browser (about 15 MB, loaded when you start it): write a date, and read the
# model's answer and the cross-attention of the layer and head you choose.
#
# .. widget:: dates
#    :model: dates
#
# What to remember
# ----------------
#
# - An encoder-decoder reads the source once into a memory; the decoder's
#   cross-attention takes its queries from the target and its keys and values from the
#   memory (computed once per source), and is the decoder's only view of the source.
# - Trained on date normalisation, cross-attention is an alignment that can be
#   measured: in layer 2, averaged over heads and formats, each digit of the month, of
#   the day and of the year's last two puts most of its weight on the field it writes.
# - Averaging heads hides that the heads split the characters between them. The
#   mistakes are mostly not misalignments: the row that writes a wrong digit still
#   reads the right field.
# - Beam search can find an output of higher score than greedy decoding's; with a
#   stopping rule that ends the search once four hypotheses have ended, it can also
#   return a short output of lower score.
#
# API used on this page: :class:`attention.Seq2SeqTransformer`, :mod:`attention.dates`,
# :func:`attention.recipes.fit_date_model`, :func:`attention.training.format_history`,
# :func:`attention.training.count_parameters`, :func:`attention.ablation.head_ablated`,
# :func:`attention.ablation.mean_head_outputs` and :func:`attention.repro.num_threads`.

# %%
# Exercises
# ---------
#
# 1. **Remove cross-attention.** Switch off every head of both decoder layers'
#    cross-attention (mean-ablation: :func:`attention.ablation.head_ablated` with the
#    heads' means from :func:`attention.ablation.mean_head_outputs`) and decode the
#    held-out dates again. What is lost, and what is kept?
#
# .. solution 1
#
# Without cross-attention nothing the decoder reads depends on the source: it writes the
# same output for every source (one distinct output in every run the page was checked
# on), and no date comes out right but the odd one that happens to be that output. What
# can be kept is what does not depend on the source, the form of a date. The dashes
# stood in their places in all 30 runs that tuned this page (seeds 0 to 9 on three CPU
# kernels) and in 58 of 60 runs on seeds never used to tune it; in the other two (seed
# 761067 on the default kernel, 960685 under AVX2) the one output, ``199-08-030`` and
# ``200-06-0-``, wrote a year of three digits and put its dashes early. In this run,
# the output and whether its dashes are in place:

import contextlib

from attention.ablation import head_ablated, mean_head_outputs

with contextlib.ExitStack() as stack, num_threads(1):
    for block in model.decoder:
        attn = block.cross_attn
        means = mean_head_outputs(model, attn, src, greedy[:, :-1])  # (H, D)
        for head in range(H):
            stack.enter_context(head_ablated(attn, head, replacement=means[head]))
    blind = model.generate(src, 11, bos_id=BOS_ID, eos_id=EOS_ID)
blind_text = [decode_target(row) for row in blind.cpu()]
blind_exact = sum(o == t for o, t in zip(blind_text, targets, strict=True)) / N
dashes = sum(o[4:5] + o[7:8] == "--" for o in blind_text) / N
common, count = Counter(blind_text).most_common(1)[0]
print(
    f"without cross-attention: exact match {blind_exact:.1%}; distinct outputs "
    f"{len(set(blind_text))}, {common} {count} times; dashes in place {dashes:.0%}"
)
# sphinx_gallery_start_ignore
claim("exact match without cross-attention", blind_exact, below=0.01)
claim("different outputs without cross-attention", len(set(blind_text)), below=1.5)
# sphinx_gallery_end_ignore

# %%
# Next: :ref:`sphx_glr_tutorials_4_generation_16_language_model.py`, a decoder trained
# on real text.

# sphinx_gallery_thumbnail_number = 4
