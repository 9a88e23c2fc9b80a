"""
A decoder, and the induction heads it learns
============================================

.. prerequisites:: 05_masks 11_classifier

The classifier of :ref:`sphx_glr_tutorials_11_classifier.py` reads a whole sentence at
once. GPT-style language models work differently: they predict the *next* token, each
position may look only at the past, and they generate text one token at a time. This
page builds such a decoder from :class:`attention.DecoderLM`, trains a two-layer one on
the CPU in seconds, and finds inside it the attention that lets it copy, and compares it
with the classic circuit of a *previous-token head* and an *induction head*
:cite:p:`elhage2021,olsson2022`.

From the pages it assumes it takes the causal mask, training, and switching heads off
with a hook.
"""

# %%
# Setup
# -----

import math

import torch

from attention.repro import claim, default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()  # ATTENTION_DEVICE, else "cuda" if there is a GPU, else "cpu"
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# Next-token prediction
# ---------------------
#
# A language model reads tokens :math:`x_0, \dots, x_{L-1}` and, at every position
# :math:`t`, outputs a distribution over the token :math:`x_{t+1}`. Training minimises
# the cross-entropy of the true next token at every position at once. The task here is
# made in code by :func:`attention.data.make_repeated_sequences`: 16 different random
# tokens out of 32, then the same 16 again.

from attention.data import make_repeated_sequences

V, T = 32, 16
example = make_repeated_sequences(1, length=T, vocab_size=V, seed=seed)[0]
print("first half: ", example[:T].tolist())
print("second half:", example[T:].tolist())

# %%
# The first half cannot be predicted: each token is a uniform draw among those not used
# yet, so the best possible loss at target :math:`t` is :math:`\ln(V - t)`, a little
# below :math:`\ln V`. The second half can be predicted perfectly, by a model that finds
# where the current token occurred before and copies the token that followed it.

chance = math.log(V)
floor = sum(math.log(V - t) for t in range(1, T)) / (T - 1)
print(f"chance ln V = {chance:.3f}; best possible first-half loss = {floor:.3f}")

# %%
# The causal mask: no peeking
# ---------------------------
#
# Every position is trained at once, in one forward pass over the whole sequence, so
# position :math:`t` must not see :math:`x_{t+1}`, the token it is asked to predict. The
# causal mask of :ref:`sphx_glr_tutorials_05_masks.py` hides every later key.
# :class:`attention.CausalSelfAttention` builds it in its ``mask`` method (bottom-right
# aligned, which matters when a cache of keys and values makes :math:`S > L`:
# :ref:`bottom-right-causal`):
#
# .. literalinclude:: ../../attention/decoder.py
#    :language: python
#    :pyobject: CausalSelfAttention.forward
#
# Feeding the true tokens as the input at every position, rather than the model's own
# guesses, is *teacher forcing*. The mask makes it exact: the logits at position
# :math:`t` of one pass over the whole sequence equal the logits of a pass over the
# prefix :math:`x_0 \dots x_t` alone. On an untrained model:

from attention import DecoderLM

untrained = DecoderLM(V, embed_dim=64, num_heads=2, num_layers=2, max_len=2 * T).eval()
sequence = example[None].to(device)  # (1, 2T)
untrained = untrained.to(device)
with torch.no_grad():
    full, _ = untrained(sequence)  # (1, 2T, V)
    gap = max(
        (untrained(sequence[:, : t + 1])[0][:, -1] - full[:, t]).abs().max().item()
        for t in range(2 * T)
    )
print(f"largest difference, one pass vs one pass per prefix: {gap:.1e}")
assert gap < 1e-5

# %%
# Training
# --------
#
# :func:`attention.training.fit_repeat_model` trains the pages' two-layer model: two
# heads per layer, ``embed_dim=64``, rotary positions
# (:class:`attention.RotaryEmbedding`: a head that attends "one token back" then works
# the same at every position), AdamW for 300 steps on one thread, so the model does not
# depend on the machine's core count. The loop is :func:`attention.training.train_lm`:
#
# .. literalinclude:: ../../attention/training.py
#    :language: python
#    :pyobject: train_lm
#    :start-at: model.train()
#    :end-at: schedule.step()
#    :dedent: 8

from attention.training import fit_repeat_model, next_token_losses

model, history, held_out = fit_repeat_model(seed=seed)
print(
    f"{len(history)} steps in {history[-1]['seconds']:.1f} s on one CPU thread "
    f"(float32, torch {torch.__version__})"
)

# %%
# The loss of each half, over training:

import matplotlib.pyplot as plt

steps = [row["step"] for row in history]
fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
ax.plot(steps, [row["first_half"] for row in history], color="C0", label="first half")
ax.plot(steps, [row["second_half"] for row in history], color="C1", label="second half")
ax.axhline(chance, color="gray", linestyle=":", label=r"chance, $\ln V$")
ax.set_xlabel("training step")
ax.set_ylabel("cross-entropy of the next token")
ax.set_ylim(bottom=0)
ax.legend(loc="center right")
ax.set_title("Loss of each half of the sequences during training")
plt.show()

# %%
# For a while both halves sit at chance. Then the second half's loss falls, abruptly:
# the model has learned to copy. The first half's cannot go below what random tokens
# allow (it may wander while the copy is being learned) and ends above that floor. On
# the 512 held-out sequences:

model = model.to(device)
held_out = held_out.to(device)
losses = next_token_losses(model, held_out)  # (2T - 1,): targets 1 .. 2T - 1
first_half, second_half = losses[: T - 1].mean().item(), losses[T - 1 :].mean().item()
print(f"held-out loss, first half {first_half:.3f}, second half {second_half:.4f}")
claim("held-out first-half loss (entropy floor)", first_half, above=floor)
claim("held-out second-half loss", second_half, below=0.1)

# %%
# A model that peeks
# ------------------
#
# What does the mask buy? Replace it, in every layer, by one that allows every key, and
# train the same model the same way (fewer steps suffice):

from attention.training import train_lm


def allow_everything(L, S, *, device=None):
    """A 'mask' that hides nothing: each position sees the whole sequence."""
    return torch.ones(L, S, dtype=torch.bool, device=device)


torch.manual_seed(seed)
peeking = DecoderLM(
    V,
    embed_dim=64,
    num_heads=2,
    num_layers=2,
    max_len=2 * T,
    ffn_dim=64,
    positions="rotary",
)
for block in peeking.blocks:
    block.self_attn.mask = allow_everything
train_data = make_repeated_sequences(4096, length=T, vocab_size=V, seed=1)
peeking_history = train_lm(peeking, train_data, steps=100, lr=1e-2, seed=seed, log=None)
peeking = peeking.eval().to(device)
peeking_loss = next_token_losses(peeking, held_out).mean().item()
print(f"held-out loss without the mask: {peeking_loss:.4f}, both halves")
claim("loss of the model without a mask", peeking_loss, below=0.2)

# %%
# A loss near 0 on *both* halves, even on the first, which cannot be predicted: the
# model reads the answer, the next token, from its input. Its real skill shows when the
# future is not there to read, as in generation, where each prediction sees only the
# prefix. Its loss on the first half, one prefix at a time, against the floor no model
# can beat:

import torch.nn.functional as F


def prefix_loss(m, tokens, targets):
    """Mean loss of predicting tokens[:, t] from the prefix tokens[:, :t] alone."""
    with torch.no_grad():
        return sum(
            F.cross_entropy(m(tokens[:, :t])[0][:, -1], tokens[:, t]).item()
            for t in targets
        ) / len(targets)


peeking_real = prefix_loss(peeking, held_out, range(1, T))
print(
    f"first-half loss without the mask: {peeking_real:.2f} from prefixes "
    f"(floor {floor:.2f}, chance {chance:.2f})"
)
claim("first-half prefix loss of the model without a mask", peeking_real, above=floor)

# %%
# Far above 0. And generating: give each model the first half and one more token, and
# let it write the rest, one token at a time:

with torch.no_grad():
    prompt = held_out[:, : T + 1]
    honest = model.generate(prompt, T - 1)
    cheat = peeking.generate(prompt, T - 1, use_cache=False)
honest_acc = (honest[:, T + 1 :] == held_out[:, T + 1 :]).float().mean().item()
cheat_acc = (cheat[:, T + 1 :] == held_out[:, T + 1 :]).float().mean().item()
print(
    f"second half generated correctly: with the mask {honest_acc:.1%}, "
    f"without {cheat_acc:.1%} (chance {1 / V:.1%})"
)
claim("generation accuracy with the mask", honest_acc, above=0.9)
claim("generation accuracy without the mask", cheat_acc, below=0.95)

# %%
# The masked model continues the repeat; the one that peeked, whatever its training
# loss, gets part of it wrong (the values printed above): what it learned most was to
# read ahead.
#
# The head that copies
# --------------------
#
# How can a model continue ``... A B ... A`` with ``B``? The classic answer has two
# heads in series :cite:p:`elhage2021,olsson2022`: a **previous-token head**
# in layer 1 writes into each position the token before it (position :math:`i` attends
# to :math:`i - 1`), so the position of ``B`` also holds ``A``; then an **induction
# head** in layer 2 attends from the current ``A`` to the position whose previous token
# is ``A``, that is ``B``, and copies it.
#
# In the second half, the query at position :math:`i` holds the token of position
# :math:`i - T`, so an induction head attends to key :math:`i - T + 1`: a stripe
# :math:`T - 1` below the diagonal. Each head's *score* measures what defines it,
# averaged over the held-out sequences: the weight on key :math:`i - 1` (over all
# :math:`i \ge 1`) for a previous-token head, the weight on key :math:`i - T + 1` (over
# the second half) for an induction head. The head with the highest score is picked.

with torch.no_grad():
    _, weights = model(held_out, need_weights=True)  # per layer (N, H, 2T, 2T)
positions = torch.arange(2 * T, device=device)
previous = weights[0][:, :, positions[1:], positions[1:] - 1].mean(dim=(0, 2))  # (H,)
second = positions[T:]
induction = weights[1][:, :, second, second - T + 1].mean(dim=(0, 2))  # (H,)
previous_head, induction_head = int(previous.argmax()), int(induction.argmax())
for name, scores in (
    ("layer 1, previous-token", previous),
    ("layer 2, induction", induction),
):
    print(
        f"{name} score of each head: " + ", ".join(f"{s:.2f}" for s in scores.tolist())
    )
claim("induction score", induction.max().item(), above=0.5)
claim("best previous-token score in layer 1", previous.max().item(), below=0.25)

# %%
# The best head of layer 2 puts nearly all its weight on the stripe (its score, printed
# above; in some runs the other head of layer 2 does too). Drawn on one held-out
# sequence, with the tokens on the axes:

from attention import plot_attention

labels = [str(t) for t in held_out[0].tolist()]
fig, ax = plt.subplots(figsize=(7.5, 6.5), layout="constrained")
_ = plot_attention(weights[1][0, induction_head], x_tokens=labels, ax=ax)
ax.set_title(f"Layer 2, head {induction_head}: the highest induction score")
plt.show()

# %%
# In the second half (the lower rows), each query attends :math:`T - 1 = 15` positions
# back, to the token that followed the earlier occurrence of its own token, and copies
# it.
#
# But no head of layer 1 attends to the previous token (its scores, printed above, are
# low). This model found a shortcut: in these sequences the repeat *always* starts
# :math:`T` positions back, so "attend :math:`T - 1` positions back" is always right,
# and rotary positions make that offset easy to learn without looking at the tokens at
# all. The two-head circuit of :cite:t:`olsson2022` is what a model needs when the
# earlier occurrence can be anywhere; a fixed period lets layer 2 copy by position
# alone, with no previous-token head. (:func:`attention.data.make_repeated_sequences`
# with ``min_period`` draws a different period for each sequence, which takes that
# shortcut away.) Layer 1's heads:

fig = plot_attention(weights[0][0], x_tokens=labels, title="Layer 1's heads")
plt.show()

# %%
# Switching each head off
# -----------------------
#
# The heatmaps show where the heads look; switching them off shows whether the model
# needs them. As on :ref:`sphx_glr_tutorials_11_classifier.py`, a forward pre-hook on
# ``out_proj`` zeroes one head's slice of its input, and the held-out loss of the second
# half is measured again.


def switch_off(attn, head):
    """
    Zero ``head``'s columns of the input of ``attn.out_proj``; returns the hook handle.
    """
    D = attn.head_dim

    def zero_head(module, args):
        merged = args[0].clone()  # (N, L, E)
        merged[..., head * D : (head + 1) * D] = 0
        return (merged,)

    return attn.out_proj.register_forward_pre_hook(zero_head)


H = model.blocks[0].self_attn.num_heads
ablated = {}  # (layer, head) -> held-out second-half loss without that head
for layer, block in enumerate(model.blocks, 1):
    for head in range(H):
        handle = switch_off(block.self_attn, head)
        ablated[layer, head] = next_token_losses(model, held_out)[T - 1 :].mean().item()
        handle.remove()
        print(
            f"without layer {layer}, head {head}: second-half loss "
            f"{ablated[layer, head]:.3f}"
        )
# hooks gone
assert next_token_losses(model, held_out)[T - 1 :].mean().item() == second_half

# %%

fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
names = [f"layer {layer}\nhead {head}" for layer, head in ablated]
colours = ["C0" if layer == 1 else "C1" for layer, _ in ablated]
ax.bar(names, list(ablated.values()), color=colours)
ax.axhline(chance, color="gray", linestyle=":", label=r"chance, $\ln V$")
ax.axhline(second_half, color="black", linestyle="--", label="all heads on")
ax.set_xlabel("head switched off")
ax.set_ylabel("held-out second-half loss")
ax.legend(loc="upper left")
ax.set_title("Second-half loss with one head switched off")
plt.show()

# %%
# Without the head of the highest induction score, the second half's loss climbs back
# towards chance. The bar chart above shows what switching off each of the other heads
# costs:

without_induction = ablated[2, induction_head]
print(
    f"second-half loss without layer 2, head {induction_head}: {without_induction:.2f} "
    f"(all heads on {second_half:.3f}, chance {chance:.2f})"
)
claim("second-half loss without the best induction head", without_induction, above=1.0)

# %%
# What to remember
# ----------------
#
# - A decoder predicts every next token in one pass; the causal mask makes that pass
#   equal to one prediction per prefix (teacher forcing). Without the mask the model
#   reads the answer: near-zero training loss, and generation that gets much of the
#   repeat wrong.
# - On repeated random tokens, a two-layer decoder learns to copy within a few hundred
#   steps: a head attends to the token after the earlier occurrence of the current one.
#   With a fixed repeat period it needs no previous-token head: a positional shortcut
#   does.
# - Pick heads by the score that defines them, check whether the model needs them by
#   switching them off, and let the scores, not the textbook circuit, say what was
#   learned.
#
# API used on this page: :class:`attention.DecoderLM`,
# :class:`attention.CausalSelfAttention`, :func:`attention.plot_attention`,
# :func:`attention.data.make_repeated_sequences`,
# :func:`attention.training.fit_repeat_model`, :func:`attention.training.train_lm` and
# :func:`attention.training.next_token_losses`.

# %%
# Exercises
# ---------
#
# 1. **Where the copy comes from.** The stripe of layer 2 sits :math:`T - 1` below the
#    diagonal. Show, on the held-out sequences, that for every query :math:`i` from
#    :math:`T` to :math:`2T - 2` the key :math:`i - T + 1` holds exactly the token to
#    predict, :math:`x_{i+1}`.
# 2. **Change the future.** Replace the last token of every held-out sequence by another
#    token. Which of the trained model's logits change? Check that those of every
#    earlier position stay the same.
# 3. **A hook or a weight.** Switching head :math:`h` off with the hook zeroes its slice
#    of the input of ``out_proj``. Show that zeroing instead the matching *columns* of
#    ``out_proj.weight`` (on a copy of the model) gives the same logits.
#
# .. solution 1

i = torch.arange(T, 2 * T - 1, device=device)  # the queries
assert torch.equal(held_out[:, i - T + 1], held_out[:, i + 1])
print(f"key i - {T - 1} holds the next token for all {len(i)} queries i >= {T}")

# %%
# .. solution 2
#
# Only the last position's: the causal mask gives every later key a weight of exactly
# 0, so no earlier position reads the changed token.

changed = held_out.clone()
changed[:, -1] = (changed[:, -1] + 1) % V
with torch.no_grad():
    before, _ = model(held_out)  # (N, 2T, V)
    after, _ = model(changed)  # (N, 2T, V)
earlier = (after[:, :-1] - before[:, :-1]).abs().max().item()
last = (after[:, -1] - before[:, -1]).abs().max().item()
print(f"largest change: earlier positions {earlier:.1e}, last position {last:.2f}")
assert earlier < 1e-5

# %%
# .. solution 3

import copy

edited = copy.deepcopy(model)
D = edited.blocks[1].self_attn.head_dim
with torch.no_grad():
    edited.blocks[1].self_attn.out_proj.weight[
        :, induction_head * D : (induction_head + 1) * D
    ] = 0
    handle = switch_off(model.blocks[1].self_attn, induction_head)
    hooked, _ = model(held_out[:8])  # (8, 2T, V)
    handle.remove()
    weight_edit, _ = edited(held_out[:8])  # (8, 2T, V)
difference = (hooked - weight_edit).abs().max().item()
print(f"largest logit difference, hook vs zeroed columns: {difference:.1e}")
assert difference < 1e-5

# %%
# Next: :ref:`sphx_glr_tutorials_15_kv_cache_gqa.py`, generating with a cache of keys
# and values, and sharing them between heads.

# sphinx_gallery_thumbnail_number = 2
