"""
Training an attention classifier
================================

.. prerequisites:: 05_masks 07_transformer_block
   :summary: A small Transformer trained as a sentiment classifier in under a minute on
      a CPU: its training history, held-out accuracy and padding.

The pieces of the earlier pages, put to work: token embeddings, positions, two pre-LN
Transformer blocks of 4 heads each, and a linear head, trained as a sentiment classifier
on the small synthetic task of :mod:`attention.data`. The page builds the model, trains
it on one CPU thread in under a minute (the time is printed below), reads its training
history, evaluates it on held-out sentences of each kind, and checks that padding never
changes its answer.

:ref:`sphx_glr_tutorials_3_training_and_reading_11_visualising_attention.py` then reads
the trained model: what its heads look at, and which of them it needs.
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
# The task: sentiment with negation
# ---------------------------------
#
# :mod:`attention.data` generates the sentences in code, from a seed; nothing is
# downloaded. Each sentence holds filler words, exactly one *signal* word (``good``,
# ``great``, ``superb`` or ``bad``, ``awful``, ``dull``) and, sometimes, ``not``. The
# label is the signal word's sentiment, flipped when ``not`` stands *right before* it; a
# ``not`` anywhere else is a distraction that changes nothing. A bag of words cannot
# solve it: ``the movie was not good`` and ``not the movie was good`` have the same
# words and opposite labels. The model has to find the one informative word among
# fillers of random length, and look at the word just before it.
#
# :func:`attention.data.make_dataset` returns token ids padded with ``PAD_ID`` to a
# fixed length, and labels that index ``CLASSES``; :func:`attention.data.decode` turns
# ids back into words. A few generated sentences:

from attention.data import (
    CLASSES,
    NEGATIVE,
    PAD_ID,
    POSITIVE,
    VOCAB,
    decode,
    make_dataset,
)

tokens, labels = make_dataset(8, seed=1)
print(
    f"vocabulary: {len(VOCAB)} words; tokens {tuple(tokens.shape)}, labels "
    f"{tuple(labels.shape)}"
)
print(f"first sentence as ids: {tokens[0].tolist()}")
for ids, label in zip(tokens, labels, strict=True):
    print(f"  {CLASSES[label]:<9} {' '.join(decode(ids))}")

# %%
# The rule, written as code, reproduces every label (checked here on 4000 sentences):


def rule(ids):
    """The label of one sentence of ids, from its signal word and the word before it."""
    words = decode(ids)
    at = next(i for i, w in enumerate(words) if w in POSITIVE + NEGATIVE)
    positive = words[at] in POSITIVE
    negated = at > 0 and words[at - 1] == "not"
    return CLASSES.index("positive" if positive != negated else "negative")


check_tokens, check_labels = make_dataset(4000, seed=1)
agree = sum(
    rule(ids) == y for ids, y in zip(check_tokens, check_labels.tolist(), strict=True)
)
print(
    f"the rule gives the generated label for {agree} of {len(check_labels)} sentences"
)
# sphinx_gallery_start_ignore
assert agree == len(check_labels)
# sphinx_gallery_end_ignore

# %%
# The model
# ---------
#
# :class:`attention.AttentionClassifier` embeds the ids, adds the sinusoidal positions
# of :class:`attention.PositionalEncoding` (attention alone ignores word order, and this
# task depends on it), runs the pre-LN :class:`attention.TransformerBlock` s with a mask
# that hides the padding keys, normalises, pools the tokens into one vector per sentence
# and maps it to one logit per class:
#
# .. literalinclude:: ../../../attention/classifier.py
#    :language: python
#    :pyobject: AttentionClassifier.forward
#
# *Pooling.* The blocks give one vector per token; the linear head needs one per
# sentence. Two common choices: keep the *first token's* vector, as BERT does with a
# special ``[CLS]`` token placed at the start of every input, or take the *mean over the
# tokens*. Here there is no special token, and the first word is an ordinary word at a
# random distance from the signal word, so first-token pooling would make everything
# depend on what that one word gathers through attention. The mean gives the head a
# direct path from every token, including the signal word and its neighbour. It must be
# the mean over the *real* tokens only: ``real`` zeroes the padding positions before the
# sum, and the sum is divided by the number of real tokens, not by ``L``. The end of the
# page checks that this makes the prediction independent of the padding.
#
# Training
# --------
#
# :func:`attention.recipes.fit_sentiment_classifier` is the recipe the tutorials use:
# 4000 training sentences, 1000 held-out ones from another seed, a classifier with
# ``embed_dim=32``, 4 heads and 2 layers, no dropout, trained for 15 epochs:
#
# .. literalinclude:: ../../../attention/recipes.py
#    :language: python
#    :pyobject: fit_sentiment_classifier
#    :no-docstring:
#
# :func:`attention.training.train_classifier` cuts the training sentences into shuffled
# batches of 64, one pass over them per epoch, and measures the held-out accuracy after
# each epoch with :func:`attention.training.accuracy` (in evaluation mode). The steps
# themselves are the one loop every trained model of these pages goes through, plain
# PyTorch: AdamW, and a one-cycle learning rate that warms up to its peak and then
# decays on a cosine to almost 0:
#
# .. literalinclude:: ../../../attention/training.py
#    :language: python
#    :pyobject: train
#    :no-docstring:
#
# The recipe trains on the CPU, on one thread, so that the model does not depend on the
# machine's number of cores: threads split the sums inside each operation differently,
# the last bits of the results differ, and over hundreds of training steps those
# differences grow into a visibly different model. One thread is not enough to make the
# model the same on every machine, though: the processor's vector instructions (none,
# AVX2 or AVX-512, chosen by PyTorch at start-up) round sums differently too. So every
# statement this page and the next make about the trained model is a ``claim`` checked
# over several seeds (``ATTENTION_SEED``) on each instruction set, with one or two
# threads.
#
# The recipe trains once per process and hands out copies: in the site's build,
# :ref:`sphx_glr_tutorials_3_training_and_reading_11_visualising_attention.py` gets the
# model trained here without training it again. The recipe does not print; the history
# it returns has one record per epoch, which
# :func:`attention.training.format_history` turns into progress lines:

from attention.recipes import fit_sentiment_classifier
from attention.training import format_history

model, history, (held_out_tokens, held_out_labels) = fit_sentiment_classifier(seed=seed)
print(format_history(history, keys=("train_acc", "val_acc")))
print(
    f"{len(history)} epochs in {history[-1]['seconds']:.1f} s on one CPU thread "
    f"(float32, torch {torch.__version__})"
)

# %%
# ``train acc`` is the *running* accuracy on the training batches, counted while the
# epoch's steps change the weights; ``val acc`` is measured on the 1000 held-out
# sentences, once the epoch is over. The curves:

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt

epochs = [row["epoch"] for row in history]
fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(8, 3.8), layout="constrained")
loss_ax.plot(epochs, [row["loss"] for row in history], "o-")
loss_ax.set_xlabel("epoch")
loss_ax.set_ylabel("mean training loss (cross-entropy)")
loss_ax.set_ylim(bottom=0)
loss_ax.set_title("Training loss")
acc_ax.plot(
    epochs, [row["train_acc"] for row in history], "o-", label="training (running)"
)
acc_ax.plot(epochs, [row["val_acc"] for row in history], "s-", label="held-out")
acc_ax.axhline(0.5, color="gray", linestyle=":", label="chance")
acc_ax.set_xlabel("epoch")
acc_ax.set_ylabel("accuracy")
acc_ax.set_ylim(0.4, 1.02)
acc_ax.legend(loc="lower right")
acc_ax.set_title("Accuracy")
fig.suptitle("Training the attention classifier")
plt.show()
# sphinx_gallery_end_ignore

# %%
# The training starts slowly: for the first epoch or two the held-out accuracy stays
# near chance and the loss near :math:`\ln 2 \approx 0.69`, the loss of a coin toss.
# Then the loss falls and both accuracies climb. While they climb, the two curves
# disagree by several points, and not only in the direction of overfitting: the
# running training accuracy averages over an epoch in which the weights improve, while
# the held-out accuracy is measured with the better weights at its end, so the held-out
# curve is the higher one in several epochs (in at least four in every run this page
# was checked on), and in most runs the widest gap is in its favour (in all 30 runs that
# tuned the page and in 57 of 60 on seeds never used to tune it); how many epochs go
# each way, and the widest gap each way, are printed below. By the last epoch they are
# within a few points of each other, and the loss is below 0.15. In numbers, from the
# history above:

val_acc = [row["val_acc"] for row in history]
train_acc = [row["train_acc"] for row in history]
slow_start = next(i for i, acc in enumerate(val_acc) if acc >= 0.6)  # epochs below 60%
gaps = [v - t for v, t in zip(val_acc, train_acc, strict=True)]  # held-out - training
widest = max(range(len(gaps)), key=lambda i: abs(gaps[i]))
print(
    f"epochs below 60% held-out accuracy at the start: {slow_start}; loss after "
    f"epoch 1: {history[0]['loss']:.3f} (ln 2 = 0.693)"
)
training_ahead = min(range(len(gaps)), key=lambda i: gaps[i])
print(
    f"widest gap, held-out minus training: {100 * gaps[widest]:+.1f} points "
    f"at epoch {widest + 1}; held-out the higher in {sum(g > 0 for g in gaps)} of "
    f"{len(gaps)} epochs"
)
print(
    f"widest gap with training ahead: {-100 * min(gaps[training_ahead], 0):.1f} points "
    f"at epoch {training_ahead + 1}; training the higher in "
    f"{sum(g < 0 for g in gaps)} epochs"
)
print(
    f"last epoch: held-out minus training {100 * gaps[-1]:+.1f} points, "
    f"loss {history[-1]['loss']:.3f}"
)
# sphinx_gallery_start_ignore
claim(
    "epochs below 60% held-out accuracy at the start", slow_start, above=0.5, below=2.5
)
claim("loss after epoch 1 / ln 2", history[0]["loss"] / 0.6931, above=0.95, below=1.1)
claim("epochs with held-out above training", sum(g > 0 for g in gaps), above=3)
claim("last epoch, |held-out - training| (points)", 100 * abs(gaps[-1]), below=8)
claim("last epoch, training loss", history[-1]["loss"], below=0.15)
# sphinx_gallery_end_ignore

# %%
# Evaluation, sentence by sentence
# --------------------------------
#
# One accuracy over the 1000 held-out sentences hides *which* sentences the model gets
# right. The generator makes four kinds in about equal numbers: no ``not``; a ``not``
# that flips the signal word; only a distracting ``not``; and both. Only a model that
# reads word order can tell the second kind from the third: they hold the same words.
# So next to the model, the best rule blind to word order, which sees only which words
# a sentence holds: a ``not`` flips the signal word. It is right on every sentence
# except those whose only ``not`` is a distraction, and no rule blind to order can
# expect to do better. The generator (:func:`attention.data.make_dataset`) puts a
# flipping ``not`` in half the sentences and, independently, a distracting one in half,
# at a position drawn uniformly; so for any set of words with one ``not``, the
# sentences whose ``not`` flips the signal word and those whose ``not`` distracts are
# equally likely, and they carry opposite labels. In a sample they come in different
# numbers by chance (the counts of the two kinds are printed below).

model = model.to(device)
held_out_tokens = held_out_tokens.to(device)
held_out_labels = held_out_labels.to(device)
with torch.no_grad():
    logits = model(held_out_tokens)[0]  # (N, C)
right = logits.argmax(-1) == held_out_labels  # (N,)

real = held_out_tokens != PAD_ID  # (N, L)
signal_ids = torch.tensor([VOCAB.index(w) for w in POSITIVE + NEGATIVE], device=device)
is_signal = torch.isin(held_out_tokens, signal_ids)  # one per sentence  (N, L)
is_not = held_out_tokens == VOCAB.index("not")  # (N, L)
flips = (is_not[:, :-1] & is_signal[:, 1:]).any(1)  # a "not" right before the signal
distracts = is_not.sum(1) > flips.long()  # a "not" anywhere else  (N,)
kinds = {
    "no 'not'": ~flips & ~distracts,
    "flipping 'not'": flips & ~distracts,
    "distracting 'not'": ~flips & distracts,
    "both": flips & distracts,
}
signal_positive = torch.isin(
    held_out_tokens, torch.tensor([VOCAB.index(w) for w in POSITIVE], device=device)
).any(1)  # (N,)
order_blind = (signal_positive != is_not.any(1)).long()  # "a 'not' flips"  (N,)
order_blind_right = order_blind == held_out_labels

print("kind                sentences   model   order-blind rule")
for kind, chosen in kinds.items():
    print(
        f"{kind:<18}  {int(chosen.sum()):9d}  {right[chosen].float().mean():6.1%}"
        f"   {order_blind_right[chosen].float().mean():6.1%}"
    )
held_out_accuracy = right.float().mean().item()
print(
    f"all                 {len(right):9d}  {held_out_accuracy:6.1%}"
    f"   {order_blind_right.float().mean():6.1%}"
)
claim("held-out accuracy", held_out_accuracy, above=0.9)
# sphinx_gallery_start_ignore
for kind, chosen in kinds.items():
    claim(f"held-out accuracy, {kind}", right[chosen].float().mean(), above=0.75)
assert (order_blind_right[kinds["distracting 'not'"]] == 0).all()
assert all(order_blind_right[kinds[k]].all() for k in ("no 'not'", "flipping 'not'"))
# sphinx_gallery_end_ignore

# %%
# The model is right on most sentences of every kind, including those with only a
# distracting ``not``, on which the order-blind rule is always wrong: it has learned
# where the ``not`` stands.
#
# Padding never receives attention
# --------------------------------
#
# Held-out sentences are padded to 12 positions. The mask built in ``forward`` hides the
# padding keys, and :func:`attention.scaled_dot_product_attention` gives a hidden key a
# weight of exactly 0, not merely a small one (:ref:`blocking-keys` shows how). With
# ``need_weights=True`` the classifier returns every layer's weights; in every layer and
# head of the trained model:

with torch.no_grad():
    _, weights = model(held_out_tokens, need_weights=True)  # per layer (N, H, L, L)
pad_keys = ~real[:, None, None, :]  # (N, 1, 1, L)
largest_on_padding = max(w.masked_select(pad_keys).abs().max().item() for w in weights)
print(
    "largest attention weight on a padding key, all layers and heads: "
    f"{largest_on_padding}"
)
assert all((w.masked_select(pad_keys) == 0).all() for w in weights)

# %%
# The padding positions are still *queries*: they attend to the real words and get
# outputs, which the pooling then drops. So the amount of padding should not matter at
# all. Take the held-out sentences of at most 8 words, and classify them padded to 8 and
# to 12 positions:

short = real.sum(1) <= 8
padded_12 = held_out_tokens[short]  # (n, 12)
padded_8 = padded_12[:, :8]  # the same sentences, 4 padding tokens fewer  (n, 8)
token_outputs = {}  # the per-token vectors before pooling, recorded by a forward hook
hook = model.norm.register_forward_hook(
    lambda m, args, out: token_outputs.update(x=out)
)
with torch.no_grad():
    logits_8 = model(padded_8)[0]  # (n, C)
    outputs_8 = token_outputs["x"]  # (n, 8, E)
    logits_12 = model(padded_12)[0]  # (n, C)
    outputs_12 = token_outputs["x"]  # (n, 12, E)
hook.remove()
change = (logits_12 - logits_8).abs().max().item()
print(
    f"{int(short.sum())} sentences; logits, padded to 12 vs 8: largest change "
    f"{change:.1e}"
)
assert torch.allclose(logits_12, logits_8, atol=1e-4)  # float32 rounding

# %%
# The logits agree to float32 rounding (the value printed above). Pooling with a plain
# mean over all ``L`` positions, padding included, would not have this property: the
# padding positions' outputs would be averaged in, with a weight that grows with the
# padding:

plain_8, plain_12 = outputs_8.mean(1), outputs_12.mean(1)  # (n, E) each
lengths = real[short].sum(1, keepdim=True)  # (n, 1)
masked_8 = (outputs_8 * real[short, :8, None]).sum(1) / lengths  # (n, E)
masked_12 = (outputs_12 * real[short, :, None]).sum(1) / lengths  # (n, E)
plain_change = (plain_12 - plain_8).abs().max().item()
masked_change = (masked_12 - masked_8).abs().max().item()
print(
    f"pooled vector, padded to 12 vs 8: plain mean changes by up to {plain_change:.2f}"
)
print(
    "                                  mean over real tokens by up to "
    f"{masked_change:.1e}"
)
# sphinx_gallery_start_ignore
assert plain_change > 0.1 and masked_change < 1e-4  # float32 rounding
# sphinx_gallery_end_ignore

# %%
# What to remember
# ----------------
#
# - Two small attention layers learn a task that needs word order (the positional
#   encoding tells the heads where a word stands), on one CPU thread, in the time
#   printed above.
# - Read the whole history: this training stays at chance for its first epochs before
#   it takes off, and a running training accuracy lags a held-out accuracy measured at
#   the end of the epoch while the model learns fast.
# - Evaluate by kind of input, next to a baseline that lacks the ability under test:
#   here the sentences with only a distracting ``not`` separate a model that reads
#   order from one that does not.
# - Pool over the real tokens only (or use a dedicated first token trained for it), and
#   mask the padding keys: padding then gets weight exactly 0 and cannot change the
#   prediction.
#
# API used on this page: :class:`attention.AttentionClassifier`,
# :func:`attention.data.make_dataset`, :func:`attention.data.decode`,
# :func:`attention.recipes.fit_sentiment_classifier`,
# :func:`attention.training.format_history` and
# :func:`attention.training.count_parameters`.

# %%
# Exercises
# ---------
#
# 1. **Count the parameters by hand.** The model has ``embed_dim`` :math:`E = 32`,
#    2 blocks with ``ffn_dim`` :math:`4E`, a vocabulary of ``len(VOCAB)`` words and
#    ``len(CLASSES)`` classes. Write its number of parameters as a formula, part by
#    part, and compare with :func:`attention.training.count_parameters`. How many
#    parameters do the positions add?
# 2. **Finish the forward pass by hand.** The forward hook above recorded the per-token
#    vectors after the final LayerNorm, for the short sentences padded to 12. Pool them
#    over the real tokens, apply the linear head ``model.head``, and compare with
#    ``logits_12``. What do the plainly averaged vectors give instead?
# 3. **Draw the learning rate.** Build the optimiser and the schedule that
#    :func:`attention.training.train` builds, for the recipe's learning rate and number
#    of steps (15 epochs of 4000 sentences in batches of 64), step them without any
#    training, and plot the learning rate against the step. At which step does it peak,
#    and how small is it at the end?

# %%
# .. solution 1
#
# The sinusoidal positions of :class:`attention.PositionalEncoding` are a fixed buffer,
# not parameters: they add none. The embedding counts its padding row too.

from attention.training import count_parameters

E, C = model.embedding.embedding_dim, len(CLASSES)
attention_params = 4 * (E * E + E)  # q, k, v and out projections, with biases
ffn_params = (E * 4 * E + 4 * E) + (4 * E * E + E)  # linear1, linear2
norm_params = 2 * 2 * E  # norm1 and norm2: a gain and a bias each
by_hand = (
    len(VOCAB) * E  # the embedding
    + len(model.blocks) * (attention_params + ffn_params + norm_params)
    + 2 * E  # the final LayerNorm
    + (E * C + C)  # the linear head
)
print(f"by hand {by_hand:,}; count_parameters {count_parameters(model):,}")
print(f"parameters of the positional encoding: {count_parameters(model.positions)}")
# sphinx_gallery_start_ignore
assert by_hand == count_parameters(model) and count_parameters(model.positions) == 0
# sphinx_gallery_end_ignore

# %%
# .. solution 2
#
# Pooled over the real tokens, the head reproduces the model's logits to float32
# rounding; pooled with the plain mean, the same vectors give other logits.

with torch.no_grad():
    by_hand_logits = model.head(masked_12)  # (n, E) -> (n, C)
    plain_logits = model.head(plain_12)  # (n, C)
print(
    "largest |logits by hand - model's logits|: "
    f"{(by_hand_logits - logits_12).abs().max():.1e}; with the plain mean: "
    f"{(plain_logits - logits_12).abs().max():.2f}"
)
# sphinx_gallery_start_ignore
assert torch.allclose(by_hand_logits, logits_12, atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# .. solution 3
#
# ``OneCycleLR`` warms up for the first 30% of the steps (its default ``pct_start``),
# from ``lr / 25`` to ``lr``, then follows a cosine down to ``lr / 25 / 10**4``.
# Stepping the schedule needs an optimiser but no gradients: ``optimizer.step()`` with
# no gradients changes nothing.

steps = len(history) * -(-4000 // 64)  # 15 epochs of 63 batches
optimizer = torch.optim.AdamW(torch.nn.Linear(1, 1).parameters(), lr=5e-3)
schedule = torch.optim.lr_scheduler.OneCycleLR(
    optimizer, max_lr=5e-3, total_steps=steps
)
rates = []
for _ in range(steps):
    rates.append(schedule.get_last_lr()[0])
    optimizer.step()
    schedule.step()
peak = max(range(steps), key=rates.__getitem__)
print(f"{steps} steps; peak {rates[peak]:.1e} at step {peak + 1}; last {rates[-1]:.1e}")

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
ax.plot(range(1, steps + 1), rates)
ax.set_xlabel("step")
ax.set_ylabel("learning rate")
ax.set_title("The recipe's one-cycle learning rate")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Next: :ref:`sphx_glr_tutorials_3_training_and_reading_11_visualising_attention.py`
# reads what the trained model's heads do.

# sphinx_gallery_thumbnail_number = 1
