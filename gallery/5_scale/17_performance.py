"""
Performance: timing attention on the CPU and the GPU
====================================================

.. prerequisites:: 04_multi_head

The earlier pages made attention correct; this one measures how fast it runs and why. It
times what packing the three input projections into one matrix buys, finds out which of
PyTorch's attention kernels runs on which device, measures the cost of asking for the
attention weights, and checks how much accuracy lower-precision arithmetic gives up. It
starts with how to time code so that the numbers mean something, on a GPU in particular.

Every time on the page was measured when the page ran, on the device printed below. The
site is built on a CPU-only machine, so there the GPU-specific steps say so and time the
CPU instead; run the page on a machine with a CUDA GPU to see them on the GPU. The full
benchmark behind the page is ``make bench``.
"""

# %%
# The device, once
# ----------------
#
# Every measurement below runs on ``device``. A timing means nothing without what it ran
# on, so the page prints that first.

import platform

import torch

from attention.repro import claim, default_device, seed_everything

device = default_device()  # ATTENTION_DEVICE, else "cuda" if there is a GPU, else "cpu"
seed = seed_everything()  # ATTENTION_SEED, default 0
if device.type == "cuda":
    device_name = torch.cuda.get_device_name(device)
else:
    device_name = f"{platform.machine()} CPU, {torch.get_num_threads()} threads"
    print("no CUDA GPU here: every time on this page is measured on the CPU")
print(
    f"timing on {device} ({device_name}), torch {torch.__version__}, float32 unless "
    "stated"
)

# %%
# Timing done right
# -----------------
#
# Four things go wrong when timing PyTorch code with a stopwatch around one call:
#
# 1. **Warm-up.** The first call pays one-off costs: memory allocation, choosing a
#    kernel, filling caches (and, on a GPU, initialising CUDA). Time later calls.
# 2. **Synchronisation.** A GPU runs asynchronously: a call returns as soon as its
#    kernels are queued. Timing from the CPU without ``torch.cuda.synchronize()``
#    measures the queueing. CUDA *events* recorded on the GPU's own timeline measure the
#    kernels themselves.
# 3. **Noise.** Other programs, frequency changes and the memory system make each run
#    differ. Repeat, and report the **median**, which one slow outlier cannot move.
# 4. **Scale.** A time alone says little. Divide the number of floating-point operations
#    by it (FLOP/s) and compare with what a large matrix product reaches on the same
#    device.
#
# On the CPU, ``torch.utils.benchmark.Timer`` takes care of the first three: its
# ``blocked_autorange`` warms up, then runs the code in blocks long enough for the clock
# and returns every block's time. On a GPU the helper below records a pair of CUDA
# events around each call and synchronises once at the end.

import statistics

from torch.utils import benchmark


def cuda_median_ms(fn, *args, warmup=3, reps=20):
    """Median time of ``fn(*args)`` on the GPU, in ms, from CUDA events."""
    for _ in range(warmup):
        fn(*args)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn(*args)
        end.record()
    torch.cuda.synchronize()  # wait until every event has happened
    return statistics.median(
        s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)
    )


def median_ms(fn, *args, min_run_time=0.2):
    """Median time of ``fn(*args)`` in ms on ``device``, after a warm-up."""
    if device.type == "cuda":
        return cuda_median_ms(fn, *args)
    timer = benchmark.Timer(
        "fn(*args)",
        globals={"fn": fn, "args": args},
        num_threads=torch.get_num_threads(),
    )
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


# %%
# Here is the first pitfall on a matrix product: the first call against the median of
# many. On a GPU a second line shows the second pitfall, a stopwatch that does not wait
# for the GPU.

import time

torch.manual_seed(seed)
n = 2048
a = torch.randn(n, n, device=device)
b = torch.randn(n, n, device=device)

start = time.perf_counter()
_ = a @ b
if device.type == "cuda":
    torch.cuda.synchronize()
first_ms = (time.perf_counter() - start) * 1e3
matmul_ms = median_ms(torch.matmul, a, b)
print(
    f"({n}, {n}) @ ({n}, {n}): first call {first_ms:.2f} ms, median {matmul_ms:.2f} ms"
)

if device.type == "cuda":
    start = time.perf_counter()
    _ = a @ b  # returns once the kernel is queued
    unsynced_ms = (time.perf_counter() - start) * 1e3
    torch.cuda.synchronize()
    print(
        f"the same product timed without synchronising: {unsynced_ms:.3f} ms (the "
        "queueing)"
    )
else:
    print(
        "on the CPU a call returns when its work is done: there is nothing to "
        "synchronise"
    )

matmul_gflops = 2 * n**3 / (matmul_ms * 1e-3) / 1e9
print(f"{2 * n**3 / 1e9:.1f} GFLOP in {matmul_ms:.2f} ms: {matmul_gflops:.0f} GFLOP/s")

# %%
# The last line is this device's matmul rate: a roof that the code below can be compared
# with. A product of two (n, n) matrices costs :math:`2n^3` operations (a multiply and
# an add for each of the :math:`n` terms of each of the :math:`n^2` entries). Attention
# counts the same way: :math:`QK^\top` and the weighted sum of the values each cost
# :math:`2LSD` per head, so a forward pass costs
#
# .. math::
#
#    4 \cdot N \cdot H \cdot L \cdot S \cdot D,
#
# plus :math:`2 \cdot N \cdot L \cdot E^2` for each of the four projections.
#
# One matmul instead of three
# ---------------------------
#
# :class:`attention.MultiHeadAttention` projects the queries, keys and values with three
# :math:`(E, E)` matrices; :class:`attention.FusedMultiHeadAttention` stacks them into
# one :math:`(3E, E)` matrix, ``qkv_proj``, and makes one call for self-attention. It is
# a subclass of :class:`attention.MultiHeadAttention` that writes again only what fusing
# changes: the projection step, and the attention call, which goes to PyTorch's fused
# kernel when the weights are not needed (the constructor and ``from_torch`` hooks that
# create and load ``qkv_proj`` are in the same file):
#
# .. literalinclude:: ../../attention/fused.py
#    :language: python
#    :pyobject: FusedMultiHeadAttention._project
#
# .. literalinclude:: ../../attention/fused.py
#    :language: python
#    :pyobject: FusedMultiHeadAttention._attend
#
# The two modules below hold the same weights, copied from one
# ``nn.MultiheadAttention``.

from torch import nn

from attention import FusedMultiHeadAttention, MultiHeadAttention

N, L, E, H = 4, 512, 512, 8
torch_mha = nn.MultiheadAttention(E, H, batch_first=True, device=device).eval()
separate = MultiHeadAttention.from_torch(torch_mha).eval()
fused = FusedMultiHeadAttention.from_torch(torch_mha).eval()
x = torch.randn(N, L, E, device=device)  # (N, L, E)


def three_projections(x):
    return separate.q_proj(x), separate.k_proj(x), separate.v_proj(x)  # 3 x (N, L, E)


def one_projection(x):
    return fused.qkv_proj(x).chunk(3, dim=-1)  # (N, L, 3E) -> 3 x (N, L, E)


with torch.inference_mode():
    for ours, theirs in zip(three_projections(x), one_projection(x), strict=True):
        assert torch.allclose(ours, theirs, atol=1e-5)
    three_ms = median_ms(three_projections, x)
    one_ms = median_ms(one_projection, x)
projection_gflop = 3 * 2 * N * L * E * E / 1e9
print(f"q, k, v projections, {projection_gflop:.1f} GFLOP on (N, L, E) = {(N, L, E)}:")
print(
    f"  three (E, E) matmuls: {three_ms:6.2f} ms "
    f"({projection_gflop / three_ms * 1e3:4.0f} GFLOP/s)"
)
print(
    f"  one (3E, E) matmul:   {one_ms:6.2f} ms ({projection_gflop / one_ms * 1e3:4.0f} "
    "GFLOP/s)"
)
print(f"  one / three: {one_ms / three_ms:.2f}")

# %%
# The arithmetic is identical; what changes is one call reading ``x`` once instead of
# three calls reading it three times, and one larger product instead of three smaller
# ones. The ratio printed above is what that is worth on this device at this size.
#
# Which attention kernel runs where
# ---------------------------------
#
# ``F.scaled_dot_product_attention`` is one function with several implementations,
# called backends: ``MATH`` (the formula written with ordinary operations, runs
# everywhere), ``FLASH_ATTENTION`` (FlashAttention :cite:p:`dao2022`, the online softmax
# of :ref:`sphx_glr_tutorials_13_memory_efficient.py`, on the CPU and on recent NVIDIA
# GPUs), ``EFFICIENT_ATTENTION`` (a memory-efficient kernel for GPUs) and
# ``CUDNN_ATTENTION`` (NVIDIA's cuDNN library). By default PyTorch takes, in a fixed
# order of preference, the first one that supports the device, dtype and shapes; the
# context manager ``torch.nn.attention.sdpa_kernel`` restricts the choice, and the call
# raises an error when nothing allowed can run.

import warnings

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# (N, H, L, D)
q, k, v = (torch.randn(N, H, L, E // H, device=device) for _ in range(3))
backends = [
    SDPBackend.MATH,
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.CUDNN_ATTENTION,
]
attention_gflop = 4 * N * H * L * L * (E // H) / 1e9
with torch.inference_mode():
    default_out = F.scaled_dot_product_attention(q, k, v)
    outputs, backend_ms = {}, {}
    for backend in backends:
        try:
            with sdpa_kernel(backend), warnings.catch_warnings():
                # torch explains each refusal in a warning
                warnings.simplefilter("ignore")
                outputs[backend.name] = F.scaled_dot_product_attention(q, k, v)
                backend_ms[backend.name] = median_ms(
                    F.scaled_dot_product_attention, q, k, v
                )
        except RuntimeError:
            print(f"{backend.name:>19}: cannot run here")
            continue
        rate = attention_gflop / backend_ms[backend.name] * 1e3
        print(
            f"{backend.name:>19}: {backend_ms[backend.name]:6.2f} ms ({rate:4.0f} "
            "GFLOP/s)"
        )

chosen = [name for name, out in outputs.items() if torch.equal(out, default_out)]
print(
    f"the default's output is bit for bit the output of: {', '.join(chosen) or 'none'}"
)
for name, out in outputs.items():
    if name != "MATH":
        print(
            f"{name:>19} vs MATH: largest difference "
            f"{(out - outputs['MATH']).abs().max():.1e}"
        )

# sphinx_gallery_start_ignore
assert "MATH" in outputs
assert device.type == "cuda" or (
    "FLASH_ATTENTION" in outputs and chosen == ["FLASH_ATTENTION"]
)
for out in outputs.values():
    assert torch.allclose(out, outputs["MATH"], atol=1e-4)
# sphinx_gallery_end_ignore

# %%
# The lines above list which backends run on this device and which one the default
# picked (the backend whose output is identical to the default's, bit for bit). The
# backends agree to float32 rounding, not exactly: each adds the same numbers in a
# different order.
#
# The cost of ``need_weights=True``
# ---------------------------------
#
# A fused kernel never builds the :math:`(N, H, L, S)` weights, so it cannot return
# them. Asking for them (``need_weights=True``, the default of both
# ``nn.MultiheadAttention`` and the modules of this package) switches to a path that
# materialises them. For :class:`attention.FusedMultiHeadAttention` that is
# :func:`attention.scaled_dot_product_attention`; ``nn.MultiheadAttention`` also
# averages them over the heads unless told otherwise.

weights_mib = N * H * L * L * 4 / 2**20
print(
    f"the weights of one call: (N, H, L, L) = {(N, H, L, L)} floats, {weights_mib:.0f} "
    "MiB"
)

calls = {
    "Fused, need_weights=False": lambda x: fused(x, need_weights=False),
    "Fused, need_weights=True": lambda x: fused(x, need_weights=True),
    "nn.MHA, need_weights=False": lambda x: torch_mha(x, x, x, need_weights=False),
    "nn.MHA, need_weights=True": lambda x: torch_mha(x, x, x, need_weights=True),
}
with torch.inference_mode():
    module_ms = {name: median_ms(call, x) for name, call in calls.items()}
module_gflop = (4 * 2 * N * L * E * E + 4 * N * H * L * L * (E // H)) / 1e9
for name, ms in module_ms.items():
    print(f"{name:>27}: {ms:6.2f} ms ({module_gflop / ms * 1e3:4.0f} GFLOP/s)")

# sphinx_gallery_start_ignore
with torch.inference_mode():
    assert torch.allclose(fused(x, need_weights=False)[0], fused(x)[0], atol=1e-5)
    assert torch.allclose(fused(x)[0], torch_mha(x, x, x)[0], atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# The same four measurements as a figure:

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7.5, 3.2), layout="constrained")
names = list(module_ms)
# Blue and orange (Okabe and Ito's palette): told apart with any colour vision.
bars = ax.barh(
    names, [module_ms[name] for name in names], color=["#0072b2", "#e69f00"] * 2
)
_ = ax.bar_label(bars, fmt="%.1f ms", padding=3)
ax.invert_yaxis()
ax.margins(x=0.2)
ax.set_xlabel("median time per call (ms)")
_ = ax.set_title(f"One call of multi-head attention, on {device}")

# %%
# With ``need_weights=True`` every call must return the weights whose size is printed
# above, so they are written to memory in full.
# :class:`attention.FusedMultiHeadAttention` with ``False`` runs the fused kernel, which
# keeps one block of scores at a time; ``nn.MultiheadAttention`` with ``False`` skips
# returning them, though its own inference path may still build them inside. The blue
# bars are the calls to use whenever the weights are not needed (training, inference);
# the orange ones are for looking at attention, as
# :ref:`sphx_glr_tutorials_08_visualising_attention.py` does.
#
# Lower precision: bfloat16 and float16
# -------------------------------------
#
# Matrix units compute faster in 16-bit formats. ``torch.autocast`` runs the matrix
# products of a region in a lower precision while keeping the parameters in float32.
# bfloat16 keeps float32's range with 8 bits of mantissa (about 3 significant digits);
# float16 has 11 bits of mantissa but a range that ends at 65504. On the CPU the page
# tries bfloat16, the format that CPU matrix units support; on a GPU, both. The error is
# measured against the same module and input in float64. (On a processor with matrix
# units run at a lower ``ATEN_CPU_CAPABILITY``, PyTorch's fused bfloat16 kernel refuses
# to run; the output then says so, and the math kernel is timed instead.)

import contextlib
import functools

reference_module = FusedMultiHeadAttention.from_torch(torch_mha).double()
with torch.inference_mode():
    # (N, L, E) in float64
    expected = reference_module(x.double(), need_weights=False)[0]

precisions = [torch.float32, torch.bfloat16]
if device.type == "cuda":
    precisions.append(torch.float16)
print(f"FusedMultiHeadAttention on {device}, (N, L, E, H) = {(N, L, E, H)}")
errors = {}
for dtype in precisions:
    label = (
        "float32" if dtype == torch.float32 else f"autocast {str(dtype).split('.')[-1]}"
    )

    def run(x, dtype=dtype, math_kernel=False):
        with (
            torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32),
            sdpa_kernel(SDPBackend.MATH) if math_kernel else contextlib.nullcontext(),
        ):
            return fused(x, need_weights=False)[0]

    with torch.inference_mode():
        try:
            out = run(x)
        except RuntimeError as error:
            # PyTorch's CPU kernel for bfloat16 uses the matrix units (AMX) wherever the
            # processor has them, and then needs ATen's AVX-512 code: with a lower
            # ATEN_CPU_CAPABILITY it refuses. The math kernel has no such need.
            print(f"  {label:>17}: the fused kernel refused ({error}); math kernel:")
            run = functools.partial(run, math_kernel=True)
            out = run(x)
        ms = median_ms(run, x)
    errors[dtype] = (
        (out.double() - expected).abs().max() / expected.abs().max()
    ).item()
    print(f"  {label:>17}: {ms:6.2f} ms, output {out.dtype}, error {errors[dtype]:.1e}")

# sphinx_gallery_start_ignore
claim("float32 error", errors[torch.float32], below=1e-5)
claim(
    "autocast, smallest error",
    min(errors[dtype] for dtype in precisions[1:]),
    above=1e-4,
)
claim(
    "autocast, largest error",
    max(errors[dtype] for dtype in precisions[1:]),
    below=5e-2,
)
# sphinx_gallery_end_ignore

# %%
# The error column is the largest difference from float64, relative to the largest
# output: float32 agrees to 5 digits or more, the 16-bit formats measured here (bfloat16
# on a CPU, float16 as well on a GPU) to about 2 or 3 (the values printed above). That
# is the usual trade for training and inference, not for checking a model against a
# reference, which this site does in float64. Whether the 16-bit formats are also faster
# depends on the hardware: the times above say what they are on this one.
#
# Recorded results on a GPU
# -------------------------
#
# ``python -m benchmarks --gpu`` measures attention on a CUDA GPU in bfloat16 and
# float16 up to L = 16384, with CUDA events as above, and records each row with the
# device, the torch version and the date in ``benchmarks/results/gpu-<date>.csv``. Rates
# use the count of FlashAttention-2 :cite:p:`dao2023`: :math:`4NHLSD` for the forward
# pass, halved when causal.
# When such a file is in this checkout, the newest one is plotted here (otherwise the
# line below says that there is none); the page's own measurements above are unaffected
# by it.

import csv
from pathlib import Path

folders = [
    Path.cwd() / "benchmarks" / "results",
    Path.cwd().parent / "benchmarks" / "results",
]
recorded = sorted(
    p for folder in folders if folder.is_dir() for p in folder.glob("gpu-2*.csv")
)
rows = []
if recorded:
    with open(recorded[-1], newline="") as f:
        rows = [
            row
            for row in csv.DictReader(f)
            if (row["suite"], row["impl"], row["mode"], row["status"])
            == ("attention", "sdpa", "fwd", "ok")
        ]

if rows:
    meta = rows[0]
    caption = f"{meta['device']}, torch {meta['torch']}, measured {meta['date'][:10]}"
    print(f"recorded in benchmarks/results/{recorded[-1].name}: {caption}")
    fig, ax = plt.subplots(figsize=(8, 4.6), layout="constrained")
    curves = sorted({(row["dtype"], int(row["D"])) for row in rows})
    okabe_ito = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00"]
    for color, (dtype, D) in zip(okabe_ito, curves, strict=False):
        for causal in ("False", "True"):
            curve = sorted(
                (int(r["L"]), float(r["tflops"]))
                for r in rows
                if (r["dtype"], int(r["D"]), r["causal"]) == (dtype, D, causal)
            )
            if curve:
                Ls, rates = zip(*curve, strict=True)
                label = f"{dtype}, D = {D}" + (", causal" if causal == "True" else "")
                style = "--" if causal == "True" else "-"
                ax.plot(Ls, rates, style, color=color, marker="o", label=label)
    lengths = sorted({int(row["L"]) for row in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(L) for L in lengths])
    ax.set_xlabel("sequence length L = S")
    ax.set_ylabel("TFLOP/s (FlashAttention-2 count)")
    ax.set_title(f"F.scaled_dot_product_attention, forward\n{caption}")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    print("the figure shows the recorded rates; they were not measured by this page")
else:
    print(
        "No GPU results are recorded in benchmarks/results/ of this checkout, so "
        "this section has no figure; `python -m benchmarks --gpu` on a CUDA GPU "
        "records them."
    )

# %%
# What to remember
# ----------------
#
# - Time after a warm-up, synchronise a GPU (or time it with CUDA events), repeat and
#   take the median; print the device and versions with every number, and divide the
#   work by the time to compare with what the hardware's matmul reaches.
# - One :math:`(3E, E)` projection does the work of three :math:`(E, E)` ones in one
#   call.
# - ``F.scaled_dot_product_attention`` picks among several kernels; ``sdpa_kernel``
#   shows which exist on a device. Only the ``MATH`` path materialises the weights.
# - ``need_weights=True`` costs a full :math:`(N, H, L, S)` tensor per call: ask for it
#   only to look at the weights.
# - Autocast to bfloat16 (or float16 on a GPU) trades digits of accuracy (the errors
#   printed above) for speed where the hardware has 16-bit matrix units.
#
# API used on this page: :class:`attention.MultiHeadAttention`,
# :class:`attention.FusedMultiHeadAttention` and
# :func:`attention.scaled_dot_product_attention`.

# %%
# Exercises
# ---------
#
# 1. **Count the operations with PyTorch's counter.**
#    ``torch.utils.flop_counter.FlopCounterMode`` adds up the floating-point operations
#    of the matrix products that run inside it. Count those of one call of
#    ``fused(x, need_weights=True)`` and compare with the page's formula,
#    :math:`4 \cdot 2NLE^2 + 4NHL^2D` (``module_gflop``). Which term is larger here?
# 2. **How far bfloat16 rounds.** bfloat16 keeps 8 significant bits, so rounding to
#    the nearest bfloat16 moves a number by at most :math:`2^{-8}` of its size. Round
#    ``x`` to bfloat16 and back and find the largest relative change. How does it
#    compare with the error of autocast bfloat16 printed above?
# 3. **The readable path, timed.** Time ``separate`` (the package's readable
#    :class:`attention.MultiHeadAttention`, which always computes the weights) and
#    ``fused`` with ``need_weights=False``, with ``median_ms``, and compare the ratio
#    with the one of the projections. Check first that the two give the same output.

# %%
# .. solution 1
#
# The counter sees the four projections and the two products of attention, and adds
# exactly what the formula says. At :math:`L = E = 512` the projections,
# :math:`8NLE^2`, outweigh attention's :math:`4NHL^2D = 4NL^2E`, since
# :math:`2E > L`.

from torch.utils.flop_counter import FlopCounterMode

with torch.inference_mode(), FlopCounterMode(display=False) as counter:
    _ = fused(x, need_weights=True)
projections_flop = 4 * 2 * N * L * E * E
attention_flop = 4 * N * H * L * L * (E // H)
print(
    f"FlopCounterMode: {counter.get_total_flops() / 1e9:.3f} GFLOP; formula: "
    f"{module_gflop:.3f} GFLOP ({projections_flop / 1e9:.3f} in the projections, "
    f"{attention_flop / 1e9:.3f} in attention)"
)
assert counter.get_total_flops() == projections_flop + attention_flop
assert round(module_gflop * 1e9) == projections_flop + attention_flop

# %%
# .. solution 2
#
# The largest relative change stays under :math:`2^{-8} \approx 0.0039`, half of
# ``torch.finfo(torch.bfloat16).eps``. Autocast's error above is made of such
# roundings, of the inputs, the weights and the intermediate results, carried through
# the module.

x_cpu = x.cpu()
rounded = x_cpu.to(torch.bfloat16).float()  # (N, L, E)
nonzero = x_cpu != 0
relative = ((rounded - x_cpu).abs() / x_cpu.abs())[nonzero]
print(
    f"largest relative change from rounding to bfloat16: {relative.max():.5f} "
    f"(bound 2**-8 = {2**-8:.5f}, finfo eps / 2 = "
    f"{torch.finfo(torch.bfloat16).eps / 2:.5f})"
)
assert torch.finfo(torch.bfloat16).eps == 2**-7
assert relative.max() <= 2**-8

# %%
# .. solution 3
#
# The output is the same to float32 rounding; the time is not. The ratio printed here
# depends on the device and on ``L``: the readable path writes the
# :math:`(N, H, L, L)` weights that the fused kernel never builds.

with torch.inference_mode():
    readable_out = separate(x, need_weights=False)[0]
    fused_out = fused(x, need_weights=False)[0]
    readable_ms = median_ms(lambda x: separate(x, need_weights=False), x)
    fused_ms = median_ms(lambda x: fused(x, need_weights=False), x)
print(
    f"on {device}, torch {torch.__version__}: readable {readable_ms:.2f} ms, fused "
    f"{fused_ms:.2f} ms, fused / readable {fused_ms / readable_ms:.2f} (projections, "
    f"one / three: {one_ms / three_ms:.2f})"
)
assert torch.allclose(readable_out, fused_out, atol=1e-5)

# %%
# Previous: :ref:`sphx_glr_tutorials_11_classifier.py`. Next:
# :ref:`sphx_glr_tutorials_13_memory_efficient.py` opens the fused kernel: how attention
# can be computed without ever holding the :math:`(L, S)` matrix.

# sphinx_gallery_thumbnail_number = 1
