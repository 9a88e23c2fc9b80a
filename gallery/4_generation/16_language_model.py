"""
A language model on real text
=============================

.. prerequisites:: 12_decoder_induction_heads 13_kv_cache_gqa 14_positions
   :summary: A character-level language model trained on Python's own documentation,
      measured against baselines and sampled with temperature, top-k and top-p.

Every model on the earlier pages learned synthetic tokens. This one reads and writes
real text: a decoder-only language model of the GPT kind :cite:p:`radford2019`, the
package's :class:`attention.DecoderLM`, trained for a few hundred steps on one CPU core
to predict Python's reference documentation one character at a time, which a standard
Python installation carries.

The page measures the model against the simplest language models (character frequencies,
and pairs of characters), samples from it with temperature, top-k and nucleus (top-p)
sampling :cite:p:`holtzman2020`, and reads its attention on a line of documentation.
"""

# %%
# Setup
# -----

import torch

from attention.repro import claim, default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# The corpus: Python's own documentation
# --------------------------------------
#
# ``help("while")`` prints a page of the language reference without reaching the
# network: the text ships with Python, in the standard library module
# ``pydoc_data.topics``, a dictionary of topics written out when the release was made.
# :func:`attention.text.python_docs` joins them, in alphabetical order:
#
# .. literalinclude:: ../../../attention/text.py
#    :language: python
#    :pyobject: python_docs
#    :no-docstring:
#
# The text is the same on every machine with the same Python release. Another release
# documents a slightly different language in a slightly different text, so **every
# number on this page depends on the Python release that runs it**; the claims the page
# checks leave room for that. This run:

import platform

from attention.text import python_docs

text = python_docs()
print(
    f"Python {platform.python_version()}: {len(text):,} characters, "
    f"{len(text.split()):,} words, {text.count(chr(10)):,} lines"
)
print(text[:520])

# %%
# English prose with grammar rules and code in it (and, further on, tables): the model
# will have to learn words, but also indentation and quotes that close.
#
# Characters as tokens
# --------------------
#
# The simplest tokenizer gives every character its own id. The vocabulary is fixed
# once, from the corpus: :class:`attention.text.CharTokenizer` sorts its distinct
# characters and keeps id 0 for any character outside them (written back as the
# replacement character ``"\ufffd"``, as Python's ``bytes.decode(errors="replace")``
# does), so that a prompt with a character the model never saw still encodes.

from collections import Counter

from attention.text import CharTokenizer

tokenizer = CharTokenizer(text)
V = len(tokenizer)
counts = Counter(text)
print(f"V = {V} ids: {V - 1} characters and the unknown id")
print("most common: ", [char for char, _ in counts.most_common(12)])
print(
    "their shares: "
    + ", ".join(f"{n / len(text):.1%}" for _, n in counts.most_common(3))
)
print("least common:", [char for char, _ in counts.most_common()[-6:]])
ids = tokenizer.encode(text)  # (T,) int64
prompt_text = "π ≈ 3.14, not 3"
print(f"{prompt_text!r} -> {tokenizer.encode(prompt_text).tolist()}")
print(f"and back: {tokenizer.decode(tokenizer.encode(prompt_text))!r}")
# sphinx_gallery_start_ignore
assert tokenizer.decode(ids) == text
(space, n_space), (_, n_second) = counts.most_common(2)
assert space == " " and n_space > 2 * n_second  # "by far"
assert tokenizer.encode("π ≈")[[0, 2]].eq(0).all()
# sphinx_gallery_end_ignore

# %%
# The space is the most common character by far; ``π`` and ``≈`` are not in Python's
# documentation and became id 0.
#
# Training and validation text, and the baselines
# -----------------------------------------------
#
# :func:`attention.text.split_by_position` keeps the last tenth of the text for
# validation. A split by position, not by random characters: a character drawn at
# random would sit among training characters, and the model would be measured on
# passages it has read around it.

from attention.text import split_by_position

train_ids, val_ids = split_by_position(ids, val_fraction=0.1)
print(f"training: {len(train_ids):,} characters; validation: {len(val_ids):,}")
print(f"validation starts with {tokenizer.decode(val_ids[:60])!r}")

# %%
# How good is a loss? Two baselines fix the scale, each measured as the mean
# cross-entropy of the validation characters, in nats (natural log, the unit of
# PyTorch's ``cross_entropy``) and in bits per character (divided by :math:`\ln 2`):
#
# - **unigram**: every character drawn from the training text's character frequencies,
#   whatever came before;
# - **bigram**: the next character drawn from the frequencies of what followed the
#   current character in the training text, a :math:`V \times V` table of counts.
#
# Both add one to every count (Laplace smoothing), so that a pair never seen in training
# still gets a probability. A model that knows nothing, uniform over the :math:`V` ids,
# scores :math:`\ln V`.

import math

unigram_counts = torch.bincount(train_ids, minlength=V).double() + 1  # (V,)
unigram = -(unigram_counts / unigram_counts.sum()).log()[val_ids].mean().item()
pairs = train_ids[:-1] * V + train_ids[1:]  # (T - 1,): one id per (current, next) pair
bigram_counts = torch.bincount(pairs, minlength=V * V).double().view(V, V) + 1  # (V, V)
bigram_table = bigram_counts / bigram_counts.sum(dim=1, keepdim=True)  # rows sum to 1
bigram = -bigram_table.log()[val_ids[:-1], val_ids[1:]].mean().item()
baselines = {"uniform": math.log(V), "unigram": unigram, "bigram": bigram}
for name, nats in baselines.items():
    print(f"{name:8s} {nats:.3f} nats = {nats / math.log(2):.3f} bits per character")

# %%
# The model
# ---------
#
# The package's decoder, as on pages 12 to 14: three pre-LN blocks of width 64 with
# four query heads each, rotary positions (:class:`attention.RotaryEmbedding`), and a
# context of 128 characters. The four query heads of a layer share one key/value head
# (multi-query attention, as on
# :ref:`sphx_glr_tutorials_4_generation_13_kv_cache_gqa.py`): fewer key and value
# projections make each training step cheaper, and the key/value cache that generation
# uses four times smaller.

from attention import DecoderLM
from attention.training import count_parameters

CONTEXT = 128
torch.manual_seed(seed)
untrained = DecoderLM(
    V, embed_dim=64, num_heads=4, num_kv_heads=1, num_layers=3, max_len=CONTEXT,
    ffn_dim=128, positions="rotary",
)  # fmt: skip
print(f"{count_parameters(untrained):,} parameters")

# %%
# Training on random windows
# --------------------------
#
# The training text is one long sequence of ids, and the model reads 128 at a time.
# Each step draws a batch of windows that start at random positions
# (:func:`attention.text.random_windows`), and the model predicts characters 1 to 127
# of every window from the ones before, with teacher forcing and the causal mask, as on
# :ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py`.
#
# :func:`attention.recipes.fit_char_lm` trains this model with the package's one
# training loop, :func:`attention.training.train` (AdamW, a one-cycle learning rate), on
# one CPU thread so that the trained model does not depend on the machine's core count.
# Every 40 steps it measures the loss on 32 validation windows:
#
# .. literalinclude:: ../../../attention/recipes.py
#    :language: python
#    :pyobject: fit_char_lm
#    :no-docstring:

from attention.recipes import fit_char_lm
from attention.training import format_history

model, history, (recipe_train, recipe_val) = fit_char_lm(seed=seed)
print(format_history(history, every=40, keys=("val_loss",)))
# sphinx_gallery_start_ignore
assert torch.equal(recipe_val, val_ids) and torch.equal(recipe_train, train_ids)
assert model.config == untrained.config
# sphinx_gallery_end_ignore

# %%
# The training loss of every step, and the validation loss every 40 steps, against the
# baselines:

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt

steps = [row["step"] for row in history]
measured = [row for row in history if "val_loss" in row]
fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
training_loss = [row["loss"] for row in history]
ax.plot(steps, training_loss, color="C0", alpha=0.5, label="training")
ax.plot(
    [row["step"] for row in measured],
    [row["val_loss"] for row in measured],
    "o-",
    color="C1",
    label="validation (32 windows)",
)
for (name, nats), style in zip(baselines.items(), (":", "--", "-."), strict=True):
    ax.axhline(nats, color="gray", linestyle=style, label=f"{name} ({nats:.2f})")
ax.set_xlabel("training step")
ax.set_ylabel("cross-entropy (nats per character)")
ax.set_title("Loss during training, against the baselines")
ax.legend(loc="upper right")
plt.show()
# sphinx_gallery_end_ignore

# %%
# The loss falls through the unigram and then the bigram level. On the whole validation
# text, cut into windows of 128 laid end to end (:func:`attention.text.windows`):

from attention.text import windows
from attention.training import next_token_losses

model = model.to(device)
val_windows = windows(val_ids, CONTEXT).to(device)  # (W, 128)
by_position = next_token_losses(model, val_windows)  # (127,): targets 1..127
val_loss = by_position.mean().item()
print(
    f"validation loss {val_loss:.3f} nats = {val_loss / math.log(2):.3f} bits per "
    f"character; {bigram - val_loss:.3f} nats below the bigram, "
    f"{unigram - val_loss:.3f} below the unigram"
)
claim("validation loss below the bigram baseline (nats)", bigram - val_loss, above=0.3)

# %%
# Samples, before and after
# -------------------------
#
# :meth:`attention.DecoderLM.generate` continues a prompt one character at a time, with
# a key/value cache, each character drawn from the model's distribution
# (``temperature=1``). Eight continuations of one prompt at once (a batch of eight
# copies), with the same random numbers before and after training; the first of each is
# printed. To put a number on "writes words": the share of the sampled words (runs of
# three or more letters or underscores) that occur somewhere in the corpus.

import re

from attention.repro import num_threads

corpus_words = set(re.findall(r"[A-Za-z_]{3,}", text))
prompt = "Methods are functions that "
prompt_ids = tokenizer.encode(prompt)[None].expand(8, -1).to(device)  # (8, 27)
sampler = torch.Generator(device=device)


def continuations(lm, **options):
    """Eight continuations of the prompt, 80 characters each, as text."""
    sampler.manual_seed(seed)  # the same random numbers for every setting
    with num_threads(1):  # 80 small steps: one thread waits for no other
        out = lm.generate(prompt_ids, 80, generator=sampler, **options)  # (8, 27 + 80)
    return [tokenizer.decode(row[prompt_ids.shape[1] :].cpu()) for row in out]


def word_shares(samples):
    """Share of the words of ``samples`` found in the corpus, and share that repeat a
    word earlier in the same sample."""
    known = repeated = total = 0
    for sample in samples:
        words = re.findall(r"[A-Za-z_]{3,}", sample)
        known += sum(word in corpus_words for word in words)
        repeated += len(words) - len(set(words))
        total += len(words)
    return known / max(total, 1), repeated / max(total, 1)


samples = {
    "untrained": continuations(untrained.to(device), temperature=1.0),
    "trained": continuations(model, temperature=1.0),
}
for name, sampled in samples.items():
    known, _ = word_shares(sampled)
    print(
        f"--- {name} (words found in the corpus: {known:.0%}):\n{prompt}{sampled[0]}\n"
    )
untrained_loss = next_token_losses(untrained, val_windows[:32]).mean().item()
print(
    f"untrained model's validation loss {untrained_loss:.3f}; "
    f"ln V = {math.log(V):.3f}, unigram {unigram:.3f}"
)
# sphinx_gallery_start_ignore
claim("|untrained loss - ln V| (nats)", abs(untrained_loss - math.log(V)), below=0.5)
claim("untrained loss minus the unigram (nats)", untrained_loss - unigram, above=1.0)
# The prompt opens a topic of the validation text, which training never read.
assert prompt in tokenizer.decode(val_ids) and prompt not in tokenizer.decode(train_ids)
claim(
    "share of sampled words found in the corpus, untrained",
    word_shares(samples["untrained"])[0],
    below=0.05,
)
claim(
    "share of sampled words found in the corpus, trained",
    word_shares(samples["trained"])[0],
    above=0.05,
)
# sphinx_gallery_end_ignore

# %%
# The untrained model draws characters almost uniformly: its loss lies within half a nat
# of a uniform draw's, :math:`\ln V`, more than a nat above the unigram baseline, and
# hardly any of its "words" are words. The trained one writes word-like strings
# separated by spaces, a share of them real words; what it says means nothing. The
# prompt opens the topic "Methods", which lies in the validation text: the model never
# read what follows it.
#
# Temperature, top-k and top-p
# ----------------------------
#
# Generation draws each character from
# :func:`attention.language_model.sampling_distribution`: the logits :math:`z` divided
# by a *temperature* :math:`T` and turned into probabilities,
#
# .. math::
#     p_i = \frac{e^{z_i / T}}{\sum_j e^{z_j / T}},
#
# then optionally cut to the ``top_k`` most likely characters, or to the smallest set of
# most likely characters whose probabilities add up to ``top_p`` (the *nucleus*,
# :cite:t:`holtzman2020`), and renormalised over what is kept:
#
# .. literalinclude:: ../../../attention/language_model.py
#    :language: python
#    :pyobject: sampling_distribution
#    :no-docstring:
#
# :math:`T \to 0` puts all the probability on the most likely character (greedy
# decoding, ``temperature=0``); :math:`T = 1` samples the model as trained (the trained
# samples above); :math:`T > 1` flattens the distribution towards uniform. The same
# prompt and random numbers under five more settings, with the two shares of words over
# the eight samples of each:

settings = {
    "greedy (T = 0)": {"temperature": 0.0},
    "T = 0.5": {"temperature": 0.5},
    "T = 1": {"temperature": 1.0},
    "T = 1.5": {"temperature": 1.5},
    "T = 1, top-k = 5": {"temperature": 1.0, "top_k": 5},
    "T = 1, top-p = 0.9": {"temperature": 1.0, "top_p": 0.9},
}
shares = {}
for name, options in settings.items():
    sampled = samples["trained"] if name == "T = 1" else continuations(model, **options)
    shares[name] = word_shares(sampled)
    print(f"{name}: {prompt}{sampled[0]!r}")
print(f"\n{'setting':20s} {'words in the corpus':>20s} {'words repeated':>15s}")
for name, (known, repeated) in shares.items():
    print(f"{name:20s} {known:20.0%} {repeated:15.0%}")
# sphinx_gallery_start_ignore
claim(
    "repeated words, greedy minus T = 1",
    shares["greedy (T = 0)"][1] - shares["T = 1"][1],
    above=0.1,
)
claim(
    "words in the corpus, T = 0.5 minus T = 1.5",
    shares["T = 0.5"][0] - shares["T = 1.5"][0],
    above=0.1,
)
# sphinx_gallery_end_ignore

# %%
# Greedy decoding repeats itself: the most likely continuation of a phrase leads back
# to the phrase, the loop :cite:t:`holtzman2020` call degeneration. A low temperature
# writes more real words and a high one fewer. Top-k and top-p keep :math:`T = 1` but
# sample only from the head of the distribution, never from its tail of unlikely
# characters.
#
# What each setting does to the distribution, measured on every next-character
# prediction in 32 validation windows: the entropy of the distribution sampled from,
# against the temperature; the probability mass that top-k = 5 keeps; and the number of
# characters that top-p = 0.9 keeps.

from attention.language_model import sampling_distribution

with torch.no_grad():
    logits, _ = model(val_windows[:32])  # (32, 128, V)
logits = logits[:, :-1].reshape(-1, V)  # (32 * 127, V): one prediction per row
print(f"{len(logits):,} next-character distributions")


def entropy_bits(p):
    """Entropy of each row of probabilities, in bits."""
    return -(p * p.clamp_min(1e-30).log2()).sum(dim=-1)  # (rows,)


temperatures = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0]
entropies = [
    entropy_bits(sampling_distribution(logits, temperature=t)).mean().item()
    for t in temperatures
]
probabilities = sampling_distribution(logits, temperature=1.0)  # (rows, V)
top5_mass = probabilities.topk(5, dim=-1).values.sum(dim=-1)  # (rows,)
nucleus = sampling_distribution(logits, temperature=1.0, top_p=0.9)  # (rows, V)
kept = (nucleus > 0).sum(dim=-1)  # (rows,): characters kept by top-p = 0.9
# sphinx_gallery_start_ignore
assert torch.allclose(nucleus.sum(dim=-1), torch.ones_like(top5_mass))
assert all(a < b for a, b in zip(entropies, entropies[1:], strict=False))
# sphinx_gallery_end_ignore
print("mean entropy (bits) by temperature:")
print({t: round(h, 2) for t, h in zip(temperatures, entropies, strict=True)})
lowest, median = top5_mass.min().item(), top5_mass.median().item()
print(f"top-k = 5 keeps {lowest:.2f} to {top5_mass.max():.3f} (median {median:.2f})")
fewest, most = kept.min().item(), kept.max().item()
print(f"top-p = 0.9 keeps {fewest} to {most} characters (median {kept.median()})")
# sphinx_gallery_start_ignore
claim("fewest characters top-p = 0.9 keeps", fewest, below=2)
claim("most characters top-p = 0.9 keeps", most, above=20)

fig, axes = plt.subplots(1, 3, figsize=(9, 3.4), layout="constrained")
axes[0].plot(temperatures, entropies, "o-")
axes[0].axhline(math.log2(V), color="gray", linestyle=":", label=r"uniform, $\log_2 V$")
axes[0].set_xlabel("temperature $T$")
axes[0].set_ylabel("mean entropy (bits)")
axes[0].set_title("Temperature")
axes[0].legend(loc="lower right")  # below the curve, which rises to the right
axes[1].hist(top5_mass.cpu(), bins=30, color="C1")
axes[1].set_xlabel("probability mass kept")
axes[1].set_ylabel("predictions")
axes[1].set_title("top-k = 5: a fixed count")
axes[2].hist(kept.cpu(), bins=range(1, most + 2), color="C2")
axes[2].set_xlabel("characters kept")
axes[2].set_ylabel("predictions")
axes[2].set_title("top-p = 0.9: a fixed mass")
fig.suptitle("What each setting does to the next-character distribution")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Temperature moves the entropy smoothly, from near-certainty towards uniform. Top-k
# keeps five characters whatever their mass: where the model hesitates, they hold as
# little as the minimum printed above, and sampling among them alone distorts the
# model. Top-p keeps a fixed mass whatever the number of characters: a single one where
# the next character is nearly certain, tens where it is not. That adaptivity is the
# argument of :cite:t:`holtzman2020` for the nucleus.
#
# Reading the attention on a line of documentation
# ------------------------------------------------
#
# The first words of the validation topic "Methods", fed to the model on their own:
# each query attends to itself and the characters before it (spaces drawn as ``␣``).
# The first layer's four heads:

import matplotlib.pyplot as plt

from attention import plot_attention

line = "Methods are functions"
line_ids = tokenizer.encode(line)[None].to(device)  # (1, 21)
with torch.no_grad():
    _, line_weights = model(line_ids, need_weights=True)  # 3 layers x (1, H, 21, 21)
labels = [char.replace(" ", "␣") for char in line]
title = f"Layer 1: attention on {line!r}"
fig = plot_attention(line_weights[0][0], x_tokens=labels, title=title, vmax=1.0)
plt.show()
# sphinx_gallery_start_ignore
from attention.head_view import save_head_view

save_head_view("16-methods", labels, [w[0] for w in line_weights])  # (H, L, L) each
# sphinx_gallery_end_ignore

# %%
# The diagonal, a query's own character, and the cells just left of it, the characters
# before, hold much of the weight in this run's figure; the rest falls on characters
# further back, spread out or, in some rows, on one earlier character.
#
# .. head-view:: 16-methods

# %%
# The model in your browser
# -------------------------
#
# The site's build exports this very model to ONNX with
# :func:`attention.export.export_onnx` and checks that ONNX Runtime gives its logits to
# within :math:`10^{-4}`. On the site it runs in your browser (ONNX Runtime Web, about
# 15 MB, loaded only when you start it): type a prompt, sample with this page's
# temperature, top-k and top-p, and focus a character to see where each head of each
# layer looks. A downloaded notebook finds the widget on the site's copy of this page.
#
# .. widget:: language-model
#    :model: char-lm
#
# What to remember
# ----------------
#
# - A character-level language model is a decoder trained to predict the next
#   character of random windows of a text. Measure it on text it never read, split off
#   by position, against the unigram and bigram baselines.
# - Temperature reshapes the whole distribution; top-k keeps a fixed number of
#   characters, top-p a fixed probability mass, with as many characters as that takes.
#
# API used on this page: :func:`attention.text.python_docs`,
# :class:`attention.text.CharTokenizer`, :func:`attention.text.split_by_position`,
# :func:`attention.text.random_windows`, :func:`attention.text.windows`,
# :class:`attention.DecoderLM`, :func:`attention.recipes.fit_char_lm`,
# :func:`attention.training.train`, :func:`attention.training.next_token_losses`,
# :func:`attention.training.format_history`,
# :func:`attention.language_model.sampling_distribution`,
# :func:`attention.plot_attention`, :func:`attention.repro.claim`,
# :func:`attention.repro.num_threads`.
#
# Exercises
# ---------
#
# 1. **Which temperature fits real text?** The model was trained at :math:`T = 1`.
#    Measure its cross-entropy on the 32 validation windows above with the logits
#    divided by temperatures from 0.5 to 2: which is lowest?
# 2. **Sure and unsure.** Find a prediction where top-p = 0.9 keeps a single character,
#    and the one where it keeps the most, and print the 30 characters before each.
# 3. **A language model is a compressor.** An arithmetic coder driven by the model would
#    store the validation text in about ``val_loss / ln 2`` bits per character. How
#    does that compare with :mod:`lzma` compressing the validation text on its own, and
#    after the training text (the bytes it adds to the compressed training text)?
#
# .. solution 1
#
# Training minimises the cross-entropy at :math:`T = 1`, and the held-out text is best
# predicted at a temperature near 1.

import torch.nn.functional as F

targets = val_windows[:32, 1:].reshape(-1)  # (32 * 127,): the next characters
grid = [0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0]
fit = {t: F.cross_entropy(logits / t, targets).item() for t in grid}
best = min(fit, key=fit.get)
print({t: round(loss, 4) for t, loss in fit.items()}, f"lowest at T = {best}")
# sphinx_gallery_start_ignore
claim("temperature that fits the validation text best", best, above=0.8, below=1.2)
# sphinx_gallery_end_ignore

# %%
# .. solution 2

rows_kept = kept.view(32, CONTEXT - 1)[:, 29:]  # (windows, targets 30..127)
fewest_at = divmod(int(rows_kept.argmin()), rows_kept.shape[1])  # (window, column)
most_at = divmod(int(rows_kept.argmax()), rows_kept.shape[1])
for name, (w, c) in (("fewest", fewest_at), ("most", most_at)):
    before = tokenizer.decode(val_windows[w, c : c + 30].cpu())  # the 30 read
    print(f"top-p keeps {int(rows_kept[w, c])} ({name}) after {before!r}")
# sphinx_gallery_start_ignore
claim("fewest characters top-p = 0.9 keeps, after 30", rows_kept.min(), below=2)
# sphinx_gallery_end_ignore

# %%
# .. solution 3

import lzma

val_text, train_text = tokenizer.decode(val_ids), tokenizer.decode(train_ids)
alone = len(lzma.compress(val_text.encode())) * 8 / len(val_text)
together = len(lzma.compress((train_text + val_text).encode()))
added = (together - len(lzma.compress(train_text.encode()))) * 8 / len(val_text)
model_bits = val_loss / math.log(2)
print(
    f"bits per character: model {model_bits:.2f}, lzma alone {alone:.2f}, "
    f"lzma after the training text {added:.2f}"
)
# sphinx_gallery_start_ignore
claim("model minus lzma alone (bits per character)", model_bits - alone, above=0.0)
# sphinx_gallery_end_ignore

# %%
# This model compresses worse than :mod:`lzma`, which copies long repeated stretches
# (the borders of tables, repeated phrases) from anywhere before; the model sees 128
# characters and looks a few back.
#
# Next: how fast attention runs, and what it costs, in
# :ref:`sphx_glr_tutorials_5_scale_17_performance.py`.

# sphinx_gallery_thumbnail_number = 1
