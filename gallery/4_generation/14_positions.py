"""
Positions: sinusoidal, learned, rotary (RoPE) and ALiBi
=======================================================

.. prerequisites:: 03_self_attention 05_masks 11_classifier

Attention compares every query with every key, and nothing in that comparison says where
the two tokens stand. This page shows that without positions a model cannot tell "dog
bites man" from "man bites dog", then the four ways of giving it positions in use:
adding a sinusoidal or a learned vector to each token :cite:p:`vaswani2017`, rotating
queries and keys by their position (RoPE, :cite:t:`su2021`), and penalising scores
linearly with distance (ALiBi, :cite:t:`press2022`). It ends with a measured experiment:
the same small model trained with each scheme at one length and tested at longer ones.

The classifier of :ref:`sphx_glr_tutorials_11_classifier.py` already used sinusoidal
positions.
"""

# %%
# Setup
# -----

import torch

from attention.repro import claim, default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else "cuda" if there is a GPU, else "cpu"
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# Without positions, order is invisible
# -------------------------------------
#
# Self-attention treats its input as a *set*: permute the tokens, and the outputs come
# out permuted the same way, every number unchanged (the scores are permuted along both
# axes, the softmax runs along each row, and the weighted sum follows the keys). In
# float64, with :class:`attention.MultiHeadAttention` and a random permutation:

from attention import MultiHeadAttention

E = 16
attn = MultiHeadAttention(E, 4).to(device, torch.float64)
x = torch.randn(1, 6, E, dtype=torch.float64, device=device)  # (N, L, E)
perm = torch.randperm(6, device=device)
out, _ = attn(x)
out_permuted, _ = attn(x[:, perm])
print(
    f"permutation {perm.tolist()}: outputs permuted the same way, largest difference "
    f"{(out_permuted - out[:, perm]).abs().max():.1e}"
)
assert torch.allclose(out_permuted, out[:, perm], atol=1e-12, rtol=0)

# %%
# So "dog bites man" and "man bites dog" give the same three output vectors, in a
# different order: the vector for "dog" is the same whether the dog bites or is bitten.

words = {"dog": 0, "bites": 1, "man": 2}
embedding = torch.nn.Embedding(3, E).to(device, torch.float64)
sentences = [["dog", "bites", "man"], ["man", "bites", "dog"]]
ids = torch.tensor([[words[w] for w in s] for s in sentences], device=device)  # (2, 3)
out, _ = attn(embedding(ids))  # (2, 3, E)
dog_subject, dog_object = out[0, 0], out[1, 2]
difference = (dog_subject - dog_object).abs().max()
print(f"'dog' as subject vs as object: largest difference {difference:.1e}")
assert torch.allclose(dog_subject, dog_object, atol=1e-12, rtol=0)

# %%
# A causal mask breaks the symmetry only partly: token :math:`t` sees :math:`t + 1`
# tokens, so a model can count, but it still cannot tell which of the earlier tokens
# stood where. Every scheme below puts the position into the computation itself.
#
# Sinusoidal and learned encodings
# --------------------------------
#
# The original Transformer adds to each token embedding a fixed vector that depends on
# its position :math:`p` only: pairs of dimensions :math:`(2i, 2i+1)` hold
# :math:`\sin(p\,\omega_i)` and :math:`\cos(p\,\omega_i)`, with frequencies
# :math:`\omega_i = 10000^{-2i/E}` going from one turn per :math:`2\pi` positions down
# to very slow ones (:class:`attention.PositionalEncoding`):
#
# .. literalinclude:: ../../attention/positions.py
#    :language: python
#    :pyobject: PositionalEncoding.__init__
#    :start-at: position = torch.arange

import matplotlib.pyplot as plt

from attention import PositionalEncoding

E_table, P_table = 64, 128
table = PositionalEncoding(E_table, max_len=P_table).pe  # (P, E)

fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
image = ax.imshow(table.T, aspect="auto", cmap="cividis", vmin=-1, vmax=1)
fig.colorbar(image, ax=ax, label="value")
ax.set_xlabel("position p")
ax.set_ylabel("dimension (sin, cos pairs)")
_ = ax.set_title(f"Sinusoidal positional encoding, E = {E_table}")

# %%
# The first dimensions change with every position, the last ones barely across the whole
# table: each position gets a distinct pattern, like the digits of a clock with many
# hands.
#
# Why sines and cosines? Because moving by :math:`k` positions is the same linear map
# for every :math:`p`: each pair turns by the angle :math:`k\,\omega_i`,
#
# .. math::
#    \begin{pmatrix}\sin (p+k)\omega \\ \cos (p+k)\omega\end{pmatrix} =
#    \begin{pmatrix}\cos k\omega & \sin k\omega \\
#    -\sin k\omega & \cos k\omega\end{pmatrix}
#    \begin{pmatrix}\sin p\omega \\ \cos p\omega\end{pmatrix},
#
# so a layer can learn "look :math:`k` back" as one matrix. Built here for :math:`k = 5`
# and applied to the whole table (the table is float32, so they agree to float32
# rounding):

import math

k = 5
omega = torch.exp(torch.arange(0, E_table, 2) * (-math.log(10000.0) / E_table))
# omega: (E/2,) frequencies, as in PositionalEncoding
shift = torch.zeros(E_table, E_table)
for i, w in enumerate(omega.tolist()):
    c, s = math.cos(k * w), math.sin(k * w)
    shift[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
moved = table[:-k] @ shift.T  # (P - k, E) @ (E, E) -> (P - k, E)
error = (moved - table[k:]).abs().max().item()
print(f"one matrix takes every position p to p + {k}: largest difference {error:.1e}")
assert error < 1e-4

# %%
# *Learned* positions (GPT-2, BERT) drop the formula: an ``nn.Embedding(max_len, E)``
# holds one free vector per position, trained with the rest of the model. It can learn
# anything the task needs, but nothing ties row :math:`p` to row :math:`p + k`, and a
# row for a position that never occurs in training receives no gradient at all: it stays
# at its random start. The experiment at the end of the page shows what that means for
# longer sequences.
#
# RoPE: rotate queries and keys
# -----------------------------
#
# Rotary embeddings :cite:p:`su2021` add nothing to the tokens. Inside every attention
# layer, after the projections, they rotate each pair of dimensions of the query and of
# the key by an angle proportional to the position: pair :math:`i` of a vector at
# position :math:`p` turns by :math:`p\,\theta_i`, with :math:`\theta_i = 10000^{-2i/D}`
# as in the sinusoids. :class:`attention.RotaryEmbedding` pairs dimension :math:`i` with
# :math:`i + D/2` (the convention of GPT-NeoX and Llama):
#
# .. literalinclude:: ../../attention/positions.py
#    :language: python
#    :pyobject: RotaryEmbedding.forward
#    :start-at: L, D = x.shape
#
# Rotations compose: :math:`R_m^\top R_n = R_{n-m}`. So the score of a query at
# :math:`m` and a key at :math:`n` is
# :math:`\langle R_m q, R_n k\rangle = \langle q, R_{n-m} k\rangle`: it depends on the
# two positions only through their offset. Checked for random vectors, positions and
# shifts, in float64:

from attention import RotaryEmbedding

D = 32
rope = RotaryEmbedding(D, max_len=4096)
q, k_ = (torch.randn(1000, 1, D, dtype=torch.float64, device=device) for _ in range(2))
worst = 0.0
for _ in range(5):
    m, n, s = torch.randint(0, 1000, (3,)).tolist()
    score = (rope(q, offset=m) * rope(k_, offset=n)).sum(-1)  # (1000, 1)
    shifted = (rope(q, offset=m + s) * rope(k_, offset=n + s)).sum(-1)  # (1000, 1)
    worst = max(worst, (score - shifted).abs().max().item())
    print(f"positions ({m}, {n}) and ({m + s}, {n + s}): same offset, same scores")
print(f"largest difference over 5000 pairs: {worst:.1e}")
assert worst < 1e-11

# %%
# Because the low-frequency pairs turn slowly and the high-frequency ones fast, the
# rotated copies of one vector drift apart with distance. Averaged over random vectors,
# the dot product of a vector at position 0 with the same vector at position :math:`d`
# is :math:`2\sum_i \cos(d\,\theta_i)`, which falls from :math:`D` towards 0 as
# :math:`d` grows (the "long-term decay" of :cite:t:`su2021`):

distances = torch.arange(0, 1025)  # (d,)
expected = 2 * torch.cos(rope.angles(len(distances))).sum(-1) / D  # (d, D/2) -> (d,)
vectors = torch.randn(200, 1, D, dtype=torch.float64)  # (200, 1, D)
rotated = rope(vectors.expand(-1, len(distances), -1))  # row d at d  (200, d, D)
measured = (rotated * vectors).sum(-1).mean(0) / D  # (200, d, D) -> (d,)
gap = (measured - expected).abs().max().item()
print(f"mean dot product of 200 vectors vs 2 sum cos(d theta) / D: gap {gap:.3f}")
claim("RoPE mean dot product matches its expectation", gap, below=0.15)
far = expected[256:].abs().mean().item()
print(f"mean |dot| / D beyond distance 256: {far:.3f} (1 at distance 0)")
assert far < 0.3

fig, ax = plt.subplots(figsize=(6.4, 4), layout="constrained")
expected_label = "expected: 2/D times the sum of cos(d θ) over the D/2 angles"
ax.plot(distances, measured, color="#56b4e9", lw=1, label="mean over 200 vectors")
ax.plot(distances, expected, color="#d55e00", lw=1.5, label=expected_label)
ax.set_xscale("symlog", linthresh=1)
ax.set_xlabel("distance d between the two positions")
ax.set_ylabel("dot product / D")
ax.legend()
_ = ax.set_title(f"RoPE: a vector against itself d positions away (D = {D})")

# %%
# Near positions keep most of the dot product; far ones keep much less and oscillate
# (the mean printed above). Nothing forces a trained model to use this decay, but it
# gives every head a built-in preference for nearby keys that it can overcome with large
# enough query-key alignments.
#
# Inside a layer, the rotation goes between the projections and the scores.
# :class:`attention.CausalSelfAttention` does it with ``rotary=True``; with a
# :class:`attention.KVCache`, the new tokens continue from the cached positions:
#
# .. literalinclude:: ../../attention/decoder.py
#    :language: python
#    :pyobject: CausalSelfAttention.forward
#    :start-at: if self.rotary is not None
#    :end-before: S = k.shape[2]
#
# The keys go into the cache already rotated, so a cached key never has to be rotated
# again. A small untrained language model with RoPE generates the same tokens with and
# without the cache:

from attention import DecoderLM

lm = DecoderLM(
    20,
    embed_dim=32,
    num_heads=4,
    num_layers=2,
    max_len=64,
    positions="rotary",
)
lm = lm.to(device).eval()
prompt = torch.randint(20, (3, 5), device=device)  # (N, L)
with_cache = lm.generate(prompt, 20, use_cache=True)
without_cache = lm.generate(prompt, 20, use_cache=False)
print("with the cache:   ", with_cache[0].tolist())
print("without the cache:", without_cache[0].tolist())
assert torch.equal(with_cache, without_cache)

# %%
# ALiBi: a penalty on distance
# ----------------------------
#
# ALiBi :cite:p:`press2022` leaves queries, keys and tokens alone and adds to every
# score a penalty proportional to the distance between query and key,
# :math:`-m_h\,|i - j|`, with one fixed slope :math:`m_h` per head: a geometric sequence
# :math:`2^{-8h/H}`, so some heads look mostly at the last few tokens and others far
# back. :func:`attention.alibi_bias` builds it:
#
# .. literalinclude:: ../../attention/positions.py
#    :language: python
#    :pyobject: alibi_bias
#    :start-at: slopes = alibi_slopes

from attention import alibi_bias, causal_mask
from attention.positions import alibi_slopes

H_alibi, L_alibi = 8, 16
print("slopes:", " ".join(f"{m:.4f}" for m in alibi_slopes(H_alibi).tolist()))
bias = alibi_bias(H_alibi, L_alibi).masked_fill(~causal_mask(L_alibi), float("nan"))
fig, axes = plt.subplots(
    2,
    4,
    figsize=(8, 4.4),
    layout="constrained",
    sharex=True,
    sharey=True,
)
for h, ax in enumerate(axes.flat):
    # each head on its own scale, from its largest penalty to 0: the slopes differ 128
    # times, and on one scale the gentle heads would all look flat
    image = ax.imshow(bias[h], cmap="cividis", vmin=bias[h].nan_to_num().min(), vmax=0)
    colorbar = fig.colorbar(image, ax=ax, shrink=0.6)
    colorbar.ax.tick_params(labelsize=9)
    slope = alibi_slopes(H_alibi)[h].item()
    ax.set_title(f"head {h + 1}: m = 1/{1 / slope:g}", fontsize=10)
    ax.set_xticks(range(0, L_alibi, 5))
    ax.set_yticks(range(0, L_alibi, 5))
for ax in axes[-1]:
    ax.set_xlabel("key position")
for ax in axes[:, 0]:
    ax.set_ylabel("query position")
_ = fig.suptitle(
    f"ALiBi bias added to the score, {H_alibi} heads, each on its own colour scale\n"
    "(future keys masked, blank)"
)

# %%
# Every head draws the same picture, a penalty that grows in steps of its slope with the
# distance; the colour bars say how large it gets. Head 1, with the largest slope
# printed above, penalises a key 8 positions back by 8 times that slope, enough to all
# but ignore it; head 8, with the smallest, barely distinguishes any of these
# positions: its whole scale spans a small fraction of a unit. ALiBi has no table at
# all, so it takes sequences of any length, and the penalty for a key :math:`d` back is
# the same wherever the query stands.

# %%
# A length experiment
# -------------------
#
# Which scheme lets a model work on sequences longer than those it was trained on? The
# task needs positions and nothing else: each sequence repeats a block of ``P = 8``
# distinct random tokens, so from position 8 on, the next token is always the one ``P``
# positions back. The first block cannot be predicted; the loss is measured on the rest,
# where a model that has learned to look exactly 7 positions back and copy predicts
# every token. The sequences are built from
# :func:`attention.data.make_repeated_sequences` (one block of distinct tokens) tiled to
# the length wanted:

from attention.data import make_repeated_sequences
from attention.training import next_token_losses, train_lm

P, V = 8, 16  # period and vocabulary


def periodic(num, length, seed):
    """``num`` sequences of ``length`` tokens: P distinct tokens, repeated."""
    halves = make_repeated_sequences(num, length=P, vocab_size=V, seed=seed)  # (N, 2P)
    block = halves[:, :P]  # (N, P)
    return block.repeat(1, length // P)  # (N, length)


print(periodic(2, 24, seed=1))

# %%
# The same model, one layer of two heads with :math:`E = 32`, is trained five times at
# length 32, once per scheme, each started from the same seed and trained on the same
# batches (250 steps of 16 sequences, one CPU thread): ``"none"`` (the causal mask
# only), ``"sinusoidal"``, ``"learned"`` (a table of ``max_len = 128`` rows, so longer
# tests run, though rows 32 to 127 are never trained), ``"rotary"`` and ``"alibi"``.
# Then each is tested on fresh sequences of lengths 32, 64 and 128.

lengths = [32, 64, 128]
train_tokens = periodic(2000, 32, seed=seed)
test_tokens = {n: periodic(200, n, seed=1000 + seed) for n in lengths}
schemes = ["none", "sinusoidal", "learned", "rotary", "alibi"]
losses, models, seconds = {}, {}, {}
for scheme in schemes:
    torch.manual_seed(seed)
    model = DecoderLM(
        V, embed_dim=32, num_heads=2, num_layers=1, max_len=128, positions=scheme
    )
    if scheme == "learned":
        initial_rows = model.position_embedding.weight.detach().clone()  # (128, E)
    history = train_lm(
        model,
        train_tokens,
        steps=250,
        batch_size=16,
        lr=1e-2,
        seed=seed,
        log=None,
    )
    seconds[scheme] = history[-1]["seconds"]
    models[scheme] = model.eval()
    losses[scheme] = [
        next_token_losses(model, test_tokens[n])[P - 1 :].mean().item() for n in lengths
    ]

chance = math.log(V)
print(f"loss on the predictable tokens (uniform guess: ln {V} = {chance:.2f})")
print("scheme       train s  " + "  ".join(f"L = {n:<4}" for n in lengths))
for scheme in schemes:
    row = "  ".join(f"{loss:8.3f}" for loss in losses[scheme])
    print(f"{scheme:<11} {seconds[scheme]:7.1f}  {row}")

# %%
# The same numbers as a figure, with the uniform guess for reference:

colours = ["#000000", "#e69f00", "#56b4e9", "#009e73", "#cc79a7"]
markers = ["o", "s", "^", "D", "v"]
fig, ax = plt.subplots(figsize=(7.3, 4.2), layout="constrained")
for scheme, colour, marker in zip(schemes, colours, markers, strict=True):
    ax.plot(lengths, losses[scheme], color=colour, marker=marker, label=scheme)
ax.axhline(chance, color="grey", ls="--", lw=1, label=f"uniform guess (ln {V})")
ax.axvline(32, color="grey", ls=":", lw=1)
ax.set_xscale("log", base=2)
ax.set_xticks(lengths, [str(n) for n in lengths])
ax.set_xlabel("test sequence length (trained at 32)")
ax.set_ylabel("loss on the predictable tokens")
ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside the axes, at 10 pt
_ = fig.suptitle("Copy the token P = 8 back: loss against length, per position scheme")

# sphinx_gallery_start_ignore
for scheme in ("learned", "rotary"):
    at_32, at_128 = losses[scheme][0], losses[scheme][2]
    claim(f"{scheme} learns the task at the training length", at_32, below=0.5)
    claim(f"{scheme} loss at 128 minus at 32", at_128 - at_32, above=1.0)
for scheme in ("none", "alibi"):
    claim(f"{scheme} does not learn the task", min(losses[scheme]), above=2.0)
for scheme in schemes:
    claim(f"{scheme} has not got the task at length 128", losses[scheme][2], above=1.0)
# sphinx_gallery_end_ignore

# %%
# What the table shows, on every seed and CPU this page was checked on (the assertions
# are in the page's source):
#
# - Without positions (``none``) and with ALiBi alone, the model does not learn the task
#   at any length: both losses stay above 2, not far below the uniform guess printed
#   above. A causal mask lets a token count how many came before it, and ALiBi tells a
#   head that nearer keys matter more, but neither gives one layer a way to point at
#   *exactly* 7 positions back. ALiBi was designed for language, where recency is what
#   matters (:cite:t:`press2022` show it extrapolating on language modelling); a task
#   that needs one exact offset is not language.
# - Learned positions and RoPE learn it at length 32 (loss below 0.5) and lose it on
#   longer sequences: at length 128 their loss is higher by more than 1.
# - At length 128 no scheme has the task: every loss there is above 1.
# - Sinusoidal positions learn it by an amount that varies with the seed, from fully to
#   hardly at all in 250 steps; the table gives this run's numbers.
#
# Learned positions fail past 32 for a plain reason: their rows 32 to 127 were never
# used, so they received no gradient (nor did row 31: the last position's prediction has
# no target). AdamW's weight decay only shrank them, so each is still its random
# starting vector, scaled:

rows = models["learned"].position_embedding.weight.detach()  # (128, E)
cosine = torch.nn.functional.cosine_similarity(rows, initial_rows, dim=-1)  # (128,)
trained, untrained = cosine[:31], cosine[31:]
low, high = trained.min().item(), trained.max().item()
print(f"cosine with the initial rows: positions 0-30 from {low:.3f} to {high:.3f}")
print(f"                              positions 31-127 at least {untrained.min():.6f}")
assert untrained.min() > 1 - 1e-6

# %%
# RoPE's failure matches what :cite:t:`press2022` measured on language models: rotary
# and sinusoidal models degrade past their training length. The score RoPE learned for
# offset 7 is the same at every position, but on a longer sequence each query also meets
# keys at distances never seen in training (beyond 31), whose rotation angles the model
# never learned to score. Models trained with RoPE are taken to longer contexts by
# rescaling the angles and training a little at the new length (position interpolation,
# :cite:t:`chen2023`).
#
# What to remember
# ----------------
#
# - Attention without positions is permutation-equivariant: it sees a set, not a
#   sequence.
# - Sinusoidal encodings add a fixed vector per position, and a shift by :math:`k` is
#   one linear map; learned encodings are free rows of a table and say nothing about
#   positions never trained.
# - RoPE rotates queries and keys so that every score depends only on the offset between
#   the two positions; it lives inside each attention layer and works with a KV cache.
# - ALiBi adds :math:`-m_h |i - j|` to the scores: no table, any length, a built-in
#   preference for recent tokens.
# - Measured, not assumed: on a task that needs one exact offset, trained at 32 tokens,
#   none of the schemes carried the skill to 128 tokens here.
#
# API used on this page: :class:`attention.PositionalEncoding`,
# :class:`attention.RotaryEmbedding`, :func:`attention.alibi_bias`,
# :func:`attention.positions.alibi_slopes`, :class:`attention.DecoderLM`,
# :class:`attention.CausalSelfAttention`, :class:`attention.MultiHeadAttention`,
# :func:`attention.causal_mask`, :func:`attention.training.train_lm`,
# :func:`attention.training.next_token_losses` and
# :func:`attention.data.make_repeated_sequences`.

# %%
# Exercises
# ---------
#
# 1. **ALiBi's bias by hand.** With :math:`H = 8` heads the slopes are
#    :math:`m_h = 2^{-8h/8} = 2^{-h}`. Write them down, and work out the bias that head
#    1 adds to the score of query 10 for key 3. Check both against
#    :func:`attention.positions.alibi_slopes` and :func:`attention.alibi_bias`.
# 2. **Back by five positions.** The matrix ``shift`` above takes every position
#    :math:`p` of the sinusoidal table to :math:`p + 5`. Which matrix takes
#    :math:`p + 5` back to :math:`p`? (Each 2x2 block is a rotation.) Check it on the
#    table.
# 3. **Rotations keep lengths.** RoPE rotates each pair of dimensions. Show that a
#    rotated query has the same length as before, whatever its position, and that the
#    score of a query at position :math:`m` and a key at :math:`n` equals their score at
#    positions :math:`m - n` and 0.
#
# .. solution 1
#
# Head :math:`h` has slope :math:`2^{-h}`; head 1's bias for a key :math:`i - j = 7`
# positions back is :math:`-\tfrac12 \cdot 7 = -3.5`.

by_hand = torch.tensor([2.0**-h for h in range(1, 9)], dtype=torch.float64)
print("slopes by hand:", by_hand.tolist())
assert torch.equal(alibi_slopes(8), by_hand)
head_1_bias = alibi_bias(8, 16)[0, 10, 3].item()
print(f"head 1, query 10, key 3: bias {head_1_bias}")
assert head_1_bias == -0.5 * (10 - 3)

# %%
# .. solution 2
#
# The inverse of a rotation is its transpose, so the inverse of the block-diagonal
# ``shift`` is ``shift.T``: it turns every pair back by :math:`5\,\omega_i`. The table
# holds positions as rows, which are multiplied by the transpose of the matrix (as
# ``table[:-k] @ shift.T`` did above), so going back is ``table[k:] @ shift``:

back = table[k:] @ shift  # (P - k, E) @ (E, E) -> (P - k, E)
back_error = (back - table[:-k]).abs().max().item()
print(f"p + {k} back to p: largest difference {back_error:.1e}")
assert back_error < 1e-4
assert torch.allclose(shift @ shift.T, torch.eye(E_table), atol=1e-6)

# %%
# .. solution 3
#
# A rotation keeps lengths, so the norm does not depend on the position; and since a
# score depends only on the offset, positions :math:`(m, n)` and :math:`(m - n, 0)`
# give the same scores (float64, for 1000 random pairs):

m, n = 700, 250
norms_before = q.norm(dim=-1)  # (1000, 1)
norms_after = rope(q, offset=m).norm(dim=-1)  # (1000, 1)
assert torch.allclose(norms_before, norms_after, atol=1e-12, rtol=0)
score_mn = (rope(q, offset=m) * rope(k_, offset=n)).sum(-1)  # (1000, 1)
score_offset = (rope(q, offset=m - n) * rope(k_, offset=0)).sum(-1)  # (1000, 1)
score_gap = (score_mn - score_offset).abs().max()
print(f"(m, n) vs (m - n, 0): largest difference {score_gap:.1e}")
assert torch.allclose(score_mn, score_offset, atol=1e-10, rtol=0)

# %%
# Next: masks written as functions and run by FlexAttention, in
# :ref:`sphx_glr_tutorials_17_flex_attention.py`.

# sphinx_gallery_thumbnail_number = 3
