"""
Checking gradients
==================

.. prerequisites:: 05_masks 07_transformer_block
   :summary: gradcheck and gradgradcheck on the package, why they need float64, and the
      gradient through a query that may attend to nothing.

Autograd writes the backward pass for us, but it only differentiates what the forward
pass does: a mask that lets a gradient leak to a key it should hide, or a NaN that
appears only in the backward pass, raises no error. This page checks the package's
gradients numerically with ``torch.autograd.gradcheck`` and ``gradgradcheck``, shows why
those checks need float64, follows the gradient through a query that may attend to
nothing, compares the ways of blocking a score, and ends with the gradient norm of every
parameter of a Transformer block, and what weight decay does to one whose gradient is 0.

Masks are bool, ``True`` = may attend, as in
:ref:`sphx_glr_tutorials_1_foundations_05_masks.py`.
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
# What gradcheck compares
# -----------------------
#
# ``torch.autograd.gradcheck(fn, inputs)`` computes every entry of the Jacobian of
# ``fn`` twice. Once *numerically*, by nudging one input element at a time by ``eps`` in
# both directions:
#
# .. math::
#     \frac{\partial f_i}{\partial x_j} \approx
#     \frac{f_i(x + \epsilon e_j) - f_i(x - \epsilon e_j)}{2 \epsilon},
#
# and once *analytically*, with autograd's backward pass. It passes when every pair
# agrees as ``torch.allclose(analytical, numerical, rtol, atol)`` says:
#
# .. math::
#     |\text{analytical} - \text{numerical}| \le \text{atol}
#     + \text{rtol} \cdot |\text{numerical}|
#
# for every entry; the defaults are ``eps=1e-6``, ``atol=1e-5`` and ``rtol=1e-3``.
# Every input with ``requires_grad=True`` is checked, against every output.
#
# Here it is on :func:`attention.scaled_dot_product_attention` in float64, with 3
# queries, 5 keys, values of a different size than the keys (``Dv = 2``, ``D = 4``), a
# causal mask, and a scale that is not the default. The function returns two tensors,
# the output and the weights: both are checked.

from torch.autograd import gradcheck, gradgradcheck

from attention import causal_mask, scaled_dot_product_attention

f64 = {"dtype": torch.float64, "device": device}
q = torch.randn(2, 3, 4, **f64, requires_grad=True)  # (N, L, D)
k = torch.randn(2, 5, 4, **f64, requires_grad=True)  # (N, S, D)
v = torch.randn(2, 5, 2, **f64, requires_grad=True)  # (N, S, Dv)
mask = causal_mask(3, 5, device=device)  # (L, S), bottom-right aligned


def attend(q, k, v):
    return scaled_dot_product_attention(q, k, v, mask, scale=0.7)


print(f"gradcheck(scaled_dot_product_attention): {gradcheck(attend, (q, k, v))}")

# %%
# Checking a module's parameters
# ------------------------------
#
# ``gradcheck`` perturbs its *inputs*; a module's weights are not inputs.
# ``torch.func``'s ``functional_call`` runs a module with parameter tensors that we pass
# in, so the parameters can become inputs too. Here is a small
# :class:`attention.MultiHeadAttention` (``E = 4``, ``H = 2``) doing cross-attention
# from 3 queries to 5 keys with the causal mask: gradcheck compares the derivatives of
# both outputs with respect to the query, the keys and values, and all eight parameter
# tensors.

from torch.func import functional_call

from attention import MultiHeadAttention

mha = MultiHeadAttention(4, 2, **f64)
names = [name for name, _ in mha.named_parameters()]
params = tuple(p.detach().clone().requires_grad_() for p in mha.parameters())
query = torch.randn(1, 3, 4, **f64, requires_grad=True)  # (N, L, E)
memory = torch.randn(1, 5, 4, **f64, requires_grad=True)  # (N, S, E): keys and values


def mha_with(query, memory, *params):
    """The module as a function of its inputs *and* its parameters."""
    return functional_call(
        mha, dict(zip(names, params, strict=True)), (query, memory), {"mask": mask}
    )


inputs = (query, memory, *params)
n_in = sum(t.numel() for t in inputs)
n_out = sum(t.numel() for t in mha_with(*inputs))
print(f"{len(inputs)} input tensors, {n_in} numbers in, {n_out} numbers out")
print(f"Jacobian entries compared: {n_in * n_out}")
print(
    f"gradcheck(MultiHeadAttention, parameters included): {gradcheck(mha_with, inputs)}"
)

# %%
# Second derivatives
# ------------------
#
# Some uses differentiate a gradient again: a penalty on the gradient's norm,
# Hessian-vector products, meta-learning. ``gradgradcheck`` checks that second backward
# pass the same way, by finite differences of the first one:

print(f"gradgradcheck(MultiHeadAttention): {gradgradcheck(mha_with, inputs)}")

# %%
# The full Jacobian grows with the product of the input and output sizes. For a bigger
# module, ``fast_mode=True`` checks one random projection :math:`v^\top J u` per input
# and output instead, which costs a few passes per input tensor whatever its size. A
# :class:`attention.TransformerBlock` has dropout, so it is checked in evaluation mode:
# in training mode every call draws new dropout masks, and the finite differences
# measure the change of the masks, not of the input (the last check below, in training
# mode, is the full check with respect to the input alone, and it fails).

from attention import TransformerBlock

block = TransformerBlock(8, 2, ffn_dim=16, **f64)
block_names = [name for name, _ in block.named_parameters()]
block_params = tuple(p.detach().clone().requires_grad_() for p in block.parameters())
x = torch.randn(2, 3, 8, **f64, requires_grad=True)  # (N, L, E)
mask3 = causal_mask(3, device=device)  # (L, L)


def block_with(x, *params):
    return functional_call(
        block, dict(zip(block_names, params, strict=True)), (x, mask3)
    )[0]


block_inputs = (x, *block_params)
n_block = sum(t.numel() for t in block_params)
checks = {}
block.eval()
checks["eval, gradcheck"] = gradcheck(block_with, block_inputs, fast_mode=True)
checks["eval, gradgradcheck"] = gradgradcheck(block_with, block_inputs, fast_mode=True)
block.train()
checks["train, gradcheck"] = gradcheck(
    lambda x: block(x, mask3)[0], (x,), raise_exception=False
)
print(f"TransformerBlock(8, 2, ffn_dim=16): {n_block} parameters")
for what, passed in checks.items():
    print(f"  {what:20s} {passed}")
# sphinx_gallery_start_ignore
assert checks == {
    "eval, gradcheck": True,
    "eval, gradgradcheck": True,
    "train, gradcheck": False,
}
# sphinx_gallery_end_ignore

# %%
# Why float64
# -----------
#
# Every check above ran in float64. The same module in float32 fails, and gradcheck
# warns about it before it even starts (the warning is caught and printed here):

import warnings

mha32 = MultiHeadAttention(4, 2, device=device)
x32 = torch.randn(1, 3, 4, device=device, requires_grad=True)  # (N, L, E)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    passed32 = gradcheck(lambda x: mha32(x)[0], (x32,), raise_exception=False)
print(f"gradcheck in float32: {passed32}")
for warning in caught:
    print(f"warning: {str(warning.message).strip()}")
# sphinx_gallery_start_ignore
assert not passed32 and caught
# sphinx_gallery_end_ignore

# %%
# Nothing is wrong with the backward pass; the numerical side is. With a step of
# ``eps = 1e-6``, :math:`f(x + \epsilon) - f(x - \epsilon)` is a difference of two
# nearly equal numbers, and float32 stores each with a relative error of about ``1e-7``
# (``torch.finfo(torch.float32).eps``). Dividing by :math:`2\epsilon` magnifies that
# rounding error to about :math:`10^{-7} / 10^{-6} = 0.1`. Measure it: the same weights
# in both dtypes, the Jacobian of the output with respect to the input by autograd, and
# by central differences done by hand (each perturbed input is one row of a batch, so
# one call computes every column).


def analytical_jacobian(module, x):
    """d module(x)[0] / dx by autograd, as an (outputs, inputs) matrix."""
    jacobian = torch.autograd.functional.jacobian(lambda t: module(t)[0], x)
    return jacobian.reshape(x.numel(), x.numel())  # (outputs, inputs)


def numerical_jacobian(module, x, eps):
    """The same matrix by central differences with a step ``eps``."""
    # one row per input
    steps = eps * torch.eye(x.numel(), dtype=x.dtype, device=x.device)
    steps = steps.view(-1, *x.shape[1:])  # (inputs, L, E): each row a nudged copy of x
    with torch.no_grad():
        up, down = module(x + steps)[0], module(x - steps)[0]  # (inputs, L, E)
    return ((up - down) / (2 * eps)).reshape(x.numel(), -1).T  # (outputs, inputs)


mha64 = MultiHeadAttention(4, 2, **f64)
mha64.load_state_dict(mha32.state_dict())
cases = {"float32": (mha32, x32.detach()), "float64": (mha64, x32.detach().double())}
exact = {
    name: analytical_jacobian(module, x_in) for name, (module, x_in) in cases.items()
}
for name, (module, x_in) in cases.items():
    analytical = exact[name]
    numerical = numerical_jacobian(module, x_in, 1e-6)
    error = (numerical - analytical).abs()
    allowed = 1e-5 + 1e-3 * numerical.abs()  # gradcheck's atol + rtol * |numerical|
    print(
        f"{name}: largest |numerical - analytical| = {error.max().item():.1e}, "
        f"entries over gradcheck's tolerance: {int((error > allowed).sum())} of "
        f"{error.numel()}"
    )
    if name == "float32":
        error32 = error.max().item()
    else:
        error64 = error.max().item()
claim("float32 error at eps = 1e-6", error32, above=1e-3)
claim("float64 error at eps = 1e-6", error64, below=1e-8)

# %%
# A smaller error in float32 would need a larger step, but a larger step brings the
# other error of finite differences: the slope of the straight line through
# :math:`f(x - \epsilon)` and :math:`f(x + \epsilon)` is not the slope at :math:`x`.
# The curvature cancels between the two sides; what is left, about
# :math:`\epsilon^2 f'''(x) / 6`, grows like :math:`\epsilon^2`. Sweeping the step shows
# the two errors meet at a floor:

steps = torch.logspace(-12, -1, 34).tolist()
sweep = {"float32": [], "float64": []}
for eps in steps:
    for name, (module, x_in) in cases.items():
        numerical = numerical_jacobian(module, x_in, eps)
        sweep[name].append((numerical - exact[name]).abs().max().item())
floor32, floor64 = min(sweep["float32"]), min(sweep["float64"])
best32 = steps[sweep["float32"].index(floor32)]
best64 = steps[sweep["float64"].index(floor64)]
print(f"float32: smallest error {floor32:.1e}, at a step of {best32:.0e}")
print(f"float64: smallest error {floor64:.1e}, at a step of {best64:.0e}")
# sphinx_gallery_start_ignore
claim("float32: best step", best32, above=1e-3)
claim("float32: smallest error", floor32, below=1e-5)
claim("float32 / float64 smallest error", floor32 / floor64, above=1e4)
# x + 1e-10 == x in float32
assert (numerical_jacobian(mha32, x32.detach(), 1e-10) == 0).all()
# sphinx_gallery_end_ignore

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
for name, marker in [("float32", "o"), ("float64", "s")]:
    ax.loglog(steps, sweep[name], marker=marker, markersize=3, label=name)
ax.axvline(1e-6, color="grey", ls=":", label="gradcheck's eps = 1e-6")
ax.axhline(1e-5, color="grey", ls="--", label="gradcheck's atol = 1e-5")
ax.set_xlabel("finite-difference step eps")
ax.set_ylabel("largest |numerical - analytical|")
ax.set_title("MultiHeadAttention: central differences against autograd")
ax.legend()
plt.show()
# sphinx_gallery_end_ignore

# %%
# Left of each valley, rounding dominates and the error grows as the step shrinks; at
# the far left of the float32 curve the step is too small to change :math:`x` at all,
# the numerical derivative is 0 and the error is the size of the derivative itself.
# Right of each valley, the :math:`\epsilon^2` term dominates. gradcheck's step sits
# deep in float32's rounding slope. Float32 only gets under the tolerance near the
# bottom of its valley, at a step more than a thousand times larger (printed above),
# where the result depends on this particular function's third derivatives; even there
# its error is several orders of magnitude above float64's. In float64 the default step
# has room to spare, so gradients are checked in float64, which every module of the
# package accepts through ``dtype=torch.float64``.
#
# A query that may attend to nothing
# ----------------------------------
#
# :ref:`empty-rows` showed the forward side: a query row whose mask is all ``False``
# gives output 0 and weights 0 here. Now the backward side. Three
# queries, four keys; query 2 may attend to nothing, and no query may attend to key 3
# (as if it were padding). The loss is the sum of the outputs.

L, S, D = 3, 4, 2
row_mask = torch.tensor(
    [[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.bool, device=device
)  # (L, S)
q0, k0, v0 = (torch.randn(n, D, **f64) for n in (L, S, S))  # (L, D), (S, D), (S, D)
qg, kg, vg = (t.clone().requires_grad_() for t in (q0, k0, v0))
out, weights = scaled_dot_product_attention(qg, kg, vg, row_mask)  # (L, D), (L, S)
out.sum().backward()
print(f"output of query 2: {out[2].tolist()}; its weights: {weights[2].tolist()}")
for name, t in [("query", qg), ("key", kg), ("value", vg)]:
    norms = [f"{g:.3f}" for g in t.grad.norm(dim=-1).tolist()]
    print(f"gradient norm of each {name:5s}: {norms}")
# sphinx_gallery_start_ignore
assert (out[2] == 0).all() and (weights[2] == 0).all()
assert all(t.grad.isfinite().all() for t in (qg, kg, vg))
assert (qg.grad[2] == 0).all() and (kg.grad[3] == 0).all() and (vg.grad[3] == 0).all()
assert (qg.grad[:2] != 0).all() and (vg.grad[:3] != 0).all()
# sphinx_gallery_end_ignore

# %%
# Every gradient is finite. Query 2 gets gradient 0 (its output is 0 whatever it is),
# and key 3 and value 3 get gradient 0 (nobody reads them); every other input gets a
# nonzero gradient. ``gradcheck`` agrees with these derivatives, empty row included:


def masked_attention(q, k, v):
    return scaled_dot_product_attention(q, k, v, row_mask)


print(f"gradcheck with an empty row: {gradcheck(masked_attention, (qg, kg, vg))}")

# %%
# Blocking with -inf or with a large negative number
# --------------------------------------------------
#
# The package fills blocked scores with ``torch.finfo(dtype).min`` and zeroes the
# blocked weights after the softmax (:ref:`blocking-keys`). To see what each line
# does to the gradients, take the usual alternatives: fill with ``-inf`` (with
# ``masked_fill``, or by adding a float mask of 0 and ``-inf`` to the scores, as
# ``nn.MultiheadAttention``'s float masks do), or fill with a large finite number
# (``-1e9``); then softmax, without zeroing afterwards.


def plain_softmax(block_scores):
    """Attention that blocks scores with ``block_scores`` and stops there."""

    def attend(q, k, v):
        scores = q @ k.transpose(-2, -1) / D**0.5  # (L, D) @ (D, S) -> (L, S)
        weights = block_scores(scores).softmax(dim=-1)  # (L, S)
        return weights @ v, weights  # (L, S) @ (S, D) -> (L, D)

    return attend


# (L, S): 0 or -inf
additive = torch.zeros(L, S, **f64).masked_fill(~row_mask, float("-inf"))
strategies = {
    "masked_fill -inf": plain_softmax(
        lambda s: s.masked_fill(~row_mask, float("-inf"))
    ),
    "add -inf mask": plain_softmax(lambda s: s + additive),
    "masked_fill -1e9": plain_softmax(lambda s: s.masked_fill(~row_mask, -1e9)),
    "this package": lambda q, k, v: scaled_dot_product_attention(q, k, v, row_mask),
}
results = {}
for name, fn in strategies.items():
    qs, ks, vs = (t.clone().requires_grad_() for t in (q0, k0, v0))
    out_s, weights_s = fn(qs, ks, vs)
    out_s.sum().backward()
    results[name] = (weights_s.detach(), qs.grad, ks.grad, vs.grad)

print(
    f"{'':17s} {'weights of query 2':25s} {'NaN in grad of q, k, v':>23s} "
    f"{'|grad| of v3':>13s}"
)
for name, (w_s, gq, gk, gv) in results.items():
    row = "[" + ", ".join(f"{w:.2f}" for w in w_s[2].tolist()) + "]"
    nans = ", ".join(f"{int(g.isnan().sum())}/{g.numel()}" for g in (gq, gk, gv))
    print(f"{name:17s} {row:25s} {nans:>23s} {gv[3].norm().item():13.3f}")

# sphinx_gallery_start_ignore
fill_w, fill_gq, fill_gk, fill_gv = results["masked_fill -inf"]
add_w, add_gq, add_gk, add_gv = results["add -inf mask"]
big_w, _, _, big_gv = results["masked_fill -1e9"]
ours_w, *ours_grads = results["this package"]
assert fill_w[2].isnan().all() and not fill_w[:2].isnan().any()
assert fill_gv.isnan().all() and fill_gq.isfinite().all() and fill_gk.isfinite().all()
assert add_gv.isnan().all() and add_gq[2].isnan().all() and add_gk.isnan().all()
assert torch.allclose(big_w[2], torch.full((S,), 1 / S, **f64)) and big_gv[3].norm() > 0
assert (ours_w[2] == 0).all() and (ours_grads[2][3] == 0).all()
assert all(g.isfinite().all() for g in ours_grads)
# sphinx_gallery_end_ignore

# %%
# - With ``-inf`` the empty row is :math:`e^{-\infty} / \sum e^{-\infty} = 0 / 0`: NaN
#   weights and a NaN output. In the backward pass the NaN weights multiply the output
#   gradient to make the gradient of *every* value, so all of them are NaN, including
#   the values that queries 0 and 1 were entitled to read. ``masked_fill`` at least
#   sends no gradient back to the scores it overwrote, so the query and key gradients
#   stay finite; the additive mask passes the NaN on to query 2 and to every key as
#   well. Either way, one empty row spoils the whole update.
# - With ``-1e9`` the empty row has all scores equal, so the softmax makes it uniform:
#   query 2 reads the average of every value, and value 3, which no query may see,
#   receives a gradient (the norm printed above). Nothing crashes; the model quietly
#   learns from padding.
# - The package's fill also gives a uniform row, but the zeroing after the softmax sets
#   it to 0, and ``masked_fill`` sends no gradient back through the positions it
#   overwrote: output 0, gradient 0 for everything that row could have touched, and
#   finite gradients elsewhere.
#
# The weights of query 2, drawn:

# sphinx_gallery_start_ignore
import numpy as np

shown_strategies = ["masked_fill -inf", "masked_fill -1e9", "this package"]
fig, axes = plt.subplots(1, 3, figsize=(8, 3.0), layout="constrained")
for ax, name in zip(axes, shown_strategies, strict=True):
    w_s = results[name][0]
    shown = w_s.cpu().numpy()
    cmap = plt.get_cmap("viridis").with_extremes(bad="lightgrey")  # NaN cells in grey
    image = ax.imshow(np.ma.masked_invalid(shown), vmin=0, vmax=1, cmap=cmap)
    for i in range(L):
        for j in range(S):
            value = shown[i, j]
            text = "NaN" if np.isnan(value) else f"{value:.2f}"
            colour = "black" if np.isnan(value) or value > 0.6 else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=9, color=colour)
    ax.set_title(name)
    ax.set_xticks(range(S), [f"key {j}" for j in range(S)], rotation=45, ha="right")
    ax.set_yticks(range(L), [f"query {i}" for i in range(L)])
    ax.set_xlabel("key")
fig.colorbar(image, ax=axes, shrink=0.55, label="attention weight")
fig.suptitle("Attention weights when query 2 may attend to nothing (key 3: nobody may)")
plt.show()
# sphinx_gallery_end_ignore

# %%
# Rows 0 and 1 are the same in the three panels; only the empty row differs: NaN (grey),
# uniform, or 0.
#
# The gradient of every parameter
# -------------------------------
#
# After a backward pass, every parameter should have a finite gradient, and a gradient
# norm that is exactly 0, or far smaller than the others, is worth an explanation: it is
# how a parameter that the loss does not reach shows up. Here is one backward pass
# through a :class:`attention.TransformerBlock` in training mode (dropout on), on a
# batch of 4 sequences of 6 tokens with a causal and a padding mask, against a random
# target:

import torch.nn.functional as F

from attention import padding_mask

torch.manual_seed(seed)
block = TransformerBlock(32, 4, ffn_dim=64, device=device).train()
tokens = torch.randn(4, 6, 32, device=device)  # (N, L, E)
lengths = torch.tensor([6, 5, 3, 2], device=device)
block_mask = causal_mask(6, device=device) & padding_mask(lengths, 6)  # (N, 1, L, L)
target = torch.randn(4, 6, 32, device=device)
torch.manual_seed(seed + 1)  # fixes the dropout masks of this forward pass
out, _ = block(tokens, block_mask)
F.mse_loss(out, target).backward()

grad_norms = {name: p.grad.norm().item() for name, p in block.named_parameters()}
print(f"{'parameter':26s} {'shape':10s} {'grad norm':>10s}")
for name, p in block.named_parameters():
    print(f"{name:26s} {str(tuple(p.shape)):10s} {grad_norms[name]:10.2e}")
# sphinx_gallery_start_ignore
assert all(p.grad is not None and p.grad.isfinite().all() for p in block.parameters())
# sphinx_gallery_end_ignore

# %%
# One entry stands out: ``self_attn.k_proj.bias``, many orders of magnitude below the
# rest. It is not a bug. The key bias adds :math:`q \cdot b` to the score of query
# :math:`q` with *every* key, the same amount along the row, and a softmax does not
# change when the same number is added to all its inputs. The loss does not depend on
# the key bias, so its true gradient is 0; what is printed is float32 rounding. In
# float64 it shrinks with the precision:

k_bias_32 = grad_norms["self_attn.k_proj.bias"]
others = [g for name, g in grad_norms.items() if name != "self_attn.k_proj.bias"]
block64 = TransformerBlock(32, 4, ffn_dim=64, **f64).train()
block64.load_state_dict(block.state_dict())
torch.manual_seed(seed + 1)  # the same dropout masks as the float32 pass
out64, _ = block64(tokens.double(), block_mask)
# sphinx_gallery_start_ignore
assert torch.allclose(out.double(), out64, atol=1e-4)  # same masks: the same outputs
# sphinx_gallery_end_ignore
F.mse_loss(out64, target.double()).backward()
k_bias_64 = block64.self_attn.k_proj.bias.grad.norm().item()
print(f"key-bias gradient norm: float32 {k_bias_32:.1e}, float64 {k_bias_64:.1e}")
print(f"smallest other gradient norm (float32): {min(others):.1e}")
print(f"largest other / smallest other: {max(others) / min(others):.0f}")
# sphinx_gallery_start_ignore
claim(
    "key-bias gradient / smallest other (float32)", k_bias_32 / min(others), below=1e-5
)
claim("key-bias gradient, float64 / float32", k_bias_64 / k_bias_32, below=1e-6)
# sphinx_gallery_end_ignore

# sphinx_gallery_start_ignore
fig, ax = plt.subplots(figsize=(7.5, 5.4), layout="constrained")
labels = list(grad_norms)
colours = [
    "tab:red" if name == "self_attn.k_proj.bias" else "tab:blue" for name in labels
]
ax.barh(labels, list(grad_norms.values()), color=colours)
ax.set_xscale("log")
ax.invert_yaxis()
ax.set_xlabel("gradient norm after one backward pass (log scale)")
ax.set_title("TransformerBlock(32, 4): gradient norm of every parameter")
ax.tick_params(axis="y", labelsize=9)
plt.show()
# sphinx_gallery_end_ignore

# %%
# The other bars lie close together: the largest over the smallest is the ratio printed
# above (under 100 in the 30 runs that set this page's checks and in 57 of 60 runs on
# seeds they never saw; 118 in the other three, seed 716805 on each of the three CPU
# kernels); the key bias (red), more than five orders below the smallest of them, is
# rounding noise.
#
# A gradient of 0 does not freeze a parameter
# -------------------------------------------
#
# The loss never moves the key bias. Does it keep the values it started with? Not under
# the optimiser Transformers are usually trained with, AdamW (the one of
# :mod:`attention.training`): besides following the gradient, it applies *weight decay*,
# multiplying every parameter by :math:`1 - \text{lr} \cdot \text{weight\_decay}` at
# every step, and for the key bias no gradient pushes back. The float64 block above
# (whose key-bias gradient is rounding noise far below float32's), trained on the same
# batch for 100 steps, with and without weight decay:

import copy

from attention.repro import num_threads

steps, lr = 100, 1e-2
shrunk = {}
for weight_decay in (0.0, 0.1):
    trained = copy.deepcopy(block64)  # float64, in training mode
    before = trained.self_attn.k_proj.bias.detach().clone()  # (E,)
    optimizer = torch.optim.AdamW(
        trained.parameters(), lr=lr, weight_decay=weight_decay
    )
    # the same dropout masks in both runs, and the page's random numbers left untouched
    with torch.random.fork_rng(), num_threads(1):
        torch.manual_seed(seed + 2)
        for _ in range(steps):
            out_t, _ = trained(tokens.double(), block_mask)
            optimizer.zero_grad()
            F.mse_loss(out_t, target.double()).backward()
            optimizer.step()
    after = trained.self_attn.k_proj.bias.detach()  # (E,)
    shrunk[weight_decay] = (after.norm() / before.norm()).item()
    print(
        f"weight_decay={weight_decay}: |key bias| after {steps} steps / before = "
        f"{shrunk[weight_decay]:.6f}"
    )
predicted = (1 - lr * 0.1) ** steps
label = f"predicted: (1 - lr * weight_decay) ** {steps} ="
print(f"{label:<55} {predicted:.6f}")
# sphinx_gallery_start_ignore
claim("no weight decay: |key bias ratio - 1|", abs(shrunk[0.0] - 1), below=1e-6)
claim(
    "weight decay: |key bias ratio - predicted|",
    abs(shrunk[0.1] - predicted),
    below=1e-6,
)
# sphinx_gallery_end_ignore

# %%
# Without weight decay the key bias stays where it started; with it, the key bias
# shrinks by the factor that the decay alone predicts, to the six digits printed:
# nothing else acts on it, and it keeps shrinking for as long as training runs. That
# costs nothing here, since the key bias cannot change the output, and it is one reason
# some models leave it out.
#
# What to remember
# ----------------
#
# - ``gradcheck`` compares autograd's Jacobian with central differences;
#   ``gradgradcheck`` does the same for the second derivative. Make parameters inputs
#   with ``torch.func.functional_call``, and use ``fast_mode=True`` when the Jacobian is
#   big.
# - Check in float64: at gradcheck's default step, float32 rounding in the finite
#   differences is far larger than its tolerance; float32 gets under it only in a narrow
#   range of much larger steps, which depends on the function's third derivatives (the
#   sweep above).
# - Check deterministic functions: evaluation mode, or no dropout.
# - A query that may attend to nothing gets output 0 and gradient 0 for itself, sends no
#   gradient to any key or value, and everything else keeps finite gradients.
# - ``-inf`` turns an empty row into NaN, and the NaN reaches the gradient of every
#   value; a large finite fill makes the row uniform and sends gradient to a value
#   that no query may read (value 3 in the table); the package fills with
#   ``finfo.min`` and zeroes the blocked weights afterwards.
# - Print the gradient norm of every parameter after a backward pass: a norm of (nearly)
#   0 needs a reason, like the key bias, whose effect the softmax cancels. A parameter
#   with gradient 0 is still shrunk by weight decay.
#
# API used on this page: :func:`attention.scaled_dot_product_attention`,
# :func:`attention.causal_mask`, :func:`attention.padding_mask`,
# :class:`attention.MultiHeadAttention` and :class:`attention.TransformerBlock`.

# %%
# Exercises
# ---------
#
# 1. **Size the Jacobian by hand.** For the check of ``MultiHeadAttention(4, 2)`` with
#    its parameters (3 queries, 5 keys), count the numbers that go in and come out
#    without running anything, and compare with the counts printed in that section.
# 2. **Move the key bias.** In float64, add a random vector to the key bias of
#    ``mha64`` and run it again on the same input. What happens to the outputs and the
#    weights? Do the same with the query bias.
# 3. **Zeroing after a -inf fill.** Add the package's second line, zeroing the blocked
#    weights after the softmax, to the two ``-inf`` strategies (``masked_fill`` and the
#    additive mask). Which of the two then has finite gradients everywhere, equal to
#    the package's? Why not the other?

# %%
# .. solution 1
#
# In: the query :math:`3 \times 4`, the keys and values :math:`5 \times 4`, four
# :math:`4 \times 4` weights and four biases of 4. Out: the output :math:`3 \times 4`
# and the weights, :math:`2` heads :math:`\times 3 \times 5`.

numbers_in = 3 * 4 + 5 * 4 + 4 * (4 * 4 + 4)
numbers_out = 3 * 4 + 2 * 3 * 5
print(
    f"by hand: {numbers_in} in, {numbers_out} out, "
    f"{numbers_in * numbers_out} Jacobian entries"
)
# sphinx_gallery_start_ignore
assert (numbers_in, numbers_out) == (n_in, n_out)
# sphinx_gallery_end_ignore

# %%
# .. solution 2
#
# The key bias adds the same :math:`q \cdot b` to every score of a row, which the
# softmax cancels: the outputs and weights stay the same to float64 rounding. The query
# bias adds :math:`b \cdot k_j`, different for every key: the weights change.

x64 = x32.detach().double()  # (N, L, E)
with torch.no_grad():
    out_before, weights_before = mha64(x64)
    original = {name: p.clone() for name, p in mha64.named_parameters()}
    moved_by = {}
    for bias in (mha64.k_proj.bias, mha64.q_proj.bias):
        bias.add_(torch.randn_like(bias))
        out_after, weights_after = mha64(x64)
        moved_by[bias is mha64.k_proj.bias] = (
            (out_after - out_before).abs().max().item(),
            (weights_after - weights_before).abs().max().item(),
        )
        mha64.load_state_dict(original)  # undo the change
for key_bias, (out_moved, weights_moved) in moved_by.items():
    print(
        f"{'key' if key_bias else 'query'} bias moved: outputs change by "
        f"{out_moved:.1e}, weights by {weights_moved:.1e}"
    )
# sphinx_gallery_start_ignore
assert max(moved_by[True]) < 1e-12 and moved_by[False][1] > 1e-6
# sphinx_gallery_end_ignore

# %%
# .. solution 3
#
# ``masked_fill`` sends no gradient back to the scores it overwrote, so the NaN that
# the softmax's backward pass computes for the empty row stops there; the zeroing
# removes the NaN from the forward pass. The additive mask passes the NaN on to the
# scores, and from them to query 2 and to every key.


def zeroed_after(block_scores):
    """Attention that blocks scores with ``block_scores``, then zeroes the blocked
    weights."""

    def attend(q, k, v):
        scores = q @ k.transpose(-2, -1) / D**0.5  # (L, D) @ (D, S) -> (L, S)
        weights = block_scores(scores).softmax(dim=-1)  # (L, S)
        weights = weights.masked_fill(~row_mask, 0.0)
        return weights @ v, weights  # (L, S) @ (S, D) -> (L, D)

    return attend


blockers = {
    "masked_fill -inf": lambda s: s.masked_fill(~row_mask, float("-inf")),
    "add -inf mask": lambda s: s + additive,
}
zeroed = {}
for name, block_scores in blockers.items():
    qs, ks, vs = (t.clone().requires_grad_() for t in (q0, k0, v0))
    out_s, _ = zeroed_after(block_scores)(qs, ks, vs)
    out_s.sum().backward()
    zeroed[name] = (qs.grad, ks.grad, vs.grad)
    nans = ", ".join(f"{int(g.isnan().sum())}/{g.numel()}" for g in zeroed[name])
    print(f"{name} + zeroing: NaN in grad of q, k, v: {nans}")
# sphinx_gallery_start_ignore
assert all(
    torch.allclose(g, ours, atol=1e-12)
    for g, ours in zip(zeroed["masked_fill -inf"], ours_grads, strict=True)
)
assert zeroed["add -inf mask"][0][2].isnan().all()
assert zeroed["add -inf mask"][1].isnan().all()
# sphinx_gallery_end_ignore

# %%
# Next: :ref:`sphx_glr_tutorials_2_building_and_checking_09_testing_against_pytorch.py`
# checks the modules against PyTorch's own.

# sphinx_gallery_thumbnail_number = 1
