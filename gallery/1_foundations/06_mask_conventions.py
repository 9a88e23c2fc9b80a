"""
PyTorch's mask conventions
==========================

.. prerequisites:: 04_multi_head 05_masks
   :summary: The mask conventions of F.scaled_dot_product_attention and
      nn.MultiheadAttention, and where they differ: half precision, empty rows, more
      keys.

PyTorch has more than one way of saying "this key is blocked", and they disagree on what
``True`` means. This page puts the mask conventions of
``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` side by side, computed
on the same example (FlexAttention's ``mask_mod``, a function rather than a tensor, is
the subject of :ref:`sphx_glr_tutorials_5_scale_19_flex_attention.py`): they all give
the same outputs once converted, and they differ at the edges, which the rest of the
page follows one by one: large finite numbers in half precision, a query with no key
left, and causal masks with more keys than queries.

The causal and padding masks used here are built on
:ref:`sphx_glr_tutorials_1_foundations_05_masks.py`. The package's own convention, used
everywhere, is a **bool** mask where ``True`` means *may attend*.
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
# The example
# -----------
#
# The three sentences of :ref:`sphx_glr_tutorials_1_foundations_05_masks.py`, padded to
# six tokens, with its causal mask, its padding mask and their combination ``both``, and
# random token vectors ``x``. The mask of the second sentence, "a dog ran":

from attention import causal_mask, padding_mask

sentences = [
    "the cat sat on the mat".split(),
    "a dog ran".split(),
    "birds sing at dawn".split(),
]
N, S = len(sentences), max(len(s) for s in sentences)
L = S  # self-attention: as many queries as keys
PAD = "<pad>"
lengths = [len(s) for s in sentences]
padded = [s + [PAD] * (S - len(s)) for s in sentences]
causal = causal_mask(L, device=device)  # (L, S)
padding = padding_mask(torch.tensor(lengths, device=device), S)  # (N, 1, 1, S)
both = causal & padding  # (L, S) & (N, 1, 1, S) -> (N, 1, L, S)
E, H = 16, 2
x = torch.randn(N, L, E, device=device)  # (N, L, E)
print(both[1, 0].int())

# %%
# Conventions in PyTorch
# ----------------------
#
# PyTorch has more than one way of saying "blocked":
#
# - ``F.scaled_dot_product_attention``'s bool ``attn_mask``: ``True`` = may attend, the
#   same as this package.
# - ``nn.MultiheadAttention``'s bool ``attn_mask`` and ``key_padding_mask``: ``True`` =
#   **blocked**, the opposite.
# - Additive float masks, accepted by both: the mask is *added* to the scores, so ``0``
#   lets a key through and a very negative number blocks it. The textbook value is
#   ``-inf``; much code uses ``-1e9`` or ``-1e20`` instead.
#
# The package converts only in :mod:`attention.masks`. For ``nn.MultiheadAttention`` the
# causal mask becomes an ``attn_mask`` (:func:`attention.masks.to_torch_attn_mask`,
# which returns ``~mask``) and the padding mask a ``key_padding_mask`` of shape
# ``(N, S)``:
#
# .. literalinclude:: ../../../attention/masks.py
#    :language: python
#    :pyobject: to_torch_key_padding_mask
#
# The table below is computed, not typed: for each convention it builds the mask from
# the same ``causal & padding``, reads the value it uses for "may attend" and for
# "blocked", runs the attention, and prints the largest difference from this package's
# output ("ours"). The function rows run on per-head tensors ``(N, H, L, D)``, with
# ``F.sdpa`` short for ``F.scaled_dot_product_attention``; the module rows run
# ``nn.MultiheadAttention`` and :meth:`attention.MultiHeadAttention.from_torch`, a copy
# of it with every weight.

import torch.nn.functional as F
from torch import nn

from attention import MultiHeadAttention, scaled_dot_product_attention
from attention.masks import (
    from_torch_masks,
    to_torch_attn_mask,
    to_torch_key_padding_mask,
)

D = 8
q, k, v = torch.randn(3, N, H, L, D, device=device).unbind(0)  # each (N, H, L, D)
torch_mha = nn.MultiheadAttention(E, H, batch_first=True, device=device)
ours = MultiHeadAttention.from_torch(torch_mha)


def additive(blocked_value):
    """An additive float mask: 0 where a key may be attended to, ``blocked_value``
    elsewhere.
    """
    return torch.zeros(both.shape, device=device).masked_fill(~both, blocked_value)


# sphinx_gallery_start_ignore
# Sentence 1, head axis 0: query 2 may attend to key 0; query 0 may not attend to key 1.
allowed_at, blocked_at = (1, 0, 2, 0), (1, 0, 0, 1)
assert both[allowed_at] and not both[blocked_at]
# the same two cells in nn.MultiheadAttention's masks: (L, S) and (N, S)
am_at, kpm_at = ((2, 0), (0, 1)), ((1, 0), (1, 4))


def shown(value):
    value = value.item()
    return str(value) if isinstance(value, bool) else f"{value:g}"


table = []


def add_row(path, argument, mask, output, reference, at=(allowed_at, blocked_at)):
    """One line of the table: the mask's dtype, its value at a cell that may attend and
    at one that is blocked, and the output's largest distance from ``reference``."""
    difference = (output - reference).abs().max().item()
    dtype = str(mask.dtype).removeprefix("torch.")
    may, blocked = shown(mask[at[0]]), shown(mask[at[1]])
    table.append((path, argument, dtype, may, blocked, f"{difference:.1e}"))


header = ("path", "argument", "dtype", "may attend", "blocked", "max |diff|")
widths = (22, 18, 8, 11, 8, 9)
# sphinx_gallery_end_ignore

# Out of view: add_row(path, argument, mask, output, reference, at) adds a line to
# `table` from the mask's values at a cell that may attend and one that is blocked
# (`am_at`, `kpm_at`: those cells in torch's two masks); `header`, `widths` lay it out.
with torch.no_grad():
    reference, _ = scaled_dot_product_attention(q, k, v, both)  # (N, H, L, D)
    add_row("ours, function", "mask", both, reference, reference)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=both)
    add_row("F.sdpa", "attn_mask", both, output, reference)
    for blocked_value in (float("-inf"), -1e9, -1e20):
        float_mask = additive(blocked_value)
        output = F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask)
        add_row("F.sdpa", "attn_mask", float_mask, output, reference)

    # Module level: nn.MultiheadAttention takes two masks, both with True = blocked.
    attn_mask = to_torch_attn_mask(causal)  # (L, S)
    key_padding_mask = to_torch_key_padding_mask(padding)  # (N, S)
    reference, _ = ours(x, mask=both)  # (N, L, E)
    output, _ = torch_mha(
        x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask
    )
    add_row("nn.MultiheadAttention", "attn_mask", attn_mask, output, reference, am_at)
    add_row(
        "  (same call)",
        "key_padding_mask",
        key_padding_mask,
        output,
        reference,
        kpm_at,
    )
    # (N, 1, L, S), True = may attend
    back = from_torch_masks(attn_mask, key_padding_mask)
    output, _ = ours(x, mask=back)
    add_row("ours, module", "from_torch_masks()", back, output, reference)

for line in [header, *table]:
    print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)))

# sphinx_gallery_start_ignore
# float32: the paths sum in different orders, so they agree to rounding, not bit for
# bit.
assert all(float(line[-1]) < 1e-6 for line in table)
assert torch.equal(back, both.expand(N, 1, L, S))
# sphinx_gallery_end_ignore

# %%
# Every row agrees with this package to rounding error (the last column). What changes
# is the dtype and the value that lets a key through: ``True`` for this package and for
# ``F.scaled_dot_product_attention``, ``False`` for ``nn.MultiheadAttention``, ``0`` for
# an additive float mask. The same mask in three conventions, cell by cell (colour: what
# the cell means; text: what it holds):

meaning = both[1, 0]  # (L, S) for "a dog ran": True = may attend
stored = [
    ("this package, F.sdpa: bool", meaning),
    ("nn.MultiheadAttention: bool", to_torch_attn_mask(meaning)),
    ("additive float", additive(float("-inf"))[1, 0]),
]
# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt

from attention import mask_legend, plot_mask

fig, axes = plt.subplots(1, 3, figsize=(8, 4.5), layout="constrained")
for ax, (title, values) in zip(axes, stored, strict=True):
    text = [
        ("T" if v else "F") if values.dtype == torch.bool else f"{v:g}"
        for v in values.flatten().tolist()
    ]
    plot_mask(
        meaning,
        x_labels=padded[1],
        y_labels=padded[1],
        ax=ax,
        title=title,
        text=text,
    )
    ax.set_xlabel("key")
    ax.set_ylabel("query")
fig.legend(handles=mask_legend(), loc="outside lower center", ncols=2)
fig.suptitle("One mask, three conventions (colour: meaning, text: the value stored)")
plt.show()
# sphinx_gallery_end_ignore

# %%
# The middle panel holds exactly the opposite values of the left one for the same
# meaning: passing a mask of one convention to a function of the other attends to *only*
# the tokens that should have been blocked, and a row that allowed every key is left
# with none. That is why this package refuses any mask that is not bool, with a message
# that says how to convert:

import textwrap

try:
    scaled_dot_product_attention(q, k, v, additive(float("-inf")))
except TypeError as error:
    print(textwrap.fill(f"TypeError: {error}", 88))
else:
    raise AssertionError("a float mask must be refused")

# %%
# The converter itself reads only ``0`` and ``-inf`` from a float mask, and refuses any
# other value: a finite number such as ``-1e9`` is, strictly, a bias on the scores, not
# a block.
#
# .. literalinclude:: ../../../attention/masks.py
#    :language: python
#    :pyobject: _allowed

try:
    from_torch_masks(additive(-1e9))
except ValueError as error:
    print(textwrap.fill(f"ValueError: {error}", 88))
else:
    raise AssertionError("a -1e9 mask must be refused by the converter")

# %%
# Large finite numbers and half precision
# ---------------------------------------
#
# ``-1e9`` and ``-1e20`` matched ``-inf`` in the table because ``exp(-1e9)`` is 0 in
# float32. In half precision they are a different story: float16's largest magnitude is
# 65504, so both numbers turn into ``-inf`` when a tensor is converted to float16, and
# writing either into float16 scores with ``masked_fill`` is an error. bfloat16 has
# float32's range and keeps them finite.

print(f"exp(-1e9) in float32: {torch.tensor(-1e9).exp().item()}")
for value in (-1e9, -1e20):
    as_half = torch.tensor(value).to(torch.float16).item()
    as_bf16 = torch.tensor(value).to(torch.bfloat16).item()
    print(f"{value:g} -> float16 {as_half}, bfloat16 {as_bf16:.4g}")
print(f"float16's most negative finite number: {torch.finfo(torch.float16).min}")

scores = torch.zeros(L, S, dtype=torch.float16, device=device)  # (L, S)
for value in (-1e9, -1e20):
    try:
        scores.masked_fill(~causal, value)
    except RuntimeError as error:
        print(textwrap.fill(f"masked_fill({value:g}): RuntimeError: {error}", 88))
    # sphinx_gallery_start_ignore
    else:
        raise AssertionError(f"{value:g} does not fit in float16")
    assert torch.tensor(value).to(torch.float16).item() == float("-inf")
    # sphinx_gallery_end_ignore

# %%
# So the same code behaves differently with the dtype. A query whose four keys are all
# blocked with ``-1e9``: in float32 the softmax spreads evenly over the blocked keys; in
# float16 the mask has become ``-inf`` and the softmax is 0/0.

row_scores = torch.zeros(4, device=device)  # one query's scores against 4 keys
for dtype in (torch.float32, torch.float16):
    all_blocked = torch.full((4,), -1e9, device=device).to(dtype)
    print(
        f"{str(dtype):<14}", (row_scores.to(dtype) + all_blocked).softmax(-1).tolist()
    )
# sphinx_gallery_start_ignore
assert (row_scores + torch.full((4,), -1e9, device=device)).softmax(-1).eq(0.25).all()
assert (
    (row_scores.half() + torch.full((4,), -1e9, device=device).half())
    .softmax(-1)
    .isnan()
    .all()
)
# sphinx_gallery_end_ignore

# %%
# .. _blocking-keys:
#
# How this package blocks a key
# -----------------------------
#
# This package's PyTorch code writes neither ``-inf`` nor a constant picked by hand,
# such as ``-1e9``, that fits one dtype and overflows another. It blocks a key in two
# steps. The first is in the function that forms the scores on every path of the
# package that computes softmax attention in PyTorch:
#
# .. literalinclude:: ../../../attention/functional.py
#    :language: python
#    :pyobject: _scores
#
# The second is the line after the softmax in
# :func:`attention.scaled_dot_product_attention` (the whole function is on
# :ref:`sphx_glr_tutorials_1_foundations_02_scaled_dot_product.py`)::
#
#     weights = weights.masked_fill(~mask, 0.0)  # a row with no allowed key: all 0
#
# - Before the softmax, blocked scores are filled with
#   ``torch.finfo(scores.dtype).min``, the most negative finite number of the scores'
#   dtype, which is float32 at least (``_scores`` computes in ``accumulation_dtype``:
#   float16 inputs get float32's, not the float16 one printed above). It is finite in
#   every dtype, so nothing turns into ``-inf``, and it is so far below any real score
#   that once the softmax subtracts the row's maximum its ``exp`` is 0: in a row with
#   at least one allowed key, every blocked key gets a weight of exactly 0.
# - After the softmax, the blocked weights are set to 0 again. That changes nothing in
#   a row with an allowed key. In a row with *none*, the fill made every score equal,
#   the softmax made the row uniform, and the zeroing turns it into weights 0 and
#   output 0 (the next section). ``masked_fill`` sends no gradient back through the
#   positions it overwrote, so such a row gets gradient 0 as well
#   (:ref:`sphx_glr_tutorials_2_building_and_checking_08_checking_gradients.py` checks
#   it).
#
# The same call therefore works in float16:

with torch.no_grad():
    out16, _ = scaled_dot_product_attention(q.half(), k.half(), v.half(), both)
    out32, _ = scaled_dot_product_attention(q, k, v, both)
half_error = (out16.float() - out32).abs().max().item()
print(
    f"float16 vs float32 output: largest difference {half_error:.1e}, any NaN: "
    f"{bool(out16.isnan().any())}"
)
# sphinx_gallery_start_ignore
assert not out16.isnan().any()
# sphinx_gallery_end_ignore
claim("float16 vs float32, largest difference", half_error, below=1e-2)  # ~3 digits
# sphinx_gallery_start_ignore
import inspect  # the line quoted above is the package's

assert "weights = weights.masked_fill(~mask, 0.0)" in inspect.getsource(
    scaled_dot_product_attention
)
# sphinx_gallery_end_ignore

# %%
# .. _empty-rows:
#
# A query with no key left
# ------------------------
#
# Batches are sometimes padded on the *left* (so that the real tokens end together, as
# when generating text). With a causal mask, the first queries of such a sentence can
# then only see padding: their row of the mask is all ``False``. Softmax over nothing is
# 0/0. Here is the batch padded in front, and the mask of "a dog ran":

# padding in front
left = padding_mask(torch.tensor(lengths, device=device), S).flip(-1)
left_both = causal & left  # (N, 1, L, S)
print(left_both[1, 0].int())
empty_rows = ~left_both.any(-1)  # (N, 1, L): queries with no allowed key
print(
    "queries with no key left, sentence 1: "
    f"{empty_rows[1, 0].nonzero().flatten().tolist()}"
)

# %%
# Every path, on the same input: the output and the weights of the first query of
# sentence 1, which has no key left. ``nn.MultiheadAttention`` takes different routes
# depending on its arguments and mode, so three are run: *(weights)* is the default
# ``need_weights=True``; *(no weights)* is ``need_weights=False`` in training mode;
# *(fast path)* is evaluation mode without autograd, with query, key and value the same
# tensor and ``batch_first=True`` (run here with ``need_weights=False``): the fast path
# PyTorch uses for inference. (``nn.MultiheadAttention`` starts its output bias at 0, so
# where attention's output is 0 the module's output is 0 too.)

qe, ke, ve = (t.clone().requires_grad_() for t in (q, k, v))
uniform = v[1].mean(dim=-2)  # (H, D): every value averaged, padding and future included


# sphinx_gallery_start_ignore
def describe(t, mean=None):
    if t is None:
        return "not returned"
    if t.isnan().any():
        return "NaN"
    if (t == 0).all():
        return "0"
    if mean is not None and torch.allclose(t, mean, atol=1e-6):
        return "mean of all values"
    return "other"


# sphinx_gallery_end_ignore


# describe (out of view): "0", "NaN", "mean of all values", "not returned", "other"
am, kpm = to_torch_attn_mask(causal), to_torch_key_padding_mask(left)
rows = []
out, w = scaled_dot_product_attention(qe, ke, ve, left_both)
out.sum().backward()
grads_finite = all(t.grad.isfinite().all() for t in (qe, ke, ve))
rows.append(("ours, function", out[1, :, 0], w[1, :, 0], uniform))
with torch.no_grad():
    out, w = ours(x, mask=left_both)
    rows.append(("ours, module", out[1, 0], w[1, :, 0], None))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=left_both)
    rows.append(("F.sdpa, bool mask", out[1, :, 0], None, uniform))
    blocked_inf = torch.zeros(left_both.shape, device=device).masked_fill(
        ~left_both, -torch.inf
    )
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=blocked_inf)
    rows.append(("F.sdpa, additive -inf", out[1, :, 0], None, uniform))
    blocked_1e9 = torch.zeros(left_both.shape, device=device).masked_fill(
        ~left_both, -1e9
    )
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=blocked_1e9)
    rows.append(("F.sdpa, additive -1e9", out[1, :, 0], None, uniform))
torch_mha.train()  # the modes below depend on it
out, w = torch_mha(x, x, x, attn_mask=am, key_padding_mask=kpm)
rows.append(("nn.MultiheadAttention (weights)", out[1, 0], w[1, 0], None))
out, w = torch_mha(x, x, x, attn_mask=am, key_padding_mask=kpm, need_weights=False)
rows.append(("nn.MultiheadAttention (no weights)", out[1, 0], w, None))
torch_mha.eval()
with torch.no_grad():  # eval mode without autograd: the "fast path"
    out, w = torch_mha(x, x, x, attn_mask=am, key_padding_mask=kpm, need_weights=False)
    rows.append(("nn.MultiheadAttention (fast path)", out[1, 0], w, None))

print(f"computed on {device} with torch {torch.__version__}")
print(f"{'path':<36}{'output':<20}weights")
result = {}
for path, output, weight, mean in rows:
    result[path] = describe(output, mean), describe(weight)
    print(f"{path:<36}{result[path][0]:<20}{result[path][1]}")
print(f"gradients through this package's path are finite: {grads_finite}")

# sphinx_gallery_start_ignore
assert grads_finite and (torch_mha.out_proj.bias == 0).all()
assert result["ours, function"] == ("0", "0")
assert result["ours, module"] == ("0", "0")
assert result["F.sdpa, additive -1e9"][0] == "mean of all values"
assert result["nn.MultiheadAttention (weights)"] == ("NaN", "NaN")
if device.type == "cpu":  # kernel-dependent paths: checked where the page is built
    assert result["F.sdpa, bool mask"][0] == "0"
    assert result["F.sdpa, additive -inf"][0] == "0"
    assert result["nn.MultiheadAttention (no weights)"][0] == "0"
    assert result["nn.MultiheadAttention (fast path)"][0] == "NaN"
# sphinx_gallery_end_ignore

# %%
# This package gives 0 for both the output and the weights, with finite gradients. The
# ``-1e9`` mask gives no NaN but silently attends to *everything*, padding and future
# tokens included: its output is the plain average of all values.
# ``nn.MultiheadAttention`` gives NaN when it returns weights. On the CPU, with the
# torch version printed above the table, its fast path gives NaN too, while
# ``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` without weights
# return 0 (the build checks these four on the CPU only; kernels differ between
# devices, and the table shows the device it ran on).
#
# NaN does not stay where it starts. The rows that came out NaN belong to padding
# positions, which the next layer masks as keys; but a blocked key still has its value
# multiplied by a weight of 0, and ``0 * NaN`` is NaN. One more attention layer on
# ``nn.MultiheadAttention``'s output:

with torch.no_grad():
    torch_out, _ = torch_mha(x, x, x, attn_mask=am, key_padding_mask=kpm)  # (N, L, E)
    next_out, _ = ours(torch_out, mask=left_both)  # padding masked again
nan_before = torch_out.isnan().any(-1)  # (N, L)
nan_after = next_out.isnan().any(-1)  # (N, L)
print(
    f"tokens with NaN after nn.MultiheadAttention: {int(nan_before.sum())} of {N * L}"
)
print(f"tokens with NaN after one more layer:        {int(nan_after.sum())} of {N * L}")
print(
    "of which real (not padding) tokens:          "
    f"{int((nan_after & left[:, 0, 0]).sum())}"
)
# sphinx_gallery_start_ignore
assert nan_after.sum() > nan_before.sum() and (nan_after & left[:, 0, 0]).any()
# sphinx_gallery_end_ignore

# %%
# The NaN has spread from the padding to the real tokens of the same sentences (the
# counts above), and from there it reaches the loss. Zero outputs, as in the first two
# rows of the table, are the behaviour to want.

# %%
# .. _bottom-right-causal:
#
# ``is_causal`` and where the diagonal sits
# -----------------------------------------
#
# ``F.scaled_dot_product_attention`` can build the causal mask itself with
# ``is_causal=True``. With as many queries as keys it is the same mask:

with torch.no_grad():
    ours_causal, _ = scaled_dot_product_attention(q, k, v, causal)
    sdpa_causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
same = (ours_causal - sdpa_causal).abs().max().item()
print(f"L = S: largest difference {same:.1e}")
# sphinx_gallery_start_ignore
assert same < 1e-6
# sphinx_gallery_end_ignore

# %%
# With fewer queries than keys the two disagree. When a model generates text it keeps
# the keys and values of the tokens it has already seen (the *cache*) and computes
# queries only for the new tokens. Say 4 tokens are cached and 2 are new: ``L = 2``
# queries, ``S = 6`` keys. The new tokens are the *last* two positions, so their rows
# are the bottom two rows of the full ``6 x 6`` causal mask: the diagonal is aligned to
# the bottom-right corner. That is what ``causal_mask(2, 6)`` returns: it puts its
# ``L`` queries at the last ``L`` of the ``S`` positions before it applies the rule
# ``k <= q``. ``is_causal=True`` aligns the diagonal to the top-left corner instead, as
# if the two queries were the first two tokens.

from torch.nn.attention.bias import causal_lower_right

L_new, S_all = 2, 6
# (1, H, S, D)
q_all, k_all, v_all = torch.randn(3, 1, H, S_all, D, device=device).unbind(0)
q_new = q_all[..., -L_new:, :]  # the two new tokens  (1, H, L, D)
with torch.no_grad():
    full, _ = scaled_dot_product_attention(
        q_all, k_all, v_all, causal_mask(S_all, device=device)
    )
    # what the new tokens get when the whole sequence runs
    truth = full[..., -L_new:, :]
    bottom_right, _ = scaled_dot_product_attention(
        q_new, k_all, v_all, causal_mask(L_new, S_all, device=device)
    )
    top_left = F.scaled_dot_product_attention(q_new, k_all, v_all, is_causal=True)
    ours_in_sdpa = F.scaled_dot_product_attention(
        q_new, k_all, v_all, attn_mask=causal_mask(L_new, S_all, device=device)
    )
    torch_lower_right = F.scaled_dot_product_attention(
        q_new, k_all, v_all, attn_mask=causal_lower_right(L_new, S_all)
    )
for name, result_ in [
    ("causal_mask(2, 6)", bottom_right),
    ("is_causal=True", top_left),
    ("F.sdpa, attn_mask=causal_mask(2, 6)", ours_in_sdpa),
    ("F.sdpa, causal_lower_right(2, 6)", torch_lower_right),
]:
    print(
        f"{name:<36} vs the full sequence: largest difference "
        f"{(result_ - truth).abs().max().item():.1e}"
    )
# sphinx_gallery_start_ignore
assert torch.allclose(bottom_right, truth, atol=1e-6)
assert torch.allclose(ours_in_sdpa, truth, atol=1e-6)
assert torch.allclose(torch_lower_right, truth, atol=1e-6)
assert not torch.allclose(top_left, truth, atol=1e-2)
# sphinx_gallery_end_ignore

# %%
# The bottom-right mask reproduces the full sequence; ``is_causal=True`` does not.
# ``F.scaled_dot_product_attention`` gets it right in two ways, the last two lines
# printed: pass ``causal_mask(L, S)`` as its ``attn_mask`` (it shares this package's
# polarity), or pass PyTorch's own ``torch.nn.attention.bias.causal_lower_right(L, S)``,
# an object that stands for the bottom-right causal mask without holding it. The three
# masks, drawn:

# sphinx_gallery_start_ignore
tokens_all = [f"t{i}" for i in range(S_all)]
fig, axes = plt.subplots(1, 3, figsize=(8, 4.6), layout="constrained")
plot_mask(
    causal_mask(S_all),
    x_labels=tokens_all,
    y_labels=tokens_all,
    ax=axes[0],
    title="full sequence: causal_mask(6)",
)
axes[0].add_patch(
    plt.Rectangle(
        (-0.5, S_all - L_new - 0.5),
        S_all,
        L_new,
        fill=False,
        lw=3,
        ec="#b3401a",
        zorder=5,
        clip_on=False,
    )
)
# what is_causal=True uses
upper_left = torch.ones(L_new, S_all, dtype=torch.bool).tril()
plot_mask(
    causal_mask(L_new, S_all),
    x_labels=tokens_all,
    y_labels=tokens_all[-L_new:],
    ax=axes[1],
    title="causal_mask(2, 6): bottom-right",
)
plot_mask(
    upper_left,
    x_labels=tokens_all,
    y_labels=tokens_all[-L_new:],
    ax=axes[2],
    title="is_causal=True: top-left",
)
for ax in axes:
    ax.set_xlabel("key (t0-t3 cached, t4-t5 new)")
    ax.set_ylabel("query")
fig.legend(handles=mask_legend(), loc="outside lower center", ncols=2)
fig.suptitle("Two new tokens attending to six keys: which causal mask is right")
plt.show()

with torch.no_grad():
    check, _ = scaled_dot_product_attention(q_new, k_all, v_all, upper_left.to(device))
# the right panel is what is_causal=True did
assert torch.allclose(check, top_left, atol=1e-6)
assert torch.equal(causal_mask(L_new, S_all), causal_mask(S_all)[-L_new:])
# sphinx_gallery_end_ignore

# %%
# The rows boxed in red on the left are what the two new tokens must see. The middle
# panel is those rows; the right panel lets ``t4`` see only ``t0`` and hides the rest of
# the cache. (Decoding one token at a time, ``L = 1``, the new token may see every key,
# and no mask is needed at all.) The two bottom-right forms give the same numbers; what
# each costs in time depends on the kernel PyTorch picks for it, which
# :ref:`sphx_glr_tutorials_5_scale_17_performance.py` discusses (it times the flag
# against the tensor at L = S).
#
# What to remember
# ----------------
#
# - ``F.scaled_dot_product_attention`` shares this package's polarity (``True`` = may
#   attend); ``nn.MultiheadAttention`` uses the opposite (``True`` = blocked) for
#   ``attn_mask`` and ``key_padding_mask``. Convert with
#   :func:`attention.masks.to_torch_attn_mask`,
#   :func:`attention.masks.to_torch_key_padding_mask` and
#   :func:`attention.masks.from_torch_masks`, never by hand.
# - Additive masks block with ``-inf``. ``-1e9`` and ``-1e20`` work in float32, where a
#   row with no allowed key then averages every value; in float16 they overflow to
#   ``-inf`` when converted (``masked_fill`` refuses them), and the same row becomes NaN
#   in the softmax.
# - This package fills blocked scores with ``torch.finfo(dtype).min`` and zeroes the
#   blocked weights after the softmax: finite in every dtype, and a query with no key
#   left gets output 0 and weights 0.
# - The same query gives NaN on some of PyTorch's paths, and NaN spreads to the real
#   tokens in the next layer.
# - ``is_causal=True`` aligns the diagonal top-left; with a cache (``L < S``) you need
#   the bottom-right alignment: ``causal_mask(L, S)`` as an ``attn_mask``, or PyTorch's
#   ``causal_lower_right(L, S)``.
#
# API used on this page: :func:`attention.causal_mask`, :func:`attention.padding_mask`,
# :func:`attention.scaled_dot_product_attention`, :class:`attention.MultiHeadAttention`,
# :meth:`attention.MultiHeadAttention.from_torch`, :func:`attention.plot_mask` and the
# module :mod:`attention.masks`.
#
# Exercises
# ---------
#
# 1. **A key padding mask by hand.** ``nn.MultiheadAttention``'s ``key_padding_mask`` is
#    ``(N, S)`` and ``True`` at padding. Build it from ``lengths`` with
#    ``torch.arange`` alone, and check it against
#    :func:`attention.masks.to_torch_key_padding_mask`.
# 2. **-1e9 in bfloat16.** bfloat16 has float32's range. Predict the weights of a
#    query whose four keys are all blocked by adding ``-1e9`` in bfloat16, then check.
# 3. **Count the empty rows.** In the batch padded on the left, a sentence of ``n`` real
#    tokens has how many queries with no key left? Derive it, and check it against
#    ``empty_rows``.
# 4. **Which rows does each causal mask keep?** For 3 new queries and 7 keys, which rows
#    of ``causal_mask(7)`` are ``causal_mask(3, 7)``, and which are the mask that
#    ``is_causal=True`` uses? Check both, and check the second against
#    ``F.scaled_dot_product_attention`` in float64.

# %%
# .. solution 1
#
# A key is padding when its position is at least the sentence's length.

by_hand = (
    torch.arange(S, device=device) >= torch.tensor(lengths, device=device)[:, None]
)
print(by_hand.int())  # (N, S): True = blocked
assert torch.equal(by_hand, to_torch_key_padding_mask(padding))

# %%
# .. solution 2
#
# ``-1e9`` stays finite in bfloat16, so the four scores are equal and the softmax is
# uniform: 0.25 each, attention to keys that were all meant to be blocked.

blocked_bf16 = torch.full((4,), -1e9, device=device).to(torch.bfloat16)
weights_bf16 = (row_scores.to(torch.bfloat16) + blocked_bf16).softmax(-1)
print(
    f"-1e9 in bfloat16: {blocked_bf16[0].item():.4g}; weights {weights_bf16.tolist()}"
)
assert blocked_bf16.isfinite().all() and weights_bf16.eq(0.25).all()

# %%
# .. solution 3
#
# The ``S - n`` padding tokens come first, and query ``i`` sees keys ``0..i``: the first
# ``S - n`` queries see only padding.

derived = [S - n for n in lengths]
counted = empty_rows[:, 0].sum(-1).tolist()  # (N,)
print(f"queries with no key left per sentence: {counted}; derived: {derived}")
assert counted == derived

# %%
# .. solution 4
#
# ``causal_mask(3, 7)`` is the *last* three rows of ``causal_mask(7)``; ``is_causal``
# uses the *first* three.

tall = causal_mask(7)  # (S, S)
first_rows = torch.ones(3, 7, dtype=torch.bool).tril()  # (L, S), top-left
assert torch.equal(causal_mask(3, 7), tall[-3:]) and torch.equal(first_rows, tall[:3])
q3 = torch.randn(1, 1, 3, 4, dtype=torch.float64)  # (N, H, L, D)
k7, v7 = torch.randn(2, 1, 1, 7, 4, dtype=torch.float64).unbind(0)  # (N, H, S, D)
with torch.no_grad():
    via_flag = F.scaled_dot_product_attention(q3, k7, v7, is_causal=True)
    via_rows, _ = scaled_dot_product_attention(q3, k7, v7, first_rows)
print(f"is_causal vs the first rows: {(via_flag - via_rows).abs().max().item():.1e}")
assert torch.allclose(via_flag, via_rows, atol=1e-12)

# %%
# Next: :ref:`sphx_glr_tutorials_2_building_and_checking_07_transformer_block.py` puts
# attention into a Transformer block.

# sphinx_gallery_thumbnail_number = 1
