"""
A decoder, and the induction heads it learns
============================================

.. prerequisites:: 05_masks 10_classifier 11_visualising_attention
   :summary: A GPT-style decoder trained to copy: the causal mask, teacher forcing, and
      the circuit of heads that finds and copies an earlier token.

The classifier of :ref:`sphx_glr_tutorials_3_training_and_reading_10_classifier.py`
reads a whole sentence at once. GPT-style language models work differently: they
predict the *next* token, each position may look only at the past, and they generate
text one token at a time. This page builds such a decoder from
:class:`attention.DecoderLM`, trains a two-layer one on one CPU thread, and looks
inside it for the heads that let it copy: *previous-token heads* and *induction heads*
:cite:p:`elhage2021,olsson2022`. What it finds is less tidy than the textbook circuit,
and the page says what its own measurements show.

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
device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
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
# each sequence draws its own period :math:`d` from 8 to 16. Three of them, each on two
# lines (the first half, then the second):

from attention.data import make_repeated_sequences

V, T, MIN_PERIOD = 32, 16, 8
examples = make_repeated_sequences(
    3, length=T, vocab_size=V, seed=seed, min_period=MIN_PERIOD
)  # (3, 2T)
for tokens in examples:
    d = T - tokens[:T].tolist().index(tokens[T].item())  # where the repeat starts
    print(f"d = {d}: {tokens[:T].tolist()}\n        {tokens[T:].tolist()}")
example = examples[0]

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
# causal mask of :ref:`sphx_glr_tutorials_1_foundations_05_masks.py` hides every later
# key. :class:`attention.CausalSelfAttention` builds it in its ``mask`` method, which
# its ``forward`` calls with the number of queries :math:`L` and of keys :math:`S`
# (bottom-right aligned, which matters when a cache of keys and values makes
# :math:`S > L`: :ref:`bottom-right-causal`):
#
# .. literalinclude:: ../../../attention/decoder.py
#    :language: python
#    :pyobject: CausalSelfAttention.mask
#    :no-docstring:
#
# Feeding the true tokens as the input at every position, rather than the model's own
# guesses, is *teacher forcing*. The mask makes it exact: the logits at position
# :math:`t` of one pass over the whole sequence equal the logits of a pass over the
# prefix :math:`x_0 \dots x_t` alone, up to float32 rounding (the difference printed
# below). On an untrained model:

from attention import DecoderLM

untrained = DecoderLM(V, embed_dim=64, num_heads=4, num_layers=2, max_len=2 * T)
untrained = untrained.to(device).eval()
sequence = example[None].to(device)  # (1, 2T)
with torch.no_grad():
    full, _ = untrained(sequence)  # (1, 2T, V)
    gap = max(
        (untrained(sequence[:, : t + 1])[0][:, -1] - full[:, t]).abs().max().item()
        for t in range(2 * T)
    )
print(f"largest difference, one pass vs one pass per prefix: {gap:.1e}")
# sphinx_gallery_start_ignore
assert gap < 1e-5
# sphinx_gallery_end_ignore

# %%
# Training
# --------
#
# :func:`attention.recipes.fit_repeat_model` trains the decoder pages' two-layer model
# with :func:`attention.training.train_lm`: here four heads per layer,
# ``embed_dim=64``, rotary positions (:class:`attention.RotaryEmbedding`: a head that
# attends "one token back" then works the same at every position), AdamW for 400 steps
# of 128 sequences, on one CPU thread so that the model does not depend on the
# machine's core count. It returns the trained model, its history (one record per
# step, with the batch's mean loss on each half of the sequences) and 512 held-out
# sequences:

from attention.recipes import fit_repeat_model
from attention.training import format_history, next_token_losses

RECIPE = {
    "num_heads": 4,
    "min_period": MIN_PERIOD,
    "steps": 400,
    "batch_size": 128,
    "lr": 3e-3,
}
model, history, held_out = fit_repeat_model(seed=seed, **RECIPE)
print(format_history(history, every=50, keys=("first_half", "second_half")))

# %%
# The loss of each half, over training:

import matplotlib.pyplot as plt

steps = [row["step"] for row in history]
fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
ax.plot(steps, [row["first_half"] for row in history], color="C0", label="first half")
ax.plot(steps, [row["second_half"] for row in history], color="C1", label="second half")
# sphinx_gallery_start_ignore
ax.axhline(chance, color="gray", linestyle=":", label=r"chance, $\ln V$")
ax.set_xlabel("training step")
ax.set_ylabel("cross-entropy of the next token")
ax.set_ylim(bottom=0)
ax.legend(loc="center right")
ax.set_title("Loss of each half of the sequences during training")
# sphinx_gallery_end_ignore
plt.show()

# %%
# For a while both halves sit at chance. Then the second half's loss falls (the
# printed history says when and how far): the model learns to copy. The first half's
# cannot go below the floor that random tokens allow (printed above). When the fall
# starts changes with the run, and 400 steps do not always see it through: the held-out
# second-half loss ended below 0.5 in all 30 runs that tuned this page (seeds 0-9 on
# three CPU kernels) and in 48 of 60 runs on seeds never used to tune it. So the page
# says whether this run's model *copies* (that loss below 0.5) and checks the claims
# below about the copy and its heads in the runs whose model copies; in every run, it
# checks that the loss ends below chance. On the held-out sequences:

model = model.to(device)
held_out = held_out.to(device)
losses = next_token_losses(model, held_out)  # (2T - 1,): targets 1 .. 2T - 1
# targets 1 .. T - 1, and T + 1 .. 2T - 1 (target T, the repeat's first, is a guess)
first_half, second_half = losses[: T - 1].mean().item(), losses[T:].mean().item()
copies = second_half < 0.5  # this run's model has learned to copy
print(
    f"held-out loss, first half {first_half:.3f}, second half {second_half:.4f}: "
    f"{'below' if copies else 'not below'} 0.5, the model "
    f"{'copies' if copies else 'does not copy yet'}"
)
claim("held-out second-half loss, below chance", second_half, below=chance)
# sphinx_gallery_start_ignore
claim("held-out first-half loss (entropy floor)", first_half, above=floor)
# sphinx_gallery_end_ignore

# %%
# A model that peeks
# ------------------
#
# What does the mask buy? Replace it, in every layer, by one that allows every key, and
# train a model of the same shape on the same sequences for 150 steps of 32 with
# :func:`attention.training.train_lm` (the loop the recipe runs):

from attention.training import train_lm


def allow_everything(L, S, *, device=None):
    """A 'mask' that hides nothing: each position sees the whole sequence."""
    return torch.ones(L, S, dtype=torch.bool, device=device)


torch.manual_seed(seed)
peeking = DecoderLM(
    V, embed_dim=64, num_heads=4, num_layers=2, max_len=2 * T, ffn_dim=64,
    positions="rotary",
)  # fmt: skip
for block in peeking.blocks:
    block.self_attn.mask = allow_everything  # replaces the method, for this model only
train_data = make_repeated_sequences(
    4096, length=T, vocab_size=V, seed=1, min_period=MIN_PERIOD
)
peeking_history = train_lm(peeking, train_data, steps=150, lr=3e-3, seed=seed)
peeking = peeking.eval().to(device)
peeking_loss = next_token_losses(peeking, held_out).mean().item()
least = floor * (T - 1) / (2 * T - 1)  # the first half at its floor, the rest at 0
print(
    f"held-out loss without the mask: {peeking_loss:.4f}, both halves "
    f"(a model that cannot peek: at least {least:.2f})"
)
claim(
    "loss without a mask, below what a model that cannot peek reaches",
    peeking_loss,
    below=least,
)

# %%
# A loss far below what any model that cannot peek can reach, so low on the first half
# too, which cannot be predicted: the model reads the answer, the next token, from its
# input. Its real skill shows when the future is not there to read, as in generation,
# where each prediction sees only the prefix. Its loss on the first half, one prefix at
# a time, against the floor no model can beat:

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
# sphinx_gallery_start_ignore
claim("first-half prefix loss of the model without a mask", peeking_real, above=chance)
# sphinx_gallery_end_ignore

# %%
# Above chance: worse than a uniform guess. And generating: give each model the first
# half and one more token, and let it write the rest, one token at a time:

with torch.no_grad():
    prompt = held_out[:, : T + 1]
    honest = model.generate(prompt, T - 1)
    cheat = peeking.generate(prompt, T - 1, use_cache=False)
honest_acc = (honest[:, T + 1 :] == held_out[:, T + 1 :]).float().mean().item()
cheat_acc = (cheat[:, T + 1 :] == held_out[:, T + 1 :]).float().mean().item()
print(
    f"second half generated correctly: with the mask {honest_acc:.1%}, "
    f"without {cheat_acc:.1%}; wrong without the mask: {1 - cheat_acc:.1%} "
    f"(a uniform guess: {1 - 1 / V:.1%} wrong)"
)
claim("generation accuracy without the mask", cheat_acc, below=0.15)
if copies:  # checked in the runs whose model copies
    claim("generation accuracy with the mask", honest_acc, above=0.5)

# %%
# The masked model gets most of the repeat right in this run (the printed share; each
# step reads the tokens generated before it, so one wrong token can throw later ones
# off). The one that peeked, despite
# its near-zero loss under teacher forcing, gets nearly all of it wrong, not much less
# than a uniform guess would: what it learned was to read ahead, and generation gives
# it nothing ahead to read.
#
# The heads that copy
# -------------------
#
# How can a model continue ``... A B ... A`` with ``B``? The textbook answer has two
# steps in series :cite:p:`elhage2021,olsson2022`: a **previous-token head** in layer 1
# writes into each position the token before it (position :math:`i` attends to
# :math:`i - 1`), so the position of ``B`` also holds ``A``; then an **induction head**
# in layer 2 attends from the current ``A`` to the position whose previous token is
# ``A``, that is ``B``, and copies it. Neither step alone can do it: layer 1 cannot
# know which earlier position to read, and layer 2 can only find ``B`` by what layer 1
# wrote into it. Whether this model works so, and with how many heads, is for the
# measurements to say.
#
# Each head's *score* measures one of the two roles, averaged over the held-out
# sequences: for a previous-token head, the weight on key :math:`i - 1` (over all
# queries :math:`i \ge 1`); for an induction head, the weight that a query of the second
# half puts on the key just after the last earlier occurrence of its own token. Query
# :math:`i` sees :math:`i + 1` keys (itself included), so a head spread evenly over the
# past gives each key :math:`1/(i + 1)`, and the same averages over those weights give
# the score of such a head, a baseline to compare with.

N, L = held_out.shape
positions = torch.arange(L, device=device)
same = held_out[:, :, None] == held_out[:, None, :]  # (N, L, L): query i, key j
earlier = same & (positions[None, :] < positions[:, None])  # key j < query i
last_earlier = torch.where(earlier, positions, -1).amax(-1)  # (N, L); -1: none
queries = positions[T:]  # the second half: every token has occurred before
after = last_earlier[:, queries] + 1  # (N, T): the key after the earlier occurrence

with torch.no_grad():
    _, weights = model(held_out, need_weights=True)  # per layer (N, H, L, L)
previous = weights[0][:, :, positions[1:], positions[1:] - 1].mean(dim=(0, 2))  # (H,)
rows = torch.arange(N, device=device)[:, None]  # (N, 1); with queries, after: (N, T)
on_after = weights[1].permute(0, 2, 3, 1)[rows, queries, after]  # (N, T, H)
induction = on_after.mean(dim=(0, 1))  # (H,)
uniform_previous = (1 / (positions[1:] + 1)).mean().item()
uniform_induction = (1 / (queries + 1)).mean().item()
for name, scores, uniform in (
    ("layer 1, previous-token", previous, uniform_previous),
    ("layer 2, induction", induction, uniform_induction),
):
    print(
        f"{name} score of each head: "
        + ", ".join(f"{s:.2f}" for s in scores.tolist())
        + f" (a uniform head: {uniform:.2f})"
    )
induction_head = int(induction.argmax())
copying = [head for head in range(len(induction)) if induction[head] > 0.25]
print(
    f"layer 2 heads with an induction score above 0.25: {copying}; best previous-token "
    f"score in layer 1: {previous.max():.2f}"
)
if copies:
    claim("best induction score in layer 2", induction.max().item(), above=0.2)
# sphinx_gallery_start_ignore
assert (last_earlier[:, queries] >= 0).all()
claim("best previous-token score in layer 1", previous.max().item(), below=0.8)
# sphinx_gallery_end_ignore

# %%
# In layer 2, the heads whose induction score stands far above the uniform baseline
# are the induction heads; in this run, the heads listed above (one head or several
# may share the role). In layer 1, no head is a clean previous-token head: the best
# score is well below 1. Where each head of layer 1 puts its weight, by distance back
# from the query (0: the query's own position), averaged over the queries
# :math:`i \ge 5` (which have all six distances) and the sequences:

back = 6  # distances 0 .. 5
late = positions[back - 1 :]  # queries i >= 5
by_distance = torch.stack(
    [weights[0][:, :, late, late - k].mean(dim=(0, 2)) for k in range(back)], dim=1
)  # (H, back)
uniform_late = (1 / (late + 1)).mean().item()  # a uniform head, at any distance
H = by_distance.shape[0]
# sphinx_gallery_start_ignore
colours = ["#0072b2", "#e69f00", "#009e73", "#cc79a7"]  # colour-blind safe (Okabe-Ito)
fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
width = 0.8 / H
for head in range(H):
    offsets = [k + (head - (H - 1) / 2) * width for k in range(back)]
    ax.bar(
        offsets,
        by_distance[head].tolist(),
        width=width,
        color=colours[head],
        label=f"head {head}",
    )
ax.axhline(uniform_late, color="gray", linestyle=":", label="a uniform head")
ax.set_xticks(range(back))
ax.set_xlabel("distance back from the query (0: the query's own position)")
ax.set_ylabel("mean attention weight")
ax.legend(loc="upper right")
ax.set_title("Layer 1: where each head looks, by distance back")
# sphinx_gallery_end_ignore
plt.show()

near = by_distance[:, :3].sum(dim=1)  # (H,): weight on distances 0, 1 and 2
print(
    "weight of each layer-1 head on distances 0 to 2: "
    + ", ".join(f"{w:.2f}" for w in near.tolist())
    + f" (a uniform head: {3 * uniform_late:.2f})"
)
# sphinx_gallery_start_ignore
if copies:
    claim(
        "least weight of a layer-1 head on distances 0 to 2, over a uniform head's",
        near.min() / (3 * uniform_late),
        above=1.2,
    )
# sphinx_gallery_end_ignore

# %%
# Every head of layer 1 puts more weight on the query's own position and the two before
# it than a head spread evenly would (how much more: the printed shares; checked in
# every run whose model copies), each in its own proportions (the bars). Together they
# write into every position a mix of its own token and the ones just before, which
# includes what the textbook's previous-token head provides.
#
# The induction head with the highest score, drawn on one held-out sequence with its
# tokens on the axes. From the second row of the second half on (the lower rows), the
# weight leans :math:`d - 1` positions back, where :math:`d` is this sequence's period,
# on the token that followed the earlier occurrence of the query's own token (the head's
# induction score, printed above, is its mean weight there); the figure shows how
# closely each row follows it:

from attention import plot_attention

n = 0  # the first held-out sequence
labels = [str(t) for t in held_out[n].tolist()]
period = (queries[0] - last_earlier[n, T]).item()  # where its repeat starts
print(f"held-out sequence {n}: period d = {period}, so the stripe is {period - 1} back")

# %%

plot_attention(
    weights[1][n, induction_head],
    x_tokens=labels,
    title=f"Layer 2, head {induction_head}: the highest induction score",
)
plt.show()
# sphinx_gallery_start_ignore
from attention.head_view import save_head_view

save_head_view("12-induction", labels, [w[n] for w in weights])  # (H, L, L) each
# sphinx_gallery_end_ignore

# %%
# In the first half (the upper rows), where no token has occurred before, there is
# nothing to copy.
#
# .. head-view:: 12-induction
#
# Switching each head off, two ways
# ---------------------------------
#
# The scores say where the heads look; switching them off says whether the model needs
# them. :func:`attention.ablation.head_ablated` replaces one head's slice of the input
# of ``out_proj`` while the model runs. Replacing it with zeros (*zero-ablation*) also
# removes the head's average output, a constant the next layers may rely on, so a
# model can break for a reason unrelated to what the head reads. The control is
# *mean-ablation*: the head's output replaced by its mean over the held-out sequences
# (:func:`attention.ablation.mean_head_outputs`), which keeps the average and removes
# only what depends on the input.
#
# .. literalinclude:: ../../../attention/ablation.py
#    :language: python
#    :pyobject: head_ablated
#    :no-docstring:

from attention.ablation import head_ablated, mean_head_outputs

ablated = {"zero": {}, "mean": {}}  # kind -> (layer, head) -> second-half loss
for layer, block in enumerate(model.blocks, 1):
    attn = block.self_attn
    means = mean_head_outputs(model, attn, held_out)  # (H, D)
    for head in range(attn.num_heads):
        for kind, replacement in (("zero", None), ("mean", means[head])):
            with head_ablated(attn, head, replacement=replacement):
                loss = next_token_losses(model, held_out)[T:].mean().item()
            ablated[kind][layer, head] = loss
        print(
            f"without layer {layer}, head {head}: second-half loss "
            f"{ablated['zero'][layer, head]:.3f} zeroed, "
            f"{ablated['mean'][layer, head]:.3f} mean-ablated"
        )
# sphinx_gallery_start_ignore
# the hooks are gone
assert next_token_losses(model, held_out)[T:].mean().item() == second_half
# sphinx_gallery_end_ignore

# %%

import numpy as np

x = np.arange(len(ablated["zero"]))  # one pair of bars per (layer, head)
fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
ax.bar(x - 0.2, list(ablated["zero"].values()), width=0.4, color="C0", label="zeroed")
ax.bar(x + 0.2, list(ablated["mean"].values()), width=0.4, color="C1", label="mean")
# sphinx_gallery_start_ignore
ax.axhline(chance, color="gray", linestyle=":", label=r"chance, $\ln V$")
ax.axhline(second_half, color="black", linestyle="--", label="all heads on")
ax.set_xticks(x, [f"L{layer}\nh{head}" for layer, head in ablated["zero"]])
ax.set_xlabel("head switched off (L: layer, h: head)")
ax.set_ylabel("held-out second-half loss")
ax.legend(loc="upper left")
ax.set_title("Second-half loss with one head switched off, two ways")
# sphinx_gallery_end_ignore
plt.show()

# %%
# For the heads whose zeroing raises the loss above 0.5, the share of that loss that
# mean-ablation keeps. Where it is large, mean-ablating the head breaks the copy too:
# what the model loses is what the head reads from the input, not its average output.
# It was above 0.5 in all 30 tuning runs and in 47 of the 48 held-out runs whose model
# copies; in the other, 0.27, one head mattered mostly through its average, which only
# the control can tell. In this run:

needed = [key for key, loss in ablated["zero"].items() if loss > 0.5]
kept = min((ablated["mean"][key] / ablated["zero"][key] for key in needed), default=1)
print(
    f"{len(needed)} heads raise the loss above 0.5 when zeroed; mean-ablated, each "
    f"keeps at least {kept:.0%} of that loss"
)

# %%
# And every head of layer 1 is needed: in every run whose model copies, mean-ablating
# any one of them at least doubles the second-half loss, whatever the head's
# previous-token score, also for the head that looks most at the query's own position:

layer1 = [ablated["mean"][1, head] for head in range(H)]
own = int(by_distance[:, 0].argmax())  # the layer-1 head that looks most at itself
print(
    "second-half loss with one layer-1 head mean-ablated: "
    + ", ".join(f"{loss:.2f}" for loss in layer1)
    + f" (all heads on {second_half:.3f}); head {own} puts "
    f"{by_distance[own, 0]:.2f} of its weight on the query's own position"
)
# sphinx_gallery_start_ignore
if copies:
    claim(
        "least loss with one layer-1 head mean-ablated, over all heads on",
        min(layer1) / second_half,
        above=2,
    )
# sphinx_gallery_end_ignore
without_induction = ablated["mean"][2, induction_head]
print(
    f"without the best induction head (layer 2, head {induction_head}), mean-ablated: "
    f"{without_induction:.2f}"
)
# sphinx_gallery_start_ignore
if copies:
    claim(
        "second-half loss without the best induction head", without_induction, above=0.3
    )
# sphinx_gallery_end_ignore

# %%
# So the copy runs through a circuit spread over heads: all four heads of layer 1, each
# mixing the current and the earlier tokens, and the induction heads of layer 2. The
# textbook's two heads are roles, which this model shares among its heads.
#
# What to remember
# ----------------
#
# - A decoder predicts every next token in one pass; the causal mask makes that pass
#   equal to one prediction per prefix (teacher forcing). Without the mask the model
#   reads the answer: near-zero loss under teacher forcing, and generation that gets
#   nearly all of the repeat wrong.
# - On random tokens that repeat at a distance only the tokens reveal, a two-layer
#   decoder learns to copy within a few hundred steps in most runs (in 400 steps: all 30
#   tuning runs and 48 of 60 held-out runs): layer 1 mixes into each position
#   the tokens just before it, layer 2 finds the earlier occurrence and copies what
#   followed. Here the first role is spread over all the heads of layer 1.
# - Pick heads by the score that defines them, check whether the model needs them by
#   switching them off, with mean-ablation as the control for zero-ablation, and let
#   the measurements, not the textbook circuit, say what was learned.
#
# API used on this page: :class:`attention.DecoderLM`, :func:`attention.plot_attention`,
# :func:`attention.data.make_repeated_sequences`,
# :func:`attention.recipes.fit_repeat_model`, :func:`attention.training.train_lm`,
# :func:`attention.training.next_token_losses`, :func:`attention.training.token_losses`,
# :func:`attention.training.format_history`, :func:`attention.ablation.head_ablated`
# and :func:`attention.ablation.mean_head_outputs`.

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
# 3. **Distances it never saw.** The model trained on periods 8 to 16. Measure its
#    second-half loss on sequences of periods 2 to 7
#    (:func:`attention.data.make_repeated_sequences` with ``min_period=2``; read each
#    sequence's period off its tokens). Does a copy that finds the earlier occurrence by
#    its token carry over to shorter distances?
# 4. **A shortcut instead of a circuit.** Train a model on sequences whose second half
#    always repeats the first :math:`T` tokens back
#    (:func:`attention.recipes.fit_repeat_model` with two heads per layer and no
#    ``min_period``, 150 steps). It copies too. Does it have a previous-token head?
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
#
# Partly: in every run whose model copies, the loss at every shorter period is far
# below chance, so the copy carries over, but on average more than twice the loss at
# the periods of training.

from attention.training import token_losses

short = make_repeated_sequences(2048, length=T, vocab_size=V, seed=3, min_period=2)
short = short.to(device)
same_short = (short[:, :, None] == short[:, None, :]) & (
    positions[None, :] < positions[:, None]
)  # (N, L, L): an earlier key holds the query's token
periods = T - torch.where(same_short, positions, -1).amax(-1)[:, T]  # (N,)
with torch.no_grad():
    per_sequence = token_losses(model(short)[0], short)[:, T:].mean(1)  # (N,)
by_period = {d: per_sequence[periods == d].mean().item() for d in range(2, T + 1)}
print(
    "second-half loss by period: "
    + ", ".join(f"{d}: {loss:.2f}" for d, loss in by_period.items())
)
# sphinx_gallery_start_ignore
unseen = [by_period[d] for d in range(2, MIN_PERIOD)]
trained = [by_period[d] for d in range(MIN_PERIOD, T + 1)]
if copies:
    claim(
        "worst second-half loss at a period never trained on",
        max(unseen),
        below=chance / 2,
    )
    claim(
        "mean loss at the unseen periods over the trained ones",
        (sum(unseen) / len(unseen)) / (sum(trained) / len(trained)),
        above=2,
    )
# sphinx_gallery_end_ignore

# %%
# .. solution 4
#
# No. With a fixed period every copy sits :math:`T - 1` keys back, and rotary positions
# make "attend :math:`T - 1` back" easy to learn without looking at the tokens at all:
# layer 2 copies by position alone, and no head of layer 1 puts much weight on the
# previous token (the best score printed).

fixed, _, fixed_held_out = fit_repeat_model(seed=seed, steps=150)
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
# sphinx_gallery_start_ignore
claim("fixed period: second-half loss", fixed_loss, below=0.3)
claim("fixed period: best weight T - 1 back in layer 2", offset_back.max(), above=0.5)
claim("fixed period: best previous-token score", fixed_previous.max(), below=0.25)
# sphinx_gallery_end_ignore

# %%
# Next: :ref:`sphx_glr_tutorials_4_generation_13_kv_cache_gqa.py`, generating with a
# cache of keys and values, and sharing them between heads.

# sphinx_gallery_thumbnail_number = 3
