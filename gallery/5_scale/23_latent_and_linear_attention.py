"""
What a layer keeps: latent and linear attention
===============================================

.. prerequisites:: 13_kv_cache_gqa 14_positions 16_language_model
   :summary: Multi-head latent attention caches one small latent per token; linear
      attention keeps a fixed-size sum. Both trained on real text, loss next to bytes.

To write the next token, a decoder's attention layer needs something of every token
before it. Softmax attention keeps every key and value (the key/value cache of
:ref:`sphx_glr_tutorials_4_generation_13_kv_cache_gqa.py`), and grouped-query attention
keeps fewer of them. This page follows two answers that today's models give to the
question *what must a layer keep, and what does it cost?*:

- **multi-head latent attention** (MLA, DeepSeek-V2 :cite:p:`deepseekv2`) keeps one
  small *latent* per token, from which every head's key and value are rebuilt, plus one
  small rotary key shared by all heads;
- **linear attention** :cite:p:`katharopoulos2020` keeps no token at all: a sum of fixed
  size that every new token is added to, which makes the layer a recurrent network.

Both plug into the package's :class:`attention.DecoderLM` by name, each with its own
decoding state (:class:`attention.DecodingState`). The page counts the bytes each keeps,
checks that each computes what its formula says, and trains the character model of
:ref:`page 16 <sphx_glr_tutorials_4_generation_16_language_model.py>` with each, on the
same text with the same budget.
"""

# %%
# Setup
# -----

import torch

from attention.repro import claim, default_device, seed_everything

seed = seed_everything()  # ATTENTION_SEED, default 0
device = default_device()
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# What each variant keeps per token
# ---------------------------------
#
# The same model five times: three layers of width :math:`E = 64` with :math:`H = 4`
# query heads of :math:`d_h = 16`, differing only in the attention, chosen by name. Each
# model makes its own empty state with ``new_cache``, and
# :attr:`~attention.DecodingState.nbytes` counts what it allocates. Per token and layer,
# in elements (DeepSeek-V2's Table 1):
#
# - multi-head attention: a key and a value per head, :math:`2 H d_h`;
# - grouped-query attention with :math:`H_{kv}` key/value heads: :math:`2 H_{kv} d_h`;
# - MLA: a latent of :math:`d_c` and a rotary key of :math:`d_h^R`, :math:`d_c + d_h^R`,
#   here with DeepSeek-V2's proportions :math:`d_c = 4 d_h` and :math:`d_h^R = d_h / 2`,
#   so :math:`4.5\,d_h`;
# - linear attention: nothing per token; :math:`(d_h^2 + d_h) H` per layer, whatever the
#   length.

from attention import DecoderLM

VARIANTS = {  # name: the model's arguments
    "multi-head": dict(num_kv_heads=4),
    "grouped-query, 2 kv heads": dict(num_kv_heads=2),
    "multi-query, 1 kv head": dict(num_kv_heads=1),
    "latent (MLA)": dict(attention="latent"),
    "linear": dict(attention="linear", positions="none"),
}
E, H, LAYERS, CONTEXT = 64, 4, 3, 128
d_h = E // H
formula = {  # elements per token and layer
    "multi-head": 2 * H * d_h,
    "grouped-query, 2 kv heads": 2 * 2 * d_h,
    "multi-query, 1 kv head": 2 * 1 * d_h,
    "latent (MLA)": 4 * d_h + d_h // 2,
}
bytes_per_token = {}
state_bytes = {}  # at CONTEXT tokens
for name, options in VARIANTS.items():
    model = DecoderLM(
        100, embed_dim=E, num_heads=H, num_layers=LAYERS, max_len=4096,
        **{"positions": "rotary", **options},
    )  # fmt: skip
    short, long = (model.new_cache(1, max_len=n).nbytes for n in (CONTEXT, 4096))
    bytes_per_token[name] = short / CONTEXT
    state_bytes[name] = short
    if name == "linear":
        assert short == long == (d_h * d_h + d_h) * H * LAYERS * 4  # float32: 4 bytes
        print(f"{name:26s} {short:,} bytes at {CONTEXT} tokens and at 4096: fixed")
    else:
        assert (
            short == formula[name] * LAYERS * CONTEXT * 4
            and long == short * 4096 // CONTEXT
        )
        mib = long / 2**20
        print(f"{name:26s} {short / CONTEXT:5.0f} bytes per token ({formula[name]} x "
              f"{LAYERS} layers x 4 bytes); {mib:.2f} MiB at 4096 tokens")  # fmt: skip

# %%
# MLA keeps 72 elements per token and layer where multi-head attention keeps 128;
# multi-query attention keeps fewer still (32), but gives every head the same key and
# value, where MLA rebuilds a different key and value for every head from the latent.
# Linear attention's state is as large at 4096 tokens as at 128.
#
# Multi-head latent attention
# ---------------------------
#
# MLA compresses each token :math:`x_t` to one latent :math:`c^{KV}_t = W^{DKV} x_t` of
# size :math:`d_c` (with an RMSNorm, as DeepSeek's code has), and rebuilds head
# :math:`i`'s key and value from it: :math:`k^C_{t,i} = W^{UK}_i c^{KV}_t` and
# :math:`v_{t,i} = W^{UV}_i c^{KV}_t`. The queries may be compressed the same way
# (``query_latent_dim``).
#
# The trick is where the up-projections go at inference. Head :math:`i`'s score is
# :math:`q_{t,i}^\top W^{UK}_i c^{KV}_j = (W^{UK\top}_i q_{t,i})^\top c^{KV}_j`, so the
# query can be carried to the latent's space once (:math:`W^{UK}` *absorbed* into the
# query) and every head scores the cached latents themselves; likewise the weighted sum
# of the latents is taken first and :math:`W^{UV}_i` applied after. The keys and values
# of the cached tokens are never built: attention reads the latents directly, like
# multi-query attention with one key of size :math:`d_c + d_h^R` shared by every head.
#
# Rotary positions would spoil this: a rotation by the query's position between
# :math:`W^{UK}_i` and the latent would make the product depend on both positions, so no
# single matrix could be absorbed. MLA therefore *decouples* them: each head's query
# gets an extra part :math:`q^R_{t,i}` of size :math:`d_h^R`, and each token one extra
# key :math:`k^R_t = W^{KR} x_t`, shared by every head and cached beside the latent, and
# only these are rotated (:class:`attention.RotaryEmbedding`). A head's score adds the
# two parts: :math:`q^{C\top} k^C + q^{R\top} k^R`, divided by :math:`\sqrt{d_h +
# d_h^R}`. The forward pass of :class:`attention.MultiHeadLatentAttention`, both forms
# side by side:
#
# .. literalinclude:: ../../../attention/latent.py
#    :language: python
#    :pyobject: MultiHeadLatentAttention.forward
#    :no-docstring:
#
# The two forms are the same function, in float64 to rounding:

from attention import MultiHeadLatentAttention

mla = MultiHeadLatentAttention(
    E, H, latent_dim=4 * d_h, rope_dim=d_h // 2, query_latent_dim=32
)
mla = mla.double().eval()
x = torch.randn(2, 10, E, dtype=torch.float64)
naive, naive_weights = mla(x, need_weights=True, absorb=False)
absorbed, absorbed_weights = mla(x, need_weights=True, absorb=True)
print(f"largest difference: output {(absorbed - naive).abs().max():.1e}, "
      f"weights {(absorbed_weights - naive_weights).abs().max():.1e}")  # fmt: skip
assert torch.allclose(absorbed, naive, atol=1e-12, rtol=0)
assert torch.allclose(absorbed_weights, naive_weights, atol=1e-12, rtol=0)

# %%
# The unit tests also check this module against the attention of Hugging Face
# transformers' DeepSeek-V3 model, with the weights copied, to 1e-10 in float64.
#
# Linear attention
# ----------------
#
# Softmax attention weighs key :math:`j` by :math:`\exp(q_i^\top k_j / \sqrt{D})`, which
# does not split into a part of :math:`q_i` times a part of :math:`k_j`. Linear
# attention replaces it by a product of features, :math:`\phi(q_i)^\top \phi(k_j)` with
# :math:`\phi(x) = \text{elu}(x) + 1` (positive, so the weights are), and the sum over
# the past then factors out of the query:
#
# .. math::
#     o_i = \frac{\sum_{j \le i} \phi(q_i)^\top \phi(k_j)\, v_j}
#                {\sum_{j \le i} \phi(q_i)^\top \phi(k_j)}
#         = \frac{\phi(q_i)^\top S_i}{\phi(q_i)^\top z_i}, \qquad
#     S_i = S_{i-1} + \phi(k_i) v_i^\top, \quad z_i = z_{i-1} + \phi(k_i).
#
# Read left to right it is attention with masked :math:`L \times L` weights, computed in
# parallel for training (here; :cite:t:`katharopoulos2020` compute the same sums with
# cumulative sums); read right to left it is a recurrent network whose state,
# :math:`S` (:math:`D \times D`) and :math:`z` (:math:`D`) per head, takes one addition
# per token:
#
# .. literalinclude:: ../../../attention/linear_attention.py
#    :language: python
#    :pyobject: RecurrentState.update
#    :no-docstring:
#
# :class:`attention.LinearAttention` runs the positions of one call in parallel and adds
# the sums of the earlier calls:
#
# .. literalinclude:: ../../../attention/linear_attention.py
#    :language: python
#    :pyobject: LinearAttention.forward
#    :no-docstring:
#
# One call over ten positions, and ten calls of one position through the state, agree:

from attention import LinearAttention

linear = LinearAttention(E, H).double().eval()
parallel, _ = linear(x)
state = linear.new_state(1, batch_size=2)
with torch.no_grad():
    recurrent = torch.cat(
        [linear(x[:, t : t + 1], cache=state)[0] for t in range(10)], dim=1
    )
difference = (parallel - recurrent).abs().max()
print(f"parallel against recurrent: largest difference {difference:.1e}")
assert torch.allclose(parallel, recurrent, atol=1e-12, rtol=0)

# %%
# The price is visible in the formula: its weights grow only as fast as
# :math:`\phi(q)^\top \phi(k)`, roughly linearly in the scores rather than
# exponentially, and a :math:`D \times D` state can hold only about :math:`D` key/value
# pairs distinctly: once a token is added to the sum it cannot be picked out again.
# Softmax's exponential can put nearly all the weight on one key; the copying of
# induction heads (:ref:`sphx_glr_tutorials_4_generation_12_decoder_induction_heads.py`)
# needs exactly that.
#
# Trained on the same text with the same budget
# ---------------------------------------------
#
# :func:`attention.recipes.fit_char_lm` trains page 16's character model; here it trains
# it three times, with multi-head, latent and linear attention, each for ``STEPS`` steps
# (page 16 trains for 400: this page shrinks the budget to fit three models in its build
# time, so every loss here is higher than page 16's), with the same seed, the same
# batches and the same learning rate. This page gives linear attention no positions
# (rotary positions can be applied to :math:`\phi(q)` and :math:`\phi(k)`, as RoFormer
# :cite:p:`su2021` does); the causal sum itself lets a position count the ones before
# it. The softmax models get rotary positions. The validation loss is measured every 22
# steps on 32 windows of the validation text.

from attention.recipes import fit_char_lm

STEPS = 110
TRAINED = {
    "multi-head": dict(num_kv_heads=None),
    "latent (MLA)": dict(attention="latent", num_kv_heads=None),
    "linear": dict(attention="linear", num_kv_heads=None, positions="none"),
}
runs = {
    name: fit_char_lm(seed=seed, steps=STEPS, eval_every=22, **options)
    for name, options in TRAINED.items()
}
val_loss = {}
for name, (model, history, _) in runs.items():
    val_loss[name] = history[-1]["val_loss"]
    kept = (f"{state_bytes[name]:,} bytes in all, fixed" if name == "linear" else
            f"{bytes_per_token[name]:4.0f} bytes per token at {CONTEXT}")  # fmt: skip
    print(f"{name:12s} validation loss {val_loss[name]:.3f} nats per character, {kept}")
    assert model.new_cache(1).nbytes / CONTEXT == bytes_per_token[name]

# %%
# The validation loss along the way, against a bigram model's (dashed): the next
# character from the frequencies of what followed each character in the training text,
# as on page 16:

import matplotlib.pyplot as plt

_, _, (train_ids, val_text) = runs["multi-head"]
V = int(torch.cat([train_ids, val_text]).max()) + 1
counts = torch.ones(V, V)  # (V, V), with one added to every pair
counts.index_put_(
    (train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1), accumulate=True
)
log_p = (counts / counts.sum(-1, keepdim=True)).log()  # (V, V)
bigram = -log_p[val_text[:-1], val_text[1:]].mean().item()
print(f"a bigram model's loss on the validation text: {bigram:.3f} nats per character")

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
for name, (_, history, _) in runs.items():
    points = [(row["step"], row["val_loss"]) for row in history if "val_loss" in row]
    ax.plot(
        *zip(*points, strict=True),
        marker="o",
        label=f"{name} ({state_bytes[name] / 1024:.0f} KiB in all, fixed)"
        if name == "linear"
        else f"{name} ({bytes_per_token[name]:.0f} B)",
    )
ax.axhline(bigram, color="gray", linestyle="--", label="bigram model")
ax.set(xlabel="training step", ylabel="validation loss (nats per character)",
       title="The same model and budget, three attentions")  # fmt: skip
ax.legend(title="attention (bytes kept per token at 128)")
# sphinx_gallery_end_ignore
plt.show()

# %%
# With this budget the models are still early in training: both softmax models end not
# far from the bigram model's loss (printed above), so MLA ending close to multi-head
# attention while keeping a little over half of its bytes (the difference and the share
# are printed below) shows only that it learns as fast this early, not that it attends
# as well. Linear attention ends behind both (the printed losses above); it also differs
# from them in having no positions, so its gap measures the two changes together. Both
# differences are printed below with the bound that the page checks in every run.

softmax = ["multi-head", "latent (MLA)"]
gap = val_loss["linear"] - min(val_loss[name] for name in softmax)
print(
    f"linear minus the best softmax attention: {gap:.3f} nats per character "
    "(checked above 0.1)"
)
mla_minus_mha = val_loss["latent (MLA)"] - val_loss["multi-head"]
share = bytes_per_token["latent (MLA)"] / bytes_per_token["multi-head"]
print(
    f"MLA minus multi-head: {mla_minus_mha:.3f}, with {share:.0%} of its bytes "
    "(checked below 0.2)"
)
claim("linear attention's loss above the best softmax attention's", gap, above=0.1)
claim("MLA's loss minus multi-head attention's", mla_minus_mha, below=0.2)

# %%
# How sharp is each attention? For each model, the largest weight each query gives any
# key, averaged over the queries of layer 0 on 8 validation windows (from the 64th
# position, so that a uniform weight would be at most 1/64):

from attention.text import windows

_, _, (_, val_ids) = runs["multi-head"]
probe = windows(val_ids, CONTEXT)[:8]  # (8, 128)
sharpness = {}
for name, (model, _, _) in runs.items():
    with torch.no_grad():
        _, weights = model(probe, need_weights=True)
    largest = weights[0][:, :, 63:].amax(dim=-1)  # layer 0: (8, H, 65 queries)
    sharpness[name] = largest.mean().item()
    print(f"{name:24s} mean largest weight {sharpness[name]:.3f}")
softmax_over_linear = min(sharpness[name] for name in softmax) / sharpness["linear"]
print(
    f"the smaller softmax mean over linear's: {softmax_over_linear:.1f} "
    "(checked above 4)"
)
claim(
    "softmax's mean largest weight over linear attention's",
    softmax_over_linear,
    above=4,
)

# %%
# After 110 steps linear attention spreads its weight: its mean largest weight is a
# fraction of the softmax attentions' (the printed means and their ratio, against a
# uniform weight of at most 1/64), the bluntness the formula predicted.
#
# Generation goes through each model's own state, and gives the tokens that re-encoding
# the whole text gives (in float64, where the absorbed and naive forms of MLA agree to
# rounding):

from attention.text import CharTokenizer, python_docs

tokenizer = CharTokenizer(python_docs())
prompt = tokenizer.encode("The for statement").view(1, -1)  # (1, 17)
for name, (model, _, _) in runs.items():
    model = model.double()
    cached = model.generate(prompt, 12)
    assert torch.equal(cached, model.generate(prompt, 12, use_cache=False))
    print(f"{name:24s} {tokenizer.decode(cached[0])!r}")

# %%
# What to remember
# ----------------
#
# - A decoder's attention layer keeps what it needs of the past in a decoding state;
#   what it keeps sets the memory of generation: :math:`2 H_{kv} d_h` elements per token
#   and layer for keys and values, :math:`d_c + d_h^R` for MLA's latent and rotary key,
#   a fixed :math:`(d_h^2 + d_h) H` for linear attention.
# - MLA rebuilds every head's key and value from one latent, and at inference absorbs
#   the up-projections into the query and the output so that attention reads the latents
#   directly; the rotary part is decoupled so that the absorption survives positions.
# - Linear attention is softmax attention with a kernel in place of the exponential: in
#   parallel for training, a recurrent sum for generation; what it gives up is the sharp
#   weight on one token.
#
# API used on this page: :class:`attention.MultiHeadLatentAttention`,
# :class:`attention.LinearAttention`, :class:`attention.DecoderLM` and
# :func:`attention.recipes.fit_char_lm`.
#
# Next: back to the beginning in
# :ref:`sphx_glr_tutorials_1_foundations_01_qkv_analogy.py`, or the :ref:`api`.

# sphinx_gallery_thumbnail_number = 1
