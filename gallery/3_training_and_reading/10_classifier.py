"""
Application: an attention text classifier
=========================================

.. prerequisites:: 05_masks 07_transformer_block

The pieces of the earlier pages, put to work: token embeddings, positions, two pre-LN
Transformer blocks of 4 heads each, and a linear head, trained as a sentiment classifier
on the small synthetic task of :mod:`attention.data`. It trains on the CPU in seconds,
with one progress line per epoch. The page then looks inside the trained model: the
attention it learned on real example sentences, which heads it cannot do without
(switching them off one at a time), how it pools the tokens into one vector, and why
padding never changes its answer.

:ref:`sphx_glr_tutorials_08_visualising_attention.py` reads the same model's heads in
more detail.
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
assert agree == len(check_labels)

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
# .. literalinclude:: ../../attention/classifier.py
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
# :func:`attention.training.fit_sentiment_classifier` runs the recipe the tutorials use:
# 4000 training sentences, 1000 held-out ones from another seed, a classifier with
# ``embed_dim=32``, 4 heads and 2 layers, no dropout, trained for 15 epochs:
#
# .. literalinclude:: ../../attention/training.py
#    :language: python
#    :pyobject: _fit_sentiment_classifier
#
# It runs the recipe once per seed and keeps the model for the rest of the process: in
# the site's build, :ref:`sphx_glr_tutorials_08_visualising_attention.py` already
# trained this model, so this page gets a copy and the same progress lines. Run on its
# own, the page trains it itself, into the same model.
#
# The loop itself, :func:`attention.training.train_classifier`, is plain PyTorch: AdamW,
# cross-entropy, a one-cycle learning-rate schedule (a warm-up, then a cosine decay to
# almost 0), and one progress line per epoch with the held-out accuracy, measured by
# :func:`attention.training.accuracy` in evaluation mode:
#
# .. literalinclude:: ../../attention/training.py
#    :language: python
#    :pyobject: train_classifier
#
# The recipe trains on the CPU, on one thread, so that the model does not depend on the
# machine's number of cores: threads split the sums inside each operation differently,
# the last bits of the results differ, and over hundreds of training steps those
# differences grow into a visibly different model. One thread is not enough to make the
# model the same on every machine, though: the processor's vector instructions (none,
# AVX2 or AVX-512, chosen by PyTorch at start-up) round sums differently too. So nothing
# below depends on one particular model: heads are picked by what they do, never by
# their number, and every claim is checked for ten seeds (``ATTENTION_SEED``) on each
# instruction set.

from attention.training import accuracy, fit_sentiment_classifier

model, history, (held_out_tokens, held_out_labels) = fit_sentiment_classifier(seed=seed)
print(
    f"{len(history)} epochs in {history[-1]['seconds']:.1f} s on one CPU thread "
    f"(float32, torch {torch.__version__})"
)

# %%
# The curves:

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

# %%
# The first epoch stays near chance; then the loss falls, and the held-out accuracy, on
# 1000 sentences the model never saw, follows the training accuracy to within a few
# points (the gap is printed below):

model = model.to(device)
held_out_tokens, held_out_labels = (
    held_out_tokens.to(device),
    held_out_labels.to(device),
)
held_out_accuracy = accuracy(model, held_out_tokens, held_out_labels)
print(f"held-out accuracy: {held_out_accuracy:.1%} of {len(held_out_labels)} sentences")
print(
    f"after epoch 1: {history[0]['val_acc']:.1%}; gap to the final training accuracy: "
    f"{abs(history[-1]['train_acc'] - held_out_accuracy):.1%}"
)
claim("held-out accuracy", held_out_accuracy, above=0.85)
claim("held-out accuracy after epoch 1", history[0]["val_acc"], below=0.6)
claim(
    "training minus held-out accuracy",
    abs(history[-1]["train_acc"] - held_out_accuracy),
    below=0.1,
)

# %%
# What the model looks at
# -----------------------
#
# The classifier returns every layer's weights with ``need_weights=True``. A head that
# reads the ``not`` s is the natural one to look at first: take the head (of either
# layer) that puts the most weight on ``not`` over the held-out sentences, and draw it
# on three of them, one without ``not``, one where ``not`` flips the signal word, and
# one with only a distracting ``not``: the first held-out sentence of each kind that the
# model classifies right (nearly all of them are, as the accuracy above says). The axes
# carry each sentence's words (padding dropped), and the three panels share one colour
# scale:

from attention import plot_attention

with torch.no_grad():
    logits, weights = model(held_out_tokens, need_weights=True)
probabilities = logits.softmax(-1)  # (N, C)

real = held_out_tokens != PAD_ID  # (N, L)
signal_ids = torch.tensor([VOCAB.index(w) for w in POSITIVE + NEGATIVE], device=device)
is_signal = torch.isin(held_out_tokens, signal_ids)  # one per sentence  (N, L)
is_not = held_out_tokens == VOCAB.index("not")  # (N, L)
flipping = torch.zeros_like(is_not)
# the "not" right before the signal
flipping[:, :-1] = is_not[:, :-1] & is_signal[:, 1:]
kinds = {
    "no 'not'": ~is_not.any(1),
    "flipping 'not'": flipping.any(1) & (is_not.sum(1) == 1),
    "distracting 'not'": ~flipping.any(1) & (is_not.sum(1) == 1),
}


def mean_weight(layer, head, keys, sentences):
    """
    Mean, over the real queries of ``sentences`` (N,), of the weight on ``keys`` (N, L).
    """
    on_keys = (weights[layer - 1][:, head] * keys[:, None, :]).sum(-1)  # (N, L)
    queries = real & sentences[:, None]
    return (on_keys * queries).sum().item() / queries.sum().item()


heads = [
    (layer, head)
    for layer in (1, 2)
    for head in range(model.blocks[0].self_attn.num_heads)
]
not_layer, not_head = max(heads, key=lambda lh: mean_weight(*lh, is_not, is_not.any(1)))

fig, axes = plt.subplots(1, 3, figsize=(9, 4.8), layout="constrained")
for ax, (kind, chosen) in zip(axes, kinds.items(), strict=True):
    right = chosen & (probabilities.argmax(-1) == held_out_labels)  # (N,)
    # the first held-out sentence of this kind, classified right
    i = int(right.nonzero()[0])
    words, n = decode(held_out_tokens[i]), int(real[i].sum())
    predicted = int(probabilities[i].argmax())
    panel = weights[not_layer - 1][i, not_head, :n, :n]  # (L, S) of this sentence
    # one colour scale for the three
    plot_attention(panel, x_tokens=words, ax=ax, vmax=1.0)
    # three short lines at 10 pt: the panels are narrow, each with its colour bar
    ax.set_title(
        f"{kind}\npredicted {CLASSES[predicted]}\n({probabilities[i, predicted]:.0%})",
        fontsize=10,
    )
    if kind == "flipping 'not'":  # its column is the brightest of the panel
        columns = panel.sum(0)  # (S,)
        not_column = columns[words.index("not")]
        claim(
            "flipping 'not' column / the next brightest",
            not_column / columns[[w != "not" for w in words[:n]]].max(),
            above=1,
        )
fig.suptitle(f"Layer {not_layer}, head {not_head} on three held-out sentences")
plt.show()

# %%
# Each panel's title gives the model's prediction and its confidence. In the middle
# panel, the ``not`` that flips the signal word has the brightest column. Over all
# held-out sentences of each kind, the weight every word puts on the signal word and on
# the ``not``:

on = {}
for kind, chosen in kinds.items():
    on[kind] = [
        mean_weight(not_layer, not_head, keys, chosen) for keys in (is_signal, is_not)
    ]
    print(
        f"{kind:<18} ({int(chosen.sum()):3d} sentences): on the signal word "
        f"{on[kind][0]:.2f}, "
        f"on the 'not' {on[kind][1]:.2f}"
    )
uniform = (1 / real.sum(1).float()).mean().item()
print(f"(a uniform head: {uniform:.2f} on any one word)")
claim(
    "flipping 'not': weight on the 'not' / uniform",
    on["flipping 'not'"][1] / uniform,
    above=2,
)

# %%
# With a ``not`` that flips the signal word, this head sends it, on average over the
# words, more than twice the share of weight a uniform head would (the values printed
# above). What it does in a sentence without any ``not`` is not what it was picked for,
# and differs from one trained model to the next: on some machines and seeds it falls
# back on the signal word, on others it spreads its weight (rerun the page with another
# ``ATTENTION_SEED`` to see it change). So this page claims only what the choice
# guarantees: the head picked for reading ``not`` reads ``not``. Compare the distracting
# row with the flipping one to see whether this head also tells the two kinds of ``not``
# apart. (If it is a second-layer head, remember that each position it reads already
# mixes what the first layer gathered around it.)
# :ref:`sphx_glr_tutorials_08_visualising_attention.py` measures which head lets the
# signal word find the ``not`` right before it.

# %%
# Switching heads off: which heads matter?
# ----------------------------------------
#
# Each block's attention computes its 4 heads, concatenates them and applies
# ``out_proj``:
#
# .. literalinclude:: ../../attention/multi_head.py
#    :language: python
#    :pyobject: merge_heads
#
# So the input of ``out_proj`` is :math:`(N, L, E)` with head :math:`h` in the columns
# :math:`hD` to :math:`(h+1)D - 1`, :math:`D = E/H`. Zeroing those columns removes head
# :math:`h`'s contribution from the block and leaves the other heads untouched (the bias
# of ``out_proj`` is still added). A *forward pre-hook* does it without editing the
# model: PyTorch calls it with the module's inputs just before ``forward``, and uses
# what it returns instead.


def switch_off(block, head):
    """Zero ``head``'s slice of the input of ``block.self_attn.out_proj``; returns the
    hook.
    """
    D = block.self_attn.head_dim

    def zero_head(module, args):
        merged = args[0].clone()  # (N, L, E)
        merged[..., head * D : (head + 1) * D] = 0  # head `head` sits in these columns
        return (merged,)

    return block.self_attn.out_proj.register_forward_pre_hook(zero_head)


H = model.blocks[0].self_attn.num_heads
drops = {}  # (layer, head) -> accuracy lost
for layer, block in enumerate(model.blocks, 1):
    for head in range(H):
        handle = switch_off(block, head)
        drops[layer, head] = held_out_accuracy - accuracy(
            model, held_out_tokens, held_out_labels
        )
        handle.remove()
    print(
        f"layer {layer}, accuracy points lost without head "
        + ", ".join(f"{h}: {100 * drops[layer, h]:.1f}" for h in range(H))
    )
# hooks removed
assert accuracy(model, held_out_tokens, held_out_labels) == held_out_accuracy

# %%

fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
names = [f"layer {layer}\nhead {head}" for layer, head in drops]
colours = ["C0" if layer == 1 else "C1" for layer, _ in drops]
ax.bar(names, [100 * d for d in drops.values()], color=colours)
ax.set_ylabel("held-out accuracy lost (points)")
ax.set_xlabel("head switched off")
ax.set_title("Head ablation: the accuracy lost without each head")
plt.show()

most = max(drops, key=drops.get)
least = min(drops, key=drops.get)
print(f"most needed:  layer {most[0]}, head {most[1]} ({100 * drops[most]:.1f} points)")
print(
    f"least needed: layer {least[0]}, head {least[1]} ({100 * drops[least]:.1f} points)"
)
claim("accuracy lost without the most needed head", drops[most], above=0.05)
claim("accuracy lost without the least needed head", drops[least], below=0.05)

# %%
# The heads are far from equal: losing the most needed one costs many points, the least
# needed a few at most (the values printed above). The ``not`` head drawn earlier
# costs:

print(
    f"the 'not' head, layer {not_layer}, head {not_head}: "
    f"{100 * drops[not_layer, not_head]:.1f} points"
)

# %%
# A heatmap and an ablation answer different questions: where a head reads from, and
# whether the model needs what it reads.
#
# Padding never receives attention
# --------------------------------
#
# Held-out sentences are padded to 12 positions. The mask built in ``forward`` hides the
# padding keys, and :func:`attention.scaled_dot_product_attention` gives a hidden key a
# weight of exactly 0, not merely a small one (:ref:`blocking-keys` shows how). In every
# layer and head of the trained model:

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
    logits_8 = model(padded_8)[0]
    outputs_8 = token_outputs["x"]  # (n, 8, E)
    logits_12 = model(padded_12)[0]
    outputs_12 = token_outputs["x"]  # (n, 12, E)
hook.remove()
change = (logits_12 - logits_8).abs().max().item()
print(
    f"{int(short.sum())} sentences; logits, padded to 12 vs 8: largest change "
    f"{change:.1e}"
)
assert torch.allclose(logits_12, logits_8, atol=1e-5)

# %%
# The logits agree to float32 rounding (the value printed above). Pooling with a plain
# mean over all ``L`` positions, padding included, would not have this property: the
# padding positions' outputs would be averaged in, with a weight that grows with the
# padding:

plain_8, plain_12 = outputs_8.mean(1), outputs_12.mean(1)  # (n, E) each
masked_8 = (outputs_8 * real[short, :8, None]).sum(1) / real[short].sum(1, keepdim=True)
masked_12 = (outputs_12 * real[short, :, None]).sum(1) / real[short].sum(
    1, keepdim=True
)
plain_change = (plain_12 - plain_8).abs().max().item()
masked_change = (masked_12 - masked_8).abs().max().item()
print(
    f"pooled vector, padded to 12 vs 8: plain mean changes by up to {plain_change:.2f}"
)
print(
    "                                  mean over real tokens by up to "
    f"{masked_change:.1e}"
)
assert plain_change > 0.1 and masked_change < 1e-5

# %%
# What to remember
# ----------------
#
# - Two small attention layers learn a task that needs word order (the positional
#   encoding tells the heads where a word stands), on one CPU thread, in the time
#   printed above.
# - Pool over the real tokens only (or use a dedicated first token trained for it), and
#   mask the padding keys: padding then gets weight exactly 0 and cannot change the
#   prediction.
# - A forward pre-hook on ``out_proj`` switches off one head without touching the model;
#   here the heads turn out far from equal.
# - Heatmaps show which position a head reads from; what that position holds depends on
#   the layers below.
#
# API used on this page: :class:`attention.AttentionClassifier`,
# :class:`attention.PositionalEncoding`, :class:`attention.TransformerBlock`,
# :func:`attention.plot_attention`, :func:`attention.scaled_dot_product_attention`,
# :func:`attention.data.make_dataset`, :func:`attention.data.decode`,
# :func:`attention.training.fit_sentiment_classifier`,
# :func:`attention.training.train_classifier` and :func:`attention.training.accuracy`;
# the head layout of ``merge_heads`` is explained in
# :ref:`sphx_glr_tutorials_04_multi_head.py`.

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
# 3. **Switch a head off in the weights.** The pre-hook zeroes a head's columns of the
#    *input* of ``out_proj``. Do the same to a copy of the model by zeroing the matching
#    columns of ``out_proj.weight`` instead, for the most needed head, and check that
#    both give the same logits on the held-out set.

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
assert by_hand == count_parameters(model) and count_parameters(model.positions) == 0

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
assert torch.allclose(by_hand_logits, logits_12, atol=1e-5)

# %%
# .. solution 3
#
# Column :math:`j` of ``out_proj.weight`` multiplies input feature :math:`j`, so zeroing
# the column removes the same term of the sum as zeroing the feature.

import copy

layer, head = most
pruned = copy.deepcopy(model)
D = pruned.blocks[layer - 1].self_attn.head_dim
with torch.no_grad():
    pruned.blocks[layer - 1].self_attn.out_proj.weight[:, head * D : (head + 1) * D] = 0
    handle = switch_off(model.blocks[layer - 1], head)
    hooked_logits = model(held_out_tokens)[0]  # (N, C)
    handle.remove()
    pruned_logits = pruned(held_out_tokens)[0]  # (N, C)
print(
    f"layer {layer}, head {head} off, hook against weights: logits differ by up to "
    f"{(hooked_logits - pruned_logits).abs().max():.1e}; accuracy "
    f"{accuracy(pruned, held_out_tokens, held_out_labels):.1%}"
)
assert torch.allclose(hooked_logits, pruned_logits, atol=1e-5)

# %%
# Next: :ref:`sphx_glr_tutorials_12_performance.py`, on the speed of attention.

# sphinx_gallery_thumbnail_number = 3
