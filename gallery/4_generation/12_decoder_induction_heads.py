"""
A decoder, and the induction heads it learns
============================================

.. prerequisites:: 05_masks 11_classifier

The classifier of :ref:`sphx_glr_tutorials_11_classifier.py` reads a whole sentence at
once. GPT-style language models work differently: they predict the *next* token, each
position may look only at the past, and they generate text one token at a time. This
page builds such a decoder from :class:`attention.DecoderLM`, trains a two-layer one on
the CPU in seconds, and finds inside it the two heads that let it copy: a
*previous-token head* and an *induction head* :cite:p:`elhage2021,olsson2022`.

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
# tokens out of 32, then a repeat of the last :math:`d` of them, again and again, where
# each sequence draws its own period :math:`d` from 8 to 16.

from attention.data import make_repeated_sequences

V, T, MIN_PERIOD = 32, 16, 8
example = make_repeated_sequences(
    1, length=T, vocab_size=V, seed=seed, min_period=MIN_PERIOD
)[0]
print("first half: ", example[:T].tolist())
print("second half:", example[T:].tolist())

# %%
# The first half cannot be predicted: each token is a uniform draw among those not used
# yet, so the best possible loss at target :math:`t` is :math:`\ln(V - t)`, a little
# below :math:`\ln V`. The first token of the second half is a guess among the periods.
# Every token after it can be predicted perfectly, by a model that finds where the
# current token occurred before and copies the token that followed it. Where that
# earlier occurrence lies changes from sequence to sequence, so only the tokens can say.

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

untrained = DecoderLM(V, embed_dim=64, num_heads=4, num_layers=2, max_len=2 * T).eval()
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
# :func:`attention.training.fit_repeat_model` trains the pages' two-layer model: here
# four heads per layer, ``embed_dim=64``, rotary positions
# (:class:`attention.RotaryEmbedding`: a head that attends "one token back" then works
# the same at every position), AdamW for 600 steps of 128 sequences on one thread, so
# the model does not depend on the machine's core count. (Four heads give each layer
# more heads that can start on the circuit below; with two, its documentation records,
# the circuit formed for some seeds and not for others within this budget.) The loop is
# :func:`attention.training.train_lm`:
#
# .. literalinclude:: ../../attention/training.py
#    :language: python
#    :pyobject: train_lm
#    :start-at: model.train()
#    :end-at: schedule.step()
#    :dedent: 8

from attention.training import fit_repeat_model, next_token_losses

model, history, held_out = fit_repeat_model(
    seed=seed, num_heads=4, min_period=MIN_PERIOD, steps=600, batch_size=128, lr=3e-3
)
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
# the model has learned to copy. The first half's cannot
# go below what random tokens allow (it may wander while the copy is being learned) and
# ends above that floor. On the 512 held-out sequences:

model = model.to(device)
held_out = held_out.to(device)
losses = next_token_losses(model, held_out)  # (2T - 1,): targets 1 .. 2T - 1
# targets 1 .. T - 1, and T + 1 .. 2T - 1 (target T, the repeat's first, is a guess)
first_half, second_half = losses[: T - 1].mean().item(), losses[T:].mean().item()
print(f"held-out loss, first half {first_half:.3f}, second half {second_half:.4f}")
claim("held-out first-half loss (entropy floor)", first_half, above=floor)
claim("held-out second-half loss", second_half, below=0.1)

# %%
# A model that peeks
# ------------------
#
# What does the mask buy? Replace it, in every layer, by one that allows every key, and
# train a model of the same shape on the same sequences (fewer steps suffice):

from attention.training import train_lm


def allow_everything(L, S, *, device=None):
    """A 'mask' that hides nothing: each position sees the whole sequence."""
    return torch.ones(L, S, dtype=torch.bool, device=device)


torch.manual_seed(seed)
peeking = DecoderLM(
    V,
    embed_dim=64,
    num_heads=4,
    num_layers=2,
    max_len=2 * T,
    ffn_dim=64,
    positions="rotary",
)
for block in peeking.blocks:
    block.self_attn.mask = allow_everything
train_data = make_repeated_sequences(
    4096, length=T, vocab_size=V, seed=1, min_period=MIN_PERIOD
)
peeking_history = train_lm(peeking, train_data, steps=150, lr=3e-3, seed=seed, log=None)
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
claim("generation accuracy with the mask", honest_acc, above=0.8)
claim("generation accuracy without the mask", cheat_acc, below=0.95)

# %%
# The masked model continues the repeat; the one that peeked, whatever its training
# loss, gets part of it wrong (the values printed above): what it learned most was to
# read ahead.
#
# The two heads that copy
# -----------------------
#
# How can a model continue ``... A B ... A`` with ``B``? The classic answer has two
# heads in series :cite:p:`elhage2021,olsson2022`: a **previous-token head**
# in layer 1 writes into each position the token before it (position :math:`i` attends
# to :math:`i - 1`), so the position of ``B`` also holds ``A``; then an **induction
# head** in layer 2 attends from the current ``A`` to the position whose previous token
# is ``A``, that is ``B``, and copies it. Neither head alone can do it: layer 1 cannot
# know which earlier position to read, and layer 2 can only find ``B`` by what layer 1
# wrote into it.
#
# Each head's *score* measures what defines it, averaged over the held-out sequences:
# the weight on key :math:`i - 1` (over all queries :math:`i \ge 1`) for a
# previous-token head; for an induction head, the weight that a query of the second half
# puts on the key just after the last earlier occurrence of its own token. The head with
# the highest score of each kind is picked.

N, L = held_out.shape
positions = torch.arange(L, device=device)
same = held_out[:, :, None] == held_out[:, None, :]  # (N, L, L): query i, key j
earlier = same & (positions[None, :] < positions[:, None])  # key j < query i
last_earlier = torch.where(earlier, positions, -1).amax(-1)  # (N, L); -1: none
queries = positions[T:]  # the second half: every token has occurred before
assert (last_earlier[:, queries] >= 0).all()
after = last_earlier[:, queries] + 1  # (N, T): the key after the earlier occurrence

with torch.no_grad():
    _, weights = model(held_out, need_weights=True)  # per layer (N, H, L, L)
previous = weights[0][:, :, positions[1:], positions[1:] - 1].mean(dim=(0, 2))  # (H,)
rows = torch.arange(N, device=device)[:, None]  # (N, 1); with queries, after: (N, T)
on_after = weights[1].permute(0, 2, 3, 1)[rows, queries, after]  # (N, T, H)
induction = on_after.mean(dim=(0, 1))  # (H,)
previous_head, induction_head = int(previous.argmax()), int(induction.argmax())
for name, scores in (
    ("layer 1, previous-token", previous),
    ("layer 2, induction", induction),
):
    print(
        f"{name} score of each head: " + ", ".join(f"{s:.2f}" for s in scores.tolist())
    )
claim("best previous-token score in layer 1", previous.max().item(), above=0.3)
claim("best induction score in layer 2", induction.max().item(), above=0.5)

# %%
# The best head of each layer has a score far above what a head spread evenly over the
# past would get (:math:`1/i` at query :math:`i`; the scores are printed above). Drawn
# on one held-out sequence, with its tokens on the axes, the previous-token head is a
# line just below the diagonal:

from attention import plot_attention

n = 0  # the first held-out sequence
labels = [str(t) for t in held_out[n].tolist()]
period = (queries[0] - last_earlier[n, T]).item()  # where its repeat starts
fig, ax = plt.subplots(figsize=(7.5, 7.2), layout="constrained")
_ = plot_attention(weights[0][n, previous_head], x_tokens=labels, ax=ax)
ax.set_title(f"Layer 1, head {previous_head}: the highest previous-token score")
plt.show()

# %%
# And the induction head: in the second half (the lower rows), each query attends
# :math:`d - 1` positions back, where :math:`d` is this sequence's period, to the token
# that followed the earlier occurrence of its own token.

print(f"held-out sequence {n}: period d = {period}, so the stripe is {period - 1} back")
fig, ax = plt.subplots(figsize=(7.5, 7.2), layout="constrained")
_ = plot_attention(weights[1][n, induction_head], x_tokens=labels, ax=ax)
ax.set_title(f"Layer 2, head {induction_head}: the highest induction score")
plt.show()

# %%
# In the first half, where no token has occurred before, the induction head has nothing
# to copy; where it looks there varies from run to run. The other heads of the two
# layers (their scores printed above) do other things: some spread over the past, and in
# some runs a second head of layer 2 also copies.
#
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
        ablated[layer, head] = next_token_losses(model, held_out)[T:].mean().item()
        handle.remove()
        print(
            f"without layer {layer}, head {head}: second-half loss "
            f"{ablated[layer, head]:.3f}"
        )
# hooks gone
assert next_token_losses(model, held_out)[T:].mean().item() == second_half

# %%

fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
names = [f"L{layer}\nh{head}" for layer, head in ablated]
colours = ["C0" if layer == 1 else "C1" for layer, _ in ablated]
ax.bar(names, list(ablated.values()), color=colours)
ax.axhline(chance, color="gray", linestyle=":", label=r"chance, $\ln V$")
ax.axhline(second_half, color="black", linestyle="--", label="all heads on")
ax.set_xlabel("head switched off (layer 1 blue, layer 2 orange)")
ax.set_ylabel("held-out second-half loss")
ax.legend(loc="upper left")
ax.set_title("Second-half loss with one head switched off")
plt.show()

# %%
# Without either head of the circuit, the loss of the second half climbs from near 0 to
# well over 0.5, part of the way back to chance, in every run the claims sweep tried:

without_previous = ablated[1, previous_head]
without_induction = ablated[2, induction_head]
print(
    f"second-half loss without layer 1, head {previous_head}: {without_previous:.2f}; "
    f"without layer 2, head {induction_head}: {without_induction:.2f} "
    f"(all heads on {second_half:.3f}, chance {chance:.2f})"
)
claim(
    "second-half loss without the best previous-token head", without_previous, above=0.5
)
claim("second-half loss without the best induction head", without_induction, above=0.5)

# %%
# Switching off the previous-token head breaks the copy too, though it attends to
# nothing in the second half that a copy needs: the induction head can only find its
# key through what the previous-token head wrote.
# How far each loss climbs depends on the run (where a second head shares a job, losing
# one of them costs less); the bar chart shows all eight.
#
# What to remember
# ----------------
#
# - A decoder predicts every next token in one pass; the causal mask makes that pass
#   equal to one prediction per prefix (teacher forcing). Without the mask the model
#   reads the answer: near-zero training loss, and generation that gets much of the
#   repeat wrong.
# - On random tokens that repeat at a distance only the tokens reveal, a two-layer
#   decoder learns to copy within a few hundred steps, with two heads in series: a
#   previous-token head in layer 1 and an induction head in layer 2.
# - Pick heads by the score that defines them, check whether the model needs them by
#   switching them off, and let the scores, not the textbook circuit, say what was
#   learned (exercise 4 shows a model that copies without the circuit).
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
# 1. **Where the copy comes from.** Show, on the held-out sequences, that for every
#    query :math:`i` of the second half but the last, the key just after the earlier
#    occurrence of :math:`x_i` holds exactly the token to predict, :math:`x_{i+1}`.
# 2. **Change the future.** Replace the last token of every held-out sequence by another
#    token. Which of the trained model's logits change? Check that those of every
#    earlier position stay the same.
# 3. **A hook or a weight.** Switching head :math:`h` off with the hook zeroes its slice
#    of the input of ``out_proj``. Show that zeroing instead the matching *columns* of
#    ``out_proj.weight`` (on a copy of the model) gives the same logits.
# 4. **A shortcut instead of a circuit.** Train a model on sequences whose second half
#    always repeats the first :math:`T` tokens back
#    (:func:`attention.training.fit_repeat_model` with its defaults: two heads per
#    layer, 300 steps). It copies too. Does it have a previous-token head?
#
# .. solution 1

inner = queries[:-1]  # the last query has no next token
assert torch.equal(held_out.gather(1, after[:, :-1]), held_out[:, inner + 1])
print(f"the key after the earlier occurrence holds the next token for all {len(inner)}")

# %%
# .. solution 2
#
# Only the last position's: the causal mask gives every later key a weight of exactly
# 0, so no earlier position reads the changed token.

changed = held_out.clone()
changed[:, -1] = (changed[:, -1] + 1) % V
with torch.no_grad():
    before, _ = model(held_out)  # (N, 2T, V)
    after_change, _ = model(changed)  # (N, 2T, V)
earlier_change = (after_change[:, :-1] - before[:, :-1]).abs().max().item()
last = (after_change[:, -1] - before[:, -1]).abs().max().item()
print(
    f"largest change: earlier positions {earlier_change:.1e}, last position {last:.2f}"
)
assert earlier_change < 1e-5

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
# .. solution 4
#
# No. With a fixed period every copy sits :math:`T - 1` keys back, and rotary positions
# make "attend :math:`T - 1` back" easy to learn without looking at the tokens at all:
# layer 2 copies by position alone, and no head of layer 1 attends to the previous
# token.

fixed, _, fixed_held_out = fit_repeat_model(seed=seed, log=None)
fixed = fixed.to(device)
fixed_held_out = fixed_held_out.to(device)
with torch.no_grad():
    _, fixed_weights = fixed(fixed_held_out, need_weights=True)  # (N, H, L, L) each
fixed_previous = fixed_weights[0][:, :, positions[1:], positions[1:] - 1].mean((0, 2))
offset_back = fixed_weights[1][:, :, queries, queries - T + 1].mean((0, 2))  # (H,)
fixed_loss = next_token_losses(fixed, fixed_held_out)[T:].mean().item()
print(
    f"fixed period: second-half loss {fixed_loss:.3f}; best weight {T - 1} keys back "
    f"in layer 2 {offset_back.max():.2f}; best previous-token score in layer 1 "
    f"{fixed_previous.max():.2f}"
)
claim("fixed period: second-half loss", fixed_loss, below=0.1)
claim("fixed period: best weight T - 1 back in layer 2", offset_back.max(), above=0.5)
claim("fixed period: best previous-token score", fixed_previous.max(), below=0.25)

# %%
# Next: :ref:`sphx_glr_tutorials_15_kv_cache_gqa.py`, generating with a cache of keys
# and values, and sharing them between heads.

# sphinx_gallery_thumbnail_number = 3
