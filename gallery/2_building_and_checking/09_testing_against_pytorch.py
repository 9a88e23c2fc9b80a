"""
Testing against PyTorch
=======================

.. prerequisites:: 04_multi_head 06_mask_conventions 07_transformer_block
   :summary: Golden tests: the same weights in this package and in PyTorch's modules
      give the same outputs to rounding; then a property test.

PyTorch ships its own ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and
``F.scaled_dot_product_attention``. They are the best test this package could ask for:
load the same weights into both, feed both the same input, and every output must agree
to rounding. This page does it for all three, in float32 and in float64, starting with
the weight copy that seems obvious and silently leaves the biases behind, then with the
package's ``from_torch`` converters. It closes with a property test that lets
``hypothesis`` choose the shapes and the masks.

The two mask polarities are those of
:ref:`sphx_glr_tutorials_1_foundations_06_mask_conventions.py`.
"""

# %%
# Setup
# -----

import torch
from torch import nn

from attention.repro import claim, default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0
print(f"torch {torch.__version__} on {device}, seed {seed}")

# %%
# A reference worth testing against
# ---------------------------------
#
# The reference is an ``nn.MultiheadAttention`` with ``E = 16`` and ``H = 4``, batch
# first like this package. A freshly built one is a weak reference, though: PyTorch
# starts all of its biases at zero, so comparing with it cannot catch a port that loses
# the biases (one that zeroes them, say, or builds its projections with
# ``bias=False``): with zero biases, both agree.

E, H = 16, 4
fresh = nn.MultiheadAttention(E, H, batch_first=True, device=device)
print(
    "largest |bias| of a fresh nn.MultiheadAttention: "
    f"{fresh.in_proj_bias.abs().max().item()}"
)
# sphinx_gallery_start_ignore
assert (fresh.in_proj_bias == 0).all() and (fresh.out_proj.bias == 0).all()
# sphinx_gallery_end_ignore

# %%
# So before any comparison every parameter gets random values, as training would give
# it: no zero bias and no unit scale is left to hide a parameter that was not copied.


def randomize_(module):
    """Give every parameter of ``module`` random values, in place."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.3)
    return module


theirs = randomize_(nn.MultiheadAttention(E, H, batch_first=True, device=device)).eval()
for name, p in theirs.named_parameters():
    print(f"{name:18s} {tuple(p.shape)}")

# %%
# ``nn.MultiheadAttention`` packs the query, key and value projections into one
# ``(3E, E)`` matrix, ``in_proj_weight``, and their biases into one ``(3E,)`` vector,
# ``in_proj_bias``; :class:`attention.MultiHeadAttention` has four separate
# ``nn.Linear`` layers.
#
# Copying only the weights
# ------------------------
#
# The obvious copy cuts ``in_proj_weight`` into three and copies ``out_proj.weight``,
# and stops there: the biases are left behind.

from attention import MultiHeadAttention

N, L = 2, 5
x = torch.randn(N, L, E, device=device)  # (N, L, E)


def copy_weights(ours, torch_mha):
    """Copy the four projection weights of ``torch_mha`` into ``ours``, nothing else."""
    projections = (ours.q_proj, ours.k_proj, ours.v_proj)
    with torch.no_grad():
        # in_proj_weight (3E, E) -> 3 x (E, E)
        for proj, w in zip(projections, torch_mha.in_proj_weight.chunk(3), strict=True):
            proj.weight.copy_(w)
        ours.out_proj.weight.copy_(torch_mha.out_proj.weight)
    return ours


weights_only = copy_weights(MultiHeadAttention(E, H, device=device).eval(), theirs)


def compare(ours, theirs, x):
    """Largest |difference| of outputs and per-head weights, self-attention on x."""
    with torch.no_grad():
        out, weights = ours(x)  # (N, L, E), (N, H, L, L)
        ref_out, ref_weights = theirs(
            x, x, x, need_weights=True, average_attn_weights=False
        )
    diffs = (out - ref_out, weights - ref_weights)
    return tuple(diff.abs().max().item() for diff in diffs)


out_diff, weights_diff = compare(weights_only, theirs, x)
print(
    f"weights only: output differs by up to {out_diff:.3f}, weights by up to "
    f"{weights_diff:.3f}"
)
# sphinx_gallery_start_ignore
claim("weights-only copy: output difference", out_diff, above=0.1)
claim("weights-only copy: weights difference", weights_diff, above=0.01)
# sphinx_gallery_end_ignore

# %%
# The outputs differ by the amount printed above, far beyond rounding. Copying the
# biases one at a time shows what each one does:

b_q, b_k, b_v = theirs.in_proj_bias.chunk(3)  # 3 x (E,)
missing = {
    "q_proj.bias": (weights_only.q_proj.bias, b_q),
    "k_proj.bias": (weights_only.k_proj.bias, b_k),
    "v_proj.bias": (weights_only.v_proj.bias, b_v),
    "out_proj.bias": (weights_only.out_proj.bias, theirs.out_proj.bias),
}
print(f"{'after also copying':20s} {'output diff':>12s} {'weights diff':>13s}")
print(f"{'(weights only)':20s} {out_diff:12.1e} {weights_diff:13.1e}")
progress = {}
for name, (ours_bias, their_bias) in missing.items():
    with torch.no_grad():
        ours_bias.copy_(their_bias)
    progress[name] = compare(weights_only, theirs, x)
    print(f"{name:20s} {progress[name][0]:12.1e} {progress[name][1]:13.1e}")
# sphinx_gallery_start_ignore
assert progress["q_proj.bias"][1] < 1e-6  # the weights match once the query bias is in
assert abs(progress["k_proj.bias"][0] - progress["q_proj.bias"][0]) < 1e-5  # no effect
assert max(progress["out_proj.bias"]) < 1e-5
# sphinx_gallery_end_ignore

# %%
# Once the query bias is in, the weights agree; the key bias changes nothing beyond
# rounding; the value and output biases close the gap in the output. The key bias is
# invisible because it adds the same amount :math:`q \cdot b_K` to a query's score with
# every key, and the softmax ignores a constant shift
# (:ref:`sphx_glr_tutorials_2_building_and_checking_08_checking_gradients.py` shows its
# gradient is 0 too). No comparison of outputs can catch a forgotten key bias, so a
# converter is also tested parameter by parameter.
#
# ``from_torch``
# --------------
#
# :meth:`attention.MultiHeadAttention.from_torch` copies everything, keeps the dtype,
# the device, the dropout and the training mode, and refuses the options the package
# does not have (separate key and value sizes, ``add_bias_kv``, ``add_zero_attn``):
#
# .. literalinclude:: ../../../attention/multi_head.py
#    :language: python
#    :pyobject: MultiHeadAttention.from_torch
#    :no-docstring:

ours = MultiHeadAttention.from_torch(theirs)
ours_params = dict(ours.named_parameters())
w_q, w_k, w_v = theirs.in_proj_weight.chunk(3)  # 3 x (E, E)
packed = {
    "q_proj.weight": w_q,
    "k_proj.weight": w_k,
    "v_proj.weight": w_v,
    "q_proj.bias": b_q,
    "k_proj.bias": b_k,
    "v_proj.bias": b_v,
    "out_proj.weight": theirs.out_proj.weight,
    "out_proj.bias": theirs.out_proj.bias,
}
equal = [name for name, p in packed.items() if torch.equal(ours_params[name], p)]
print(f"parameters equal to PyTorch's: {len(equal)} of {len(ours_params)}")
# sphinx_gallery_start_ignore
assert len(equal) == len(ours_params) == 8
# sphinx_gallery_end_ignore

# %%
# Now the outputs, in float32 and in float64, with a mask. The test uses cross-attention
# (``L = 5`` queries, ``S = 7`` keys) with a causal mask and padding. This package takes
# one bool mask, ``True`` = may attend; ``nn.MultiheadAttention`` takes an ``attn_mask``
# and a ``key_padding_mask`` with ``True`` = blocked.
# :func:`attention.masks.to_torch_attn_mask` and
# :func:`attention.masks.to_torch_key_padding_mask` convert.

from attention import causal_mask, padding_mask
from attention.masks import to_torch_attn_mask, to_torch_key_padding_mask

S = 7
causal = causal_mask(L, S, device=device)  # (L, S), bottom-right aligned
padding = padding_mask(torch.tensor([7, 4], device=device), S)  # (N, 1, 1, S)
mask = causal & padding  # (N, 1, L, S)
torch_masks = {
    "attn_mask": to_torch_attn_mask(causal),  # (L, S), True = blocked
    "key_padding_mask": to_torch_key_padding_mask(padding),  # (N, S), True = padding
}
# sphinx_gallery_start_ignore
assert mask.any(-1).all()  # every query may attend to at least one key
# sphinx_gallery_end_ignore

table = {}
for dtype in (torch.float32, torch.float64):
    torch_mha = randomize_(
        nn.MultiheadAttention(E, H, batch_first=True, dtype=dtype)
    ).to(device)
    our_mha = MultiHeadAttention.from_torch(torch_mha.eval())
    query = torch.randn(N, L, E, dtype=dtype, device=device)  # (N, L, E)
    memory = torch.randn(N, S, E, dtype=dtype, device=device)  # (N, S, E)
    with torch.no_grad():
        out, weights = our_mha(query, memory, mask=mask)  # (N, L, E), (N, H, L, S)
        ref_out, ref_weights = torch_mha(
            query,
            memory,
            memory,
            **torch_masks,
            need_weights=True,
            average_attn_weights=False,
        )
    table[("MultiHeadAttention", "output", dtype)] = (out - ref_out).abs().max().item()
    table[("MultiHeadAttention", "per-head weights", dtype)] = (
        (weights - ref_weights).abs().max().item()
    )


def print_table(table, module):
    print(f"{module + ':':20s} {'float32':>9s} {'float64':>9s}")
    for what in dict.fromkeys(w for m, w, _ in table if m == module):
        diffs = [
            table[(module, what, dtype)] for dtype in (torch.float32, torch.float64)
        ]
        print(f"  {what:18s} {diffs[0]:9.1e} {diffs[1]:9.1e}")


print_table(table, "MultiHeadAttention")

# sphinx_gallery_start_ignore
# float32: a few ulps of sums of E products of numbers of order 1 (eps = 1.2e-7).
for (module, what, dtype), diff in table.items():
    assert diff < (1e-5 if dtype == torch.float32 else 1e-12), (
        module,
        what,
        dtype,
        diff,
    )
# sphinx_gallery_end_ignore

# %%
# A float32 number carries about 7 significant digits and a float64 number about 16; the
# differences printed above are at that level or below it (0 means the two modules did
# the very same arithmetic).
#
# A query with no key left is where the two differ on purpose (:ref:`empty-rows`): this
# package returns weights 0 for it, ``nn.MultiheadAttention`` (on the path that returns
# weights) returns NaN. A test must leave such rows out of the comparison and check
# them on their own.

empty = mask.clone()
empty[0, :, 0] = False  # query 0 of sentence 0 may attend to nothing
with torch.no_grad():
    # the float64 pair from the loop above
    _, weights = our_mha(query, memory, mask=empty)
    _, ref_weights = torch_mha(
        query,
        memory,
        memory,
        attn_mask=to_torch_attn_mask(empty.expand(N, H, L, S).reshape(N * H, L, S)),
        need_weights=True,
        average_attn_weights=False,
    )
print(f"empty row, ours:  {weights[0, 0, 0].tolist()}")
print(f"empty row, torch: {ref_weights[0, 0, 0].tolist()}")
# sphinx_gallery_start_ignore
assert (weights[0, :, 0] == 0).all() and ref_weights[0, :, 0].isnan().all()
# sphinx_gallery_end_ignore

# %%
# The Transformer block
# ---------------------
#
# :meth:`attention.TransformerBlock.from_torch` loads an ``nn.TransformerEncoderLayer``
# (ReLU activation) in the same way: the attention through
# ``MultiHeadAttention.from_torch``, then the two linear layers and the two LayerNorms.
# Dropout is random, so the two are compared in evaluation mode, in both norm orders.
# PyTorch documents a fused "fast path" that ``nn.TransformerEncoderLayer`` may take in
# evaluation mode when autograd is off, so it is called both ways: with autograd on, and
# under ``torch.no_grad()``.

from attention import TransformerBlock

self_mask = causal_mask(L, device=device)  # (L, L)
for dtype in (torch.float32, torch.float64):
    for norm_first in (False, True):
        options = {"batch_first": True, "norm_first": norm_first, "dtype": dtype}
        layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=32, **options)
        layer = randomize_(layer).to(device).eval()
        block = TransformerBlock.from_torch(layer)
        tokens = torch.randn(N, L, E, dtype=dtype, device=device)  # (N, L, E)
        src_mask = to_torch_attn_mask(self_mask)  # (L, L), True = blocked
        order = "pre-LN" if norm_first else "post-LN"
        out, _ = block(tokens, self_mask)
        ref = layer(tokens, src_mask=src_mask)
        table[("TransformerBlock", f"{order}, autograd", dtype)] = (
            (out - ref).abs().max().item()
        )
        with torch.no_grad():
            ref_fast = layer(tokens, src_mask=src_mask)
        diff_fast = (out.detach() - ref_fast).abs().max().item()
        table[("TransformerBlock", f"{order}, no_grad", dtype)] = diff_fast
print_table(table, "TransformerBlock")

# sphinx_gallery_start_ignore
for (module, what, dtype), diff in table.items():
    assert diff < (1e-5 if dtype == torch.float32 else 1e-12), (
        module,
        what,
        dtype,
        diff,
    )
# sphinx_gallery_end_ignore

# %%
# The functional form
# -------------------
#
# ``F.scaled_dot_product_attention`` uses this package's mask polarity (``True`` = may
# attend), so the mask goes in as it is. The test picks sizes where mistakes would show:
# more keys than queries (``L = 5``, ``S = 7``), values of a different size than the
# keys (``Dv = 3``, ``D = 8``), batch and head dimensions in front, a scale that is not
# :math:`1/\sqrt{D}`, and a random mask where every query keeps at least one key.

import torch.nn.functional as F

from attention import scaled_dot_product_attention

for dtype in (torch.float32, torch.float64):
    like = {"dtype": dtype, "device": device}
    q = torch.randn(N, H, L, 8, **like)  # (N, H, L, D)
    k = torch.randn(N, H, S, 8, **like)  # (N, H, S, D)
    v = torch.randn(N, H, S, 3, **like)  # (N, H, S, Dv)
    random_mask = torch.rand(N, H, L, S, device=device) < 0.6  # (N, H, L, S)
    random_mask[..., 0] = True  # every query keeps key 0
    # (N, H, L, Dv)
    out, _ = scaled_dot_product_attention(q, k, v, random_mask, scale=0.3)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=random_mask, scale=0.3)
    table[("scaled_dot_product", "output", dtype)] = (out - ref).abs().max().item()
print_table(table, "scaled_dot_product")

# sphinx_gallery_start_ignore
assert out.shape == (N, H, L, 3)
for (module, what, dtype), diff in table.items():
    assert diff < (1e-5 if dtype == torch.float32 else 1e-12), (
        module,
        what,
        dtype,
        diff,
    )
# sphinx_gallery_end_ignore

# %%
# Every comparison at once
# ------------------------
#
# Each difference divided by its dtype's machine epsilon (``torch.finfo(dtype).eps``:
# about ``1.2e-7`` for float32, ``2.2e-16`` for float64) puts float32 and float64 on
# one scale. It is an absolute difference counted in epsilons: near 1, one epsilon is
# one unit of rounding (the spacing of the numbers the dtype can hold there), and a
# number :math:`2^k` times larger has units :math:`2^k` times larger, so on outputs
# larger than 1 the same count stands for fewer units of rounding. A real mistake, like
# the forgotten biases above, would be millions of epsilons.

# sphinx_gallery_start_ignore
import matplotlib.pyplot as plt

rows = list(dict.fromkeys((module, what) for module, what, _ in table))
fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
height = 0.38
for i, dtype in enumerate((torch.float32, torch.float64)):
    ulps = [
        table[(module, what, dtype)] / torch.finfo(dtype).eps for module, what in rows
    ]
    positions = [r + (i - 0.5) * height for r in range(len(rows))]
    bars = ax.barh(
        positions, ulps, height=height, label=str(dtype).replace("torch.", "")
    )
    ax.bar_label(bars, fmt="%.1f", padding=2)
ax.set_yticks(range(len(rows)), [f"{module}: {what}" for module, what in rows])
ax.invert_yaxis()
ax.set_xlabel("largest |ours - PyTorch|, in units of the dtype's machine epsilon")
ax.set_title("This package against PyTorch: same weights, same inputs")
ax.legend()
plt.show()
# sphinx_gallery_end_ignore

largest_ulps = max(
    diff / torch.finfo(dtype).eps for (_, _, dtype), diff in table.items()
)
forgotten_ulps = out_diff / torch.finfo(torch.float32).eps
print(f"largest difference after from_torch: {largest_ulps:.1f} epsilons")
print(f"the weights-only copy at the top of the page: {forgotten_ulps:.1e} epsilons")
claim("largest difference after from_torch (ulps)", largest_ulps, below=100)
claim("weights-only copy (ulps)", forgotten_ulps, above=1e6)

# %%
# Every bar is a few epsilons at most (the largest is printed above), in float32 as in
# float64: the two implementations compute the same numbers, adding them in a
# different order at most. The forgotten biases were off by millions of epsilons.
#
# Letting hypothesis choose the cases
# -----------------------------------
#
# A handful of hand-picked shapes can miss the case that breaks: one query, one head, a
# mask with an empty row. Besides comparisons on fixed cases like the ones above, the
# project's unit tests (in ``tests/unit/`` of the repository) state *properties* and let
# ``hypothesis`` generate the cases, over batch sizes, lengths, heads and random masks,
# in float64: the functional path matches ``F.scaled_dot_product_attention``, every row
# of weights sums to 1 or is all 0, causal attention never looks ahead, permuting keys
# and values together changes nothing. Here is a self-contained property of that kind,
# for ``from_torch``: for any batch size, lengths, number of heads, head size and
# per-head mask, our weights match ``nn.MultiheadAttention``'s for every query and head
# that has a key to attend to and are 0 for the others, and our output matches on every
# query whose heads all have one (a query's output mixes its heads). It is sized for a
# page:
#
# - ``max_examples=30`` cases (a test suite can afford more);
# - ``derandomize=True`` draws the same cases on every run, so the page prints the same
#   output;
# - ``database=None`` stops hypothesis from saving failures into a ``.hypothesis``
#   folder in the current directory;
# - ``deadline=None`` turns off the per-case time limit (200 ms by default), which a
#   slow machine could exceed;
# - ``phases=(Phase.generate, Phase.shrink)`` skips the slower phases that replay saved
#   failures and explain which arguments matter.

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

cases = []

# sphinx_gallery_start_ignore
# hypothesis caches data in ./.hypothesis; while the site
# builds, keep it out of the sources.
import tempfile

from hypothesis.configuration import set_hypothesis_home_dir

hypothesis_home = tempfile.TemporaryDirectory()
set_hypothesis_home_dir(hypothesis_home.name)
# sphinx_gallery_end_ignore


def matches_torch(convert):
    """The property, for a function ``convert`` that turns an nn.MultiheadAttention into
    ours.
    """

    @settings(
        max_examples=30,
        derandomize=True,
        database=None,
        deadline=None,
        report_multiple_bugs=False,
        phases=(Phase.generate, Phase.shrink),
    )
    @given(
        N=st.integers(1, 2),
        L=st.integers(1, 5),
        S=st.integers(1, 5),
        H=st.integers(1, 3),
        D=st.integers(1, 3),
        data=st.data(),
    )
    def check(N, L, S, H, D, data):
        E = H * D
        bits = data.draw(
            st.lists(st.booleans(), min_size=N * H * L * S, max_size=N * H * L * S)
        )
        mask = torch.tensor(bits, device=device).view(N, H, L, S)  # (N, H, L, S)
        theirs = randomize_(
            nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
        )
        theirs = theirs.to(device).eval()
        ours = convert(theirs)
        query = torch.randn(N, L, E, dtype=torch.float64, device=device)  # (N, L, E)
        memory = torch.randn(N, S, E, dtype=torch.float64, device=device)  # (N, S, E)
        with torch.no_grad():
            out, weights = ours(query, memory, mask=mask)
            ref_out, ref_weights = theirs(
                query,
                memory,
                memory,
                attn_mask=to_torch_attn_mask(mask).reshape(N * H, L, S),
                need_weights=True,
                average_attn_weights=False,
            )
        # (N, H, L): this head of this query may attend to something
        has_key = mask.any(-1)
        full_rows = has_key.all(1)  # (N, L): every head of this query may
        cases.append((N, L, S, H, E, int((~has_key).sum())))
        assert out.isfinite().all() and (weights[~has_key] == 0).all()
        assert torch.allclose(
            weights[has_key], ref_weights[has_key], rtol=0, atol=1e-12
        )
        assert torch.allclose(out[full_rows], ref_out[full_rows], rtol=0, atol=1e-12)

    return check


matches_torch(MultiHeadAttention.from_torch)()
print(f"{len(cases)} cases passed")
for i, name in enumerate("NLSHE"):
    column = [case[i] for case in cases]
    print(f"  {name} from {min(column)} to {max(column)}")
with_empty = sum(1 for case in cases if case[-1] > 0)
print(
    f"  {with_empty} of them with at least one empty row (query and head with no key)"
)
# sphinx_gallery_start_ignore
assert len(cases) == 30 and with_empty > 0
# sphinx_gallery_end_ignore

# %%
# The same property catches the weights-only copy from the top of the page. When a case
# fails, hypothesis *shrinks* it: it retries smaller and simpler inputs until it finds
# the smallest that still fails, and reports that one:


def copy_weights_only(torch_mha):
    ours = MultiHeadAttention(
        torch_mha.embed_dim, torch_mha.num_heads, dtype=torch.float64
    )
    return copy_weights(ours.to(device), torch_mha)


cases.clear()
try:
    matches_torch(copy_weights_only)()
except AssertionError as error:
    print("\n".join(getattr(error, "__notes__", [])))
else:
    raise AssertionError("the weights-only copy should fail the property")
smallest = cases[-1]  # hypothesis runs the shrunk case last, to report it
print(
    f"cases tried, shrinking included: {len(cases)}; the last one: N, L, S, H, E = "
    f"{smallest[:5]}"
)
# sphinx_gallery_start_ignore
assert smallest[:5] == (1, 1, 1, 1, 1)
set_hypothesis_home_dir(None)
hypothesis_home.cleanup()
# sphinx_gallery_end_ignore

# %%
# The smallest failing case is as simple as attention gets: one sequence, one query, one
# key, one head of size 1, and a mask that allows it. A failure that small is easy to
# debug.
#
# What to remember
# ----------------
#
# - Test against a reference whose parameters are all random: ``nn.MultiheadAttention``
#   starts its biases at zero, and a zero bias hides a copy that forgot it.
# - ``nn.MultiheadAttention`` packs ``W_Q, W_K, W_V`` into ``in_proj_weight`` and their
#   biases into ``in_proj_bias``; the biases must be copied too, and the key bias has no
#   effect on the output, so compare parameters as well as outputs.
# - ``from_torch`` copies every weight and bias; after it the outputs and per-head
#   weights agree with PyTorch's to a few machine epsilons, in float32 and in float64.
# - Convert masks with :mod:`attention.masks`: PyTorch's modules block where the mask is
#   ``True``, this package attends there; ``F.scaled_dot_product_attention`` shares this
#   package's polarity.
# - A query with no key left gives weights 0 here and NaN in ``nn.MultiheadAttention``
#   (on the path that returns weights): leave such rows out of the comparison and check
#   them separately.
# - Property tests (hypothesis) state what must hold for *every* shape and mask, find
#   the case that breaks it, and shrink it to the smallest one.
#
# API used on this page: :class:`attention.MultiHeadAttention` and
# :meth:`attention.MultiHeadAttention.from_torch`, :class:`attention.TransformerBlock`
# and :meth:`attention.TransformerBlock.from_torch`,
# :func:`attention.scaled_dot_product_attention`, :func:`attention.causal_mask`,
# :func:`attention.padding_mask`, :func:`attention.masks.to_torch_attn_mask` and
# :func:`attention.masks.to_torch_key_padding_mask`.

# %%
# Exercises
# ---------
#
# 1. **A reference that cannot see the bug.** Build a port that has no biases at all,
#    ``MultiHeadAttention(E, H, bias=False)``, copy into it only the weights of
#    ``fresh`` (the freshly built ``nn.MultiheadAttention`` at the top of the page), and
#    compare the two with ``compare``. Then copy the weights of ``theirs`` into it
#    instead. What does each comparison say?
# 2. **The mask polarity, forgotten.** Give ``theirs`` this package's causal mask
#    (``True`` = may attend) as its ``attn_mask`` without converting it, on the
#    self-attention input ``x``. Before running it, predict which keys each of the 5
#    queries attends to, and which row of weights comes out NaN.
# 3. **The way back.** Write the conversion in the other direction: build an
#    ``nn.MultiheadAttention`` from ``ours`` by packing its projections into
#    ``in_proj_weight`` and ``in_proj_bias``. Is the round trip
#    ``theirs`` -> ``ours`` -> back exact?

# %%
# .. solution 1
#
# With ``fresh``, whose biases are all zero, the bias-less port agrees to rounding: the
# comparison passes although the port has lost every bias. Against ``theirs``, whose
# biases are random, it fails by far.

no_bias = MultiHeadAttention(E, H, bias=False, device=device).eval()
against_fresh = compare(copy_weights(no_bias, fresh.eval()), fresh, x)
against_random = compare(copy_weights(no_bias, theirs), theirs, x)
for against, (out_gap, weights_gap) in [
    ("fresh", against_fresh),
    ("theirs", against_random),
]:
    print(
        f"bias-less port against {against + ':':7s} outputs differ by {out_gap:.1e}, "
        f"weights by {weights_gap:.1e}"
    )
# sphinx_gallery_start_ignore
assert max(against_fresh) < 1e-5 and against_random[0] > 1e-2
# sphinx_gallery_end_ignore

# %%
# .. solution 2
#
# ``nn.MultiheadAttention`` blocks where the mask is ``True``, so query :math:`i` reads
# exactly the keys *after* it, the future, and the last query, for which this package's
# mask allows every key, has nothing left: its row is NaN.

allowed = causal_mask(L, device=device)  # (L, L), True = may attend
with torch.no_grad():
    _, flipped = theirs(
        x, x, x, attn_mask=allowed, need_weights=True, average_attn_weights=False
    )  # (N, H, L, L)
for i in range(L):
    row = flipped[0, 0, i]
    keys = "NaN" if row.isnan().all() else (row > 0).nonzero().flatten().tolist()
    print(f"query {i} reads keys {keys}")
# sphinx_gallery_start_ignore
assert (flipped[..., : L - 1, :][..., allowed[: L - 1]] == 0).all()
assert (flipped[..., : L - 1, :][..., ~allowed[: L - 1]] > 0).all()
assert flipped[..., L - 1, :].isnan().all()
# sphinx_gallery_end_ignore

# %%
# .. solution 3
#
# Concatenating the three weights and biases gives back PyTorch's packed tensors
# exactly: the round trip changes no bit of any parameter. The outputs still differ in
# the last bits (printed below) because the arithmetic is not the same: given one
# tensor as query, key and value, ``nn.MultiheadAttention`` projects all three with a
# single product by the packed :math:`(3E, E)` weight, and the matrix library sums a
# product of that shape in another order than this package's three :math:`(E, E)`
# products.


def to_torch(ours):
    """An ``nn.MultiheadAttention`` with every parameter of ``ours``."""
    back = nn.MultiheadAttention(
        ours.embed_dim, ours.num_heads, batch_first=True, device=device
    )
    projections = (ours.q_proj, ours.k_proj, ours.v_proj)
    with torch.no_grad():
        back.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        back.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        back.out_proj.load_state_dict(ours.out_proj.state_dict())
    return back.eval()


back = to_torch(ours)
names = [name for name, _ in theirs.named_parameters()]
same = [
    name
    for name in names
    if torch.equal(theirs.get_parameter(name), back.get_parameter(name))
]
print(f"parameters equal after the round trip: {len(same)} of {len(names)}")
out_gap, weights_gap = compare(ours, back, x)
print(
    f"ours against back: outputs differ by {out_gap:.1e}, weights by {weights_gap:.1e}"
)
# sphinx_gallery_start_ignore
assert same == names
# sphinx_gallery_end_ignore

# %%
# Next: :ref:`sphx_glr_tutorials_3_training_and_reading_10_classifier.py` trains a small
# attention classifier.

# sphinx_gallery_thumbnail_number = 1
