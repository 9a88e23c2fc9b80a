"""
Building masks
==============

.. prerequisites:: 04_multi_head
   :summary: The causal and padding masks: built, drawn, combined and applied to a
      multi-head layer, with what they do to its weights.

A mask decides which keys a query may attend to. Two masks do almost all the work: the
*causal* (look-ahead) mask, which stops a token from reading the tokens after it, and
the *padding* mask, which stops every token from reading the filler tokens that make
sentences of different lengths fit in one batch. This page builds both, draws them,
combines them, applies them to a multi-head attention layer and checks what they do to
its weights and outputs.

The package's own convention, used everywhere, is a **bool** mask where ``True`` means
*may attend*; PyTorch's other conventions, and what happens at their edges, are the
subject of the next page,
:ref:`sphx_glr_tutorials_1_foundations_06_mask_conventions.py`.
"""

# %%
# Setup
# -----

import torch

from attention.repro import default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# The causal mask
# ---------------
#
# In a model that predicts the next token, token ``i`` may only look at tokens ``0..i``:
# the mask is lower-triangular. The package writes that rule once, as a *predicate* of
# a query position ``q`` and a key position ``k``:
#
# .. literalinclude:: ../../../attention/masks.py
#    :language: python
#    :pyobject: causal
#
# :func:`attention.causal_mask` evaluates it at every pair of positions, one row per
# query and one column per key, and returns the bool table (its ``S`` argument, for more
# keys than queries, is on
# :ref:`sphx_glr_tutorials_1_foundations_06_mask_conventions.py`):
#
# .. literalinclude:: ../../../attention/masks.py
#    :language: python
#    :pyobject: causal_mask

from attention import causal_mask

sentences = [
    "the cat sat on the mat".split(),
    "a dog ran".split(),
    "birds sing at dawn".split(),
]
N, S = len(sentences), max(len(s) for s in sentences)
L = S  # self-attention: as many queries as keys
causal = causal_mask(L, device=device)  # (L, S)
print(causal.int())

# %%
# The padding mask
# ----------------
#
# Sentences of different lengths are padded to the same length ``S`` with a filler
# token. :func:`attention.padding_mask` marks the real tokens with ``True``; its shape
# ``(N, 1, 1, S)`` broadcasts over heads and queries, so one row per sentence blocks the
# padded *keys* for every query:
#
# .. literalinclude:: ../../../attention/masks.py
#    :language: python
#    :pyobject: padding_mask

from attention import padding_mask

PAD = "<pad>"
lengths = [len(s) for s in sentences]
padded = [s + [PAD] * (S - len(s)) for s in sentences]
padding = padding_mask(torch.tensor(lengths, device=device), S)  # (N, 1, 1, S)
both = causal & padding  # (L, S) & (N, 1, 1, S) -> (N, 1, L, S)
print(
    f"lengths {lengths}; padding {tuple(padding.shape)}; causal & padding "
    f"{tuple(both.shape)}"
)
print(padding[:, 0, 0].int())

# %%
# Drawn, with the sentence on the axes (green: may attend, grey: blocked):

import matplotlib.pyplot as plt

from attention import mask_legend, plot_mask

# sphinx_gallery_start_ignore
fig, axes = plt.subplots(1, 3, figsize=(8, 4), layout="constrained")
plot_mask(
    causal,
    x_labels=sentences[0],
    y_labels=sentences[0],
    ax=axes[0],
    title="causal_mask(6):\n(L, S)",
)
axes[0].set_xlabel("key")
axes[0].set_ylabel("query")
plot_mask(
    padding[:, 0, 0],
    x_labels=range(S),
    y_labels=[" ".join(s) for s in sentences],
    ax=axes[1],
    title="padding_mask(lengths, 6):\n(N, 1, 1, S)",
)
axes[1].set_xlabel("key position")
axes[1].set_ylabel("sentence")
plot_mask(
    both[1, 0],
    x_labels=padded[1],
    y_labels=padded[1],
    ax=axes[2],
    title="causal & padding:\nsentence 1",
)
axes[2].set_xlabel("key")
axes[2].set_ylabel("query")
fig.legend(handles=mask_legend(), loc="outside lower center", ncols=2)
fig.suptitle("The two masks and their combination (True = may attend)")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Left, each query sees itself and the tokens before it. Middle, each sentence's padding
# is blocked. Right, for "a dog ran" both at once: the padded keys are blocked for every
# query, and the padded queries still get a row (their outputs are ignored later; see
# :ref:`sphx_glr_tutorials_3_training_and_reading_10_classifier.py`).
#
# What the mask does to the weights
# ---------------------------------
#
# A blocked key gets a weight of exactly 0, and the weights that are left still sum to
# 1 in every row that has a key left: here every row, since every query may see key 0,
# a real token (a row with no key left gets weights 0; the next page shows it in
# :ref:`empty-rows`, and the two lines that do it, and why each, in
# :ref:`blocking-keys`). Here is a small
# :class:`attention.MultiHeadAttention` on random token vectors, with the combined mask:

from attention import MultiHeadAttention, plot_attention

E, H = 16, 2
x = torch.randn(N, L, E, device=device)  # (N, L, E)
ours = MultiHeadAttention(E, H).to(device).eval()
with torch.no_grad():
    out, weights = ours(x, mask=both)  # (N, L, E), (N, H, L, S)

blocked_weights = weights.masked_select(~both.expand_as(weights))
print(f"largest weight on a blocked key: {blocked_weights.abs().max().item()}")
print(
    f"row sums: min {weights.sum(-1).min().item():.6f}, max "
    f"{weights.sum(-1).max().item():.6f}"
)
assert blocked_weights.abs().max() == 0 and both.any(-1).all()  # every row has a key
assert torch.allclose(weights.sum(-1), torch.ones(N, H, L, device=device))

fig, ax = plt.subplots(figsize=(5, 4.2), layout="constrained")
plot_attention(
    weights[1, 0], x_tokens=padded[1], ax=ax, title="Head 0 on 'a dog ran', masked"
)
plt.show()

# %%
# The upper triangle and the padded columns are exactly 0 (the values printed above).
#
# A causal mask also means that a token's output cannot depend on what comes after it.
# Change the last token of the first sentence and compare:

with torch.no_grad():
    changed = x.clone()
    changed[0, -1] += 10.0  # a different last token
    out_changed, _ = ours(changed, mask=both)
earlier = (out_changed[0, :-1] - out[0, :-1]).abs().max().item()
last = (out_changed[0, -1] - out[0, -1]).abs().max().item()
print(
    f"change in the outputs of tokens 0..{L - 2}: {earlier}; of the last token: "
    f"{last:.3f}"
)
assert earlier == 0 and last > 0


# %%
# The output of every earlier token is unchanged to the last bit (0, printed above): the
# causal mask gave the changed key a weight of exactly 0 for every earlier query.
#
# What to remember
# ----------------
#
# - This package's masks are bool, ``True`` = may attend, and broadcast to
#   ``(N, H, L, S)``: :func:`attention.causal_mask` is ``(L, S)`` and lower-triangular,
#   :func:`attention.padding_mask` is ``(N, 1, 1, S)`` with one row per sentence.
# - ``causal & padding`` combines them into ``(N, 1, L, S)``; every query keeps a row,
#   padded queries included.
# - A blocked key gets a weight of exactly 0, the other weights of a row that has a key
#   left still sum to 1, and under a causal mask no output depends on a later token.
#
# API used on this page: :func:`attention.causal_mask`, :func:`attention.padding_mask`,
# :class:`attention.MultiHeadAttention`, :func:`attention.plot_mask`,
# :func:`attention.mask_legend` and :func:`attention.plot_attention`.
#
# Exercises
# ---------
#
# 1. **Count the allowed pairs.** Under ``causal & padding``, query ``i`` of a sentence
#    of ``n`` real tokens may attend to ``min(i + 1, n)`` keys. Derive from that how
#    many (query, key) pairs each of the three sentences allows, and check your numbers
#    against ``both``.
# 2. **One head, one key.** Block key 0 for head 1 only, by combining ``both`` with a
#    mask of shape ``(1, H, 1, S)`` that is ``False`` only at head 1, key 0. Predict the
#    shape of the result, run ``ours`` with it, and check that head 1 gives key 0 weight
#    0 while head 0 still reads it.
# 3. **A mask that peeks.** ``torch.ones(L, L, dtype=torch.bool).tril(diagonal=1)`` lets
#    every token also see the next one. With it instead of ``causal``, does the output
#    of token 0 of the first sentence still ignore a change to token 1?

# %%
# .. solution 1
#
# Sum ``min(i + 1, n)`` over the ``S`` queries; the mask's own count is
# ``both.sum((-2, -1))``.

counted = both.sum((-2, -1)).flatten().tolist()  # one count per sentence
derived = [sum(min(i + 1, n) for i in range(L)) for n in lengths]
print(f"allowed pairs, from the mask: {counted}; derived: {derived}")
assert counted == derived

# %%
# .. solution 2
#
# ``(N, 1, L, S) & (1, H, 1, S)`` broadcasts to ``(N, H, L, S)``: the mask now differs
# per head.

head_1_key_0 = torch.ones(1, H, 1, S, dtype=torch.bool, device=device)  # (1, H, 1, S)
head_1_key_0[0, 1, 0, 0] = False
head_mask = both & head_1_key_0  # (N, 1, L, S) & (1, H, 1, S) -> (N, H, L, S)
print(f"mask shape: {tuple(head_mask.shape)}")
with torch.no_grad():
    _, head_weights = ours(x, mask=head_mask)  # (N, H, L, S)
print(f"head 1 on key 0: {head_weights[:, 1, :, 0].abs().max().item()}")
print(f"head 0 on key 0, smallest: {head_weights[:, 0, :, 0].min().item():.3f}")
assert head_mask.shape == (N, H, L, S)
assert (head_weights[:, 1, :, 0] == 0).all() and (head_weights[:, 0, :, 0] > 0).all()

# %%
# .. solution 3
#
# No: token 0 now reads token 1, so its output moves with it. The first sentence has
# no padding, so the peeking mask is all that applies to it.

peeking = torch.ones(L, L, dtype=torch.bool, device=device).tril(diagonal=1)  # (L, S)
with torch.no_grad():
    nudged = x.clone()
    nudged[0, 1] += 10.0  # a different token 1
    before, _ = ours(x, mask=peeking)
    after, _ = ours(nudged, mask=peeking)
    before_causal, _ = ours(x, mask=causal)
    after_causal, _ = ours(nudged, mask=causal)
moved = (after[0, 0] - before[0, 0]).abs().max().item()
moved_causal = (after_causal[0, 0] - before_causal[0, 0]).abs().max().item()
print(f"change in token 0's output: peeking {moved:.3f}, causal {moved_causal}")
assert moved > 0 and moved_causal == 0

# %%
# Next: :ref:`sphx_glr_tutorials_1_foundations_06_mask_conventions.py` puts PyTorch's
# mask conventions side by side and follows them to their edges: half precision, a
# query with no key left, and causal masks with more keys than queries.

# sphinx_gallery_thumbnail_number = 2
