"""
Performance: what attention costs, and how to time it
=====================================================

.. prerequisites:: 04_multi_head
   :summary: Timing attention honestly: projections against the quadratic core, bfloat16
      against float32, asking for weights, and a causal mask as a flag or a tensor.

The earlier pages made attention correct; this one measures what it costs. It times one
multi-head attention call in two parts, the projections and the attention core, over a
sweep of sequence lengths; compares bfloat16 with float32; shows what asking for the
weights costs; and times a causal mask given as a flag and as a tensor, two of the forms
that :ref:`page 6 <sphx_glr_tutorials_1_foundations_06_mask_conventions.py>` compares.

Every time on the page, but the two stopwatch readings of the section on timing a GPU,
comes from one timer, :func:`attention.measure.compare`, and is printed with the device
it ran on. The site is built on a CPU: the section on timing a GPU runs only where there
is one. ``make bench`` runs the larger benchmark behind the page.
"""

# %%
# One timer
# ---------
#
# Four things go wrong when timing PyTorch code with a stopwatch around one call:
#
# 1. **Warm-up.** The first call pays one-off costs: memory allocation, choosing a
#    kernel, filling caches (and, on a GPU, initialising CUDA). Time later calls.
# 2. **Synchronisation.** A GPU runs asynchronously: a call returns as soon as its
#    kernels are queued. A stopwatch on the CPU measures the queueing unless it waits
#    for the GPU; the section on timing a GPU, below, shows how to time the kernels.
# 3. **Noise.** Other programs, frequency changes and the memory system make each run
#    differ. Repeat, report the **median** (one slow outlier cannot move it) with the
#    spread, and compare candidates measured side by side.
# 4. **Scale.** A time alone says little. Divide the number of floating-point operations
#    by it (FLOP/s) and compare with what a large matrix product reaches on the same
#    device.
#
# :func:`attention.measure.compare` handles the first three. It times each candidate
# in turn, for a few rounds, rotating the order every round; on the CPU each round is a
# ``torch.utils.benchmark`` ``blocked_autorange`` (a warm-up, then blocks of calls long
# enough for the clock). A burst of load from another program slows every candidate of
# the round it falls in, so the ratio of two candidates *within a round* stays
# meaningful when absolute times move, and :func:`attention.measure.round_ratios` gives
# those ratios:
#
# .. literalinclude:: ../../../attention/measure.py
#    :language: python
#    :pyobject: compare
#    :no-docstring:
#
# A timing printed whole shows its median, its interquartile range (IQR: the spread of
# the middle half of its runs) and the number of runs; the sweep's table prints medians
# only. The machine that builds this site is small and shared, so every measurement on
# this page runs on one thread (``attention.repro.num_threads(1)``), where the threads
# of one measurement cannot wait for each other. Each table starts with
# :func:`attention.measure.device_description`: the device, the threads, the dtype and
# torch's version.

import torch

from attention.measure import compare, device_description, round_ratios
from attention.repro import default_device, num_threads, seed_everything

device = default_device()  # ATTENTION_DEVICE, else a GPU if there is one, else the CPU
seed = seed_everything()  # ATTENTION_SEED, default 0
with num_threads(1):
    print(device_description(device, torch.float32))

# %%
# The quadratic term
# ------------------
#
# A product of an :math:`(n, k)` and a :math:`(k, m)` matrix costs :math:`2nkm`
# operations. One call of multi-head attention on :math:`(N, L, E)` inputs does two
# kinds of products:
#
# - the **projections**: the packed :math:`(3E, E)` input projection and the
#   :math:`(E, E)` output projection, :math:`8NLE^2` operations, linear in L;
# - the **attention core**: :math:`QK^\top` and the weighted sum of the values, each
#   :math:`2LSD` per head, :math:`4NL^2E` operations for self-attention, quadratic in L.
#
# The core's arithmetic is :math:`4NL^2E / 8NLE^2 = L / 2E` times the projections':
# the two are equal at :math:`L = 2E`. The sweep below times the two parts of what
# :class:`attention.FusedMultiHeadAttention` computes, with its own layers: the
# projections, and the core as it runs it, in PyTorch's fused kernel
# ``F.scaled_dot_product_attention`` (the reshapes and copies between them are left
# out). :math:`E = 256` and 4 heads, L from 128 to 2048, each length in one
# :func:`~attention.measure.compare` call.

import torch.nn.functional as F
from torch import nn

from attention import FusedMultiHeadAttention

E, H = 256, 4
torch.manual_seed(seed)
torch_mha = nn.MultiheadAttention(E, H, batch_first=True, device=device).eval()
fused = FusedMultiHeadAttention.from_torch(torch_mha).eval()
lengths = [128, 256, 512, 1024, 2048]


def parts(L):
    """The projections and the attention core of one call on a (1, L, E) input."""
    x = torch.randn(1, L, E, device=device)  # (N, L, E)
    q, k, v = (
        fused.qkv_proj(x).view(1, L, 3, H, E // H).permute(2, 0, 3, 1, 4).contiguous()
    )  # (N, L, 3E) -> (3, N, H, L, D), then q, k, v: (N, H, L, D) each
    heads_out = torch.randn(1, L, E, device=device)  # the heads' outputs  (N, L, E)

    def projections():
        qkv = fused.qkv_proj(x)  # (N, L, E) @ (E, 3E) -> (N, L, 3E)
        return qkv, fused.out_proj(heads_out)  # (N, L, E) @ (E, E) -> (N, L, E)

    def core():
        # (N, H, L, D) @ (N, H, D, L) -> (N, H, L, L), @ (N, H, L, D) -> (N, H, L, D)
        return F.scaled_dot_product_attention(q, k, v)

    return {"projections": projections, "attention core": core}


sweep = {}
with num_threads(1), torch.inference_mode():
    print(device_description(device, torch.float32), f"N = 1, E = {E}, H = {H}")
    print("      L  projections ms  core ms  core / projections  its FLOP ratio")
    for L in lengths:
        sweep[L] = compare(parts(L), rounds=3, min_run_time=0.05, device=device)
        per_round = round_ratios(sweep[L]["attention core"], sweep[L]["projections"])
        print(
            f"  {L:>5}  {sweep[L]['projections'].ms:14.3f}  "
            f"{sweep[L]['attention core'].ms:7.3f}  "
            f"{min(per_round):7.2f} to {max(per_round):5.2f}  {L / (2 * E):14.2f}"
        )

# %%
# ``core / projections`` is the ratio of the two times in each of the three rounds
# (lowest to highest), next to the ratio of their arithmetic. The figure puts the two
# parts on logarithmic axes, where a cost proportional to :math:`L^p` is a line of
# slope :math:`p`:

# sphinx_gallery_start_ignore
# the figure's code: the two parts' medians against L
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
for name, marker in (("projections", "o"), ("attention core", "s")):
    ax.plot(lengths, [sweep[L][name].ms for L in lengths], marker=marker, label=name)
ax.set_xscale("log", base=2)
ax.set_xticks(lengths, [str(L) for L in lengths])
ax.set_yscale("log")
ax.set_xlabel("sequence length L")
ax.set_ylabel("median time per call (ms)")
ax.set_title(f"One attention call in two parts ({device}, E = {E}, one thread)")
_ = ax.legend()
# sphinx_gallery_end_ignore

# %%
# Each time the length doubles, the projections do twice the arithmetic and the core
# four times as much: over the sweep's four doublings, 16 and 256 times. How much each
# part's time grew over the whole sweep, and the rate each part ran at, length by length
# (its operations divided by its median time; a rate out of line with its neighbours'
# marks a length whose rounds ran slow):

with num_threads(1):
    print(device_description(device, torch.float32))
shortest, longest = lengths[0], lengths[-1]
factor = longest // shortest  # 16
for name, work in (("projections", factor), ("attention core", factor**2)):
    growth = sweep[longest][name].median / sweep[shortest][name].median
    print(
        f"  {name:<14}: time x{growth:.1f} from L = {shortest} to {longest} "
        f"(arithmetic x{work})"
    )
for L in lengths:
    projection_rate = 8 * L * E * E / sweep[L]["projections"].median / 1e9
    core_rate = 4 * L * L * E / sweep[L]["attention core"].median / 1e9
    print(
        f"  L = {L:>4}: projections {projection_rate:5.1f} GFLOP/s, "
        f"attention core {core_rate:5.1f} GFLOP/s"
    )

# %%
# The core's time grew far more than the projections' over the sweep (the two ``time x``
# lines), and in the figure its line is the steeper one. The crossing in *time* need not
# sit at :math:`L = 2E`, where the arithmetic crosses: the two parts do not run at the
# same rate, and the rates above say how far apart they are on this device. A fixed cost
# per call (Python, dispatch), which no FLOP count includes, would lower a part's rate
# at the short lengths: the rates at :math:`L = 128` against those at 2048 say whether
# it does here.
#
# bfloat16 against float32
# ------------------------
#
# Matrix units compute faster in 16-bit formats where the hardware has them.
# ``torch.autocast`` runs the matrix products of a region in a lower precision while
# keeping the parameters in float32. bfloat16 keeps float32's range with 7 stored bits
# of mantissa, 8 significant bits with the implicit leading 1: about 2.4 significant
# decimal digits (:math:`8 \log_{10} 2`). Here the same module call at L = 1024 and a
# square matrix product are timed in float32 and under autocast to bfloat16, all four in
# the same rounds, and the module's output is compared with the same module in float64.
# (ATen, PyTorch's C++ operator library, picks its CPU kernels by the processor's
# instruction set, or a lower one named by ``ATEN_CPU_CAPABILITY``. Where the fused
# bfloat16 kernel needs AVX-512 and a lower one is named, it refuses; the output says
# so, and the math kernel is timed instead.)

import contextlib
import functools
from pathlib import Path

from torch.nn.attention import SDPBackend, sdpa_kernel

x = torch.randn(1, 1024, E, device=device)  # (N, L, E)
a, b = (torch.randn(1024, 1024, device=device) for _ in range(2))


def module_call(x, dtype, math_kernel=False):
    with (
        torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32),
        sdpa_kernel(SDPBackend.MATH) if math_kernel else contextlib.nullcontext(),
    ):
        return fused(x, need_weights=False)[0]  # (N, L, E)


def matmul(dtype):
    with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
        return a @ b  # (1024, 1024) @ (1024, 1024) -> (1024, 1024)


with torch.inference_mode():
    expected = FusedMultiHeadAttention.from_torch(torch_mha).double()(
        x.double(), need_weights=False
    )[0]  # (N, L, E) in float64
    try:
        _ = module_call(x, torch.bfloat16)
    except RuntimeError as error:  # with ATen below AVX-512 (see above)
        print(f"the fused bfloat16 kernel refused ({error}); the math kernel runs")
        module_call = functools.partial(module_call, math_kernel=True)
    errors = {
        dtype: (
            (module_call(x, dtype).double() - expected).abs().max()
            / expected.abs().max()
        ).item()
        for dtype in (torch.float32, torch.bfloat16)
    }
    with num_threads(1):
        precision = compare(
            {
                "module, float32": lambda: module_call(x, torch.float32),
                "module, bfloat16": lambda: module_call(x, torch.bfloat16),
                "matmul, float32": lambda: matmul(torch.float32),
                "matmul, bfloat16": lambda: matmul(torch.bfloat16),
            },
            rounds=3,
            min_run_time=0.1,
            device=device,
        )
        print(device_description(device), "float32 and autocast to bfloat16")
for name, timing in precision.items():
    print(f"  {name:<17} {timing}")
for what in ("module", "matmul"):
    ratios = round_ratios(precision[f"{what}, bfloat16"], precision[f"{what}, float32"])
    print(
        f"  {what}: bfloat16 / float32, round by round: {[round(r, 2) for r in ratios]}"
    )
for dtype, error in errors.items():
    print(f"  module output, {str(dtype)[6:]:>8}: error {error:.1e} against float64")
cpuinfo = Path("/proc/cpuinfo")  # Linux; elsewhere the line says it cannot tell
flags = set(cpuinfo.read_text().split()) if cpuinfo.exists() else None
native = "unknown" if flags is None else sorted(flags & {"avx512_bf16", "amx_bf16"})
print(
    f"  bfloat16 instructions of this processor: {native or 'none'}; "
    f"ATen kernels: {torch.backends.cpu.get_cpu_capability()}"
)

# sphinx_gallery_start_ignore
from attention.repro import claim

# the bounds the prose below rests on
claim("float32 error", errors[torch.float32], below=1e-5)
claim("bfloat16 error", errors[torch.bfloat16], above=1e-4, below=5e-2)
# sphinx_gallery_end_ignore

# %%
# The error lines are the largest difference from float64, relative to the largest
# output: float32 agrees to 5 digits or more, bfloat16 to about 2 or 3. That is the
# usual trade for training and inference, not for checking a model against a
# reference, which this site does in float64. Whether bfloat16 is also *faster* is the
# hardware's answer, not the format's: the round-by-round ratios above give it for this
# device, and a ratio below 1 in every round is a real speed-up, one that straddles 1
# is noise. A processor multiplies bfloat16 fast only with instructions made for it (on
# x86, AVX512-BF16 or AMX, Intel's Advanced Matrix Extensions; the last line names
# those this one reports). Without them the product runs in code that is not tuned for
# it and can take many times as long as in float32: a ratio far above 1 in every round
# says that, not noise.
#
# The cost of ``need_weights=True``
# ---------------------------------
#
# A fused kernel never builds the :math:`(N, H, L, S)` weights, so it cannot return
# them. Both ``nn.MultiheadAttention`` and this package's ``MultiHeadAttention`` and
# ``FusedMultiHeadAttention`` return them by default (``need_weights=True``); its
# decoder and block modules do not. Four calls on the same :math:`(2, 512, 256)` input,
# in the same rounds:

weights_mib = 2 * H * 512 * 512 * 4 / 2**20
x = torch.randn(2, 512, E, device=device)  # (N, L, E)
calls = {
    "Fused, need_weights=False": lambda: fused(x, need_weights=False),
    "Fused, need_weights=True": lambda: fused(x, need_weights=True),
    "nn.MHA, need_weights=False": lambda: torch_mha(x, x, x, need_weights=False),
    "nn.MHA, need_weights=True": lambda: torch_mha(x, x, x, need_weights=True),
}
with num_threads(1), torch.inference_mode():
    module_times = compare(calls, rounds=3, min_run_time=0.1, device=device)
    print(device_description(device, torch.float32), "(N, L, E) = (2, 512, 256)")
for name, timing in module_times.items():
    print(f"  {name:<27} {timing}")
for who in ("Fused", "nn.MHA"):
    ratios = round_ratios(
        module_times[f"{who}, need_weights=True"],
        module_times[f"{who}, need_weights=False"],
    )
    print(f"  {who}: True / False, round by round: {[round(r, 2) for r in ratios]}")
print(
    f"the weights of one call: (N, H, L, S) = (2, {H}, 512, 512), {weights_mib:.0f} MiB"
)

# sphinx_gallery_start_ignore
with torch.inference_mode():
    assert torch.allclose(fused(x, need_weights=False)[0], fused(x)[0], atol=1e-5)
    assert torch.allclose(fused(x)[0], torch_mha(x, x, x)[0], atol=1e-5)
# sphinx_gallery_end_ignore

# %%
# Why the two modules react differently is in the kernels each call runs.
# ``torch.profiler`` records them; the lines below say, for each call, whether a
# softmax kernel ran (the weights were built) and whether one of SDPA's fused kernels
# ran (on a CPU, the flash kernel):

from torch.profiler import profile

ran = {}
with torch.inference_mode():
    for name, call in calls.items():
        with profile() as prof:
            call()
        kernels = {event.key for event in prof.key_averages()}
        softmax = "aten::_softmax" in kernels
        fused_kernel = any(
            kernel.startswith("aten::_scaled_dot_product_") and "math" not in kernel
            for kernel in kernels
        )
        ran[name] = softmax, fused_kernel
        print(
            f"  {name:<27} softmax kernel: {softmax!s:>5}, "
            f"fused SDPA kernel: {fused_kernel}"
        )

# sphinx_gallery_start_ignore
# the package's module runs one or the other, as asked
assert ran["Fused, need_weights=True"] == (True, False)
assert ran["Fused, need_weights=False"] == (False, True)
# sphinx_gallery_end_ignore

# %%
# :class:`attention.FusedMultiHeadAttention` runs SDPA's fused kernel with
# ``need_weights=False`` and :func:`attention.scaled_dot_product_attention`, which
# builds the scores and the weights, with ``need_weights=True``: asking for the weights
# changes its whole attention core. ``nn.MultiheadAttention`` in inference takes its C++
# fast path, which on a CPU builds the weights (``bmm`` and ``softmax``) *whether or
# not* they are asked for (its ``need_weights=False`` line ran the softmax kernel too),
# so asking for them only adds their average over the heads. The round-by-round ratios
# above say what each costs in this run. Ask for the weights only to look at them.
#
# A causal mask: the flag or a tensor
# -----------------------------------
#
# ``F.scaled_dot_product_attention`` is one function with several implementations,
# called backends: ``MATH`` (the formula written with ordinary operations, runs
# everywhere), ``FLASH_ATTENTION`` (FlashAttention :cite:p:`dao2022`, the online softmax
# of :ref:`page 18 <sphx_glr_tutorials_5_scale_18_memory_efficient.py>`, on the CPU and
# on recent NVIDIA GPUs), ``EFFICIENT_ATTENTION`` (a memory-efficient kernel for GPUs)
# and ``CUDNN_ATTENTION`` (NVIDIA's cuDNN library). PyTorch takes, in a fixed order of
# preference, the first one that supports the device, dtype and shapes;
# ``torch.nn.attention.sdpa_kernel`` restricts the choice.
#
# Page 6's section :ref:`bottom-right-causal` gave ``F.scaled_dot_product_attention`` a
# causal mask in three forms, which agree wherever each is right: the flag
# ``is_causal=True``, a bool tensor ``attn_mask=causal_mask(L, S)``, and PyTorch's
# ``causal_lower_right(L, S)``, an object that holds only the two lengths. What each
# costs depends on the backend:
#
# - On a CUDA GPU the flash backend takes no ``attn_mask`` tensor: an explicit mask
#   rules it out, and the call falls to the memory-efficient backend, which reads the
#   mask, or to ``MATH``. ``causal_lower_right`` reaches the flash backend as its causal
#   flag, which that backend aligns bottom-right (or the memory-efficient backend's own
#   bottom-right mode): no mask is built.
# - On the CPU the flash backend accepts a mask; when :math:`L \ne S`,
#   ``causal_lower_right`` has no bottom-right flag to use: it builds the same
#   ``(L, S)`` mask at each call and passes it on (see ``CausalBias._dispatch`` in
#   ``torch/nn/attention/bias.py``). The CPU's flash backend runs all three forms (run
#   on a CPU, the page prints it first below, for 2 queries and 6 keys).
#
# A causal mode also saves work. A tile of queries and keys that lies wholly above the
# diagonal holds no pair that may attend: a kernel told that the mask is causal skips
# it, one handed a tensor computes it and masks it afterwards. Counted with the
# package's own tiling (:func:`attention.tiled.tiles`, tiles of 128 by 128; the CPU
# kernel's sizes differ) for 1024 queries and keys:

from attention import causal_mask
from attention.tiled import tiles

# sphinx_gallery_start_ignore
# what the CPU bullet above says
if device.type == "cpu":
    from torch.nn.attention.bias import causal_lower_right

    q_new = torch.randn(1, H, 2, E // H)  # (N, H, L, D)
    k_all, v_all = (torch.randn(1, H, 6, E // H) for _ in range(2))
    for arguments in (
        {"is_causal": True},
        {"attn_mask": causal_mask(2, 6)},
        {"attn_mask": causal_lower_right(2, 6)},
    ):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.no_grad():
            F.scaled_dot_product_attention(q_new, k_all, v_all, **arguments)
    print(
        "the CPU's flash backend ran all three forms (L = 2, S = 6): is_causal=True, "
        "attn_mask=causal_mask(2, 6), attn_mask=causal_lower_right(2, 6)"
    )
# sphinx_gallery_end_ignore
positions = torch.arange(1024)
every_tile = len(tiles(1024, 1024, 128, 128))
causal_tiles = len(tiles(1024, 1024, 128, 128, q_pos=positions, k_pos=positions))
print(f"tiles with a tensor mask: {every_tile}; with the causal mode: {causal_tiles}")
assert (every_tile, causal_tiles) == (8 * 8, 8 * 9 // 2)  # the diagonal's and below

# %%
# Timed on this device with ``L = S = 1024``, where the flag and the tensor are both
# right, on 8 heads of 64, in the same rounds:

q_big, k_big, v_big = (
    torch.randn(1, 8, 1024, 64, device=device) for _ in range(3)
)  # (N, H, L, D) each
mask_big = causal_mask(1024, device=device)  # (L, S)
with num_threads(1), torch.no_grad():
    flag_vs_mask = compare(
        {
            "is_causal=True": lambda: F.scaled_dot_product_attention(
                q_big, k_big, v_big, is_causal=True
            ),
            "attn_mask=causal_mask(1024)": lambda: F.scaled_dot_product_attention(
                q_big, k_big, v_big, attn_mask=mask_big
            ),
        },
        rounds=5,
        min_run_time=0.1,
        device=device,
    )
    print(device_description(device, torch.float32))
for name, timing in flag_vs_mask.items():
    print(f"  {name:<30} {timing}")
mask_over_flag = round_ratios(
    flag_vs_mask["attn_mask=causal_mask(1024)"], flag_vs_mask["is_causal=True"]
)
print("  mask / flag, round by round:", [round(r, 2) for r in mask_over_flag])
print(f"  the mask: {mask_big.numel() * mask_big.element_size():,} bytes")

# %%
# The ratios say, round by round, what the skipped tiles and the mask's bytes were
# worth on this device (above 1: the tensor took longer; a timing is printed, never
# asserted, since a busy machine moves it). With a cache (``L < S``), on the CPU
# ``causal_lower_right`` and the explicit mask do the same work; on a CUDA GPU in half
# precision they do not: ``causal_lower_right`` keeps the flash backend and its skipped
# tiles, and the explicit mask gives up both.
#
# Timing a GPU correctly
# ----------------------
#
# On a GPU, ``a @ b`` returns as soon as the kernel is *queued*: a stopwatch on the CPU
# around it measures microseconds of Python whatever the product costs. Three things
# make a GPU timing right:
#
# 1. **Warm-up**: the first calls initialise CUDA, choose kernels (cuBLAS, cuDNN and
#    SDPA pick one per shape) and grow PyTorch's caching allocator; time the calls after
#    them.
# 2. **Events, not a stopwatch**: ``torch.cuda.Event(enable_timing=True)`` records a
#    timestamp on the GPU's own timeline when the stream reaches it; two events around a
#    call measure the kernels between them, not the Python that queued them.
# 3. **Synchronise before reading**: ``torch.cuda.synchronize()`` waits until the GPU
#    has done everything queued, and only then are the events' times known. One
#    synchronisation after all the calls, not one per call: synchronising inside the
#    loop would time the gaps between kernels too.
#
# :func:`attention.measure.compare` does exactly this for every round when given a CUDA
# ``device``:
#
# .. literalinclude:: ../../../attention/measure.py
#    :language: python
#    :pyobject: _cuda_round
#
# The cell below shows the difference on a GPU: the same product timed with a bare
# stopwatch, with a stopwatch that synchronises, and with events.

import time

if device.type == "cuda":
    a, b = (torch.randn(8192, 8192, device=device) for _ in range(2))
    for _ in range(3):  # warm-up
        _ = a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    _ = a @ b  # returns once the kernel is queued
    queued_ms = (time.perf_counter() - start) * 1e3
    torch.cuda.synchronize()
    start = time.perf_counter()
    _ = a @ b
    torch.cuda.synchronize()  # waits for the kernel
    synced_ms = (time.perf_counter() - start) * 1e3
    events = compare({"matmul": lambda: a @ b}, rounds=1, device=device)["matmul"]
    print(device_description(device, torch.float32), "(8192, 8192) @ (8192, 8192)")
    print(f"  stopwatch, no synchronisation: {queued_ms:8.3f} ms (the queueing)")
    print(f"  stopwatch, synchronised:       {synced_ms:8.3f} ms")
    print(f"  CUDA events (compare):         {events}")
else:
    print(
        f"no CUDA GPU on this machine ({device_description(device)}): nothing was "
        "measured on a GPU; on a machine with one, this cell prints the three timings"
    )

# %%
# Recorded results on a GPU
# -------------------------
#
# ``python -m benchmarks --gpu`` measures attention on a CUDA GPU in bfloat16 and
# float16 up to L = 16384, with CUDA events as above, and records each row with the
# device, the torch version and the date in ``benchmarks/results/gpu-<date>.csv``.
# Rates use the count of FlashAttention-2 :cite:p:`dao2023`: :math:`4NHLSD` for the
# forward pass, halved when causal. When such a file is in this checkout, the newest one
# is plotted here, with where and when it was measured; otherwise the line below says
# that there is none. These are recorded numbers, not measured by this page.

# sphinx_gallery_start_ignore
# reading the newest results file, and its figure
import csv
from pathlib import Path

folders = [p / "benchmarks" / "results" for p in (Path.cwd(), *Path.cwd().parents)]
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
    recorded_lengths = sorted({int(row["L"]) for row in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(recorded_lengths, [str(L) for L in recorded_lengths])
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
# sphinx_gallery_end_ignore

# %%
# What to remember
# ----------------
#
# - Time after a warm-up, repeat and take the median with its spread, and compare
#   candidates in the same interleaved rounds: their round-by-round ratios survive a
#   busy machine that absolute times do not (:func:`attention.measure.compare`).
# - On a GPU, time the kernels with CUDA events after a warm-up, and synchronise once
#   before reading them; a stopwatch around an asynchronous call measures the queueing.
# - One attention call is projections, linear in L, and the attention core, quadratic
#   in L; the core's arithmetic is :math:`L / 2E` times the projections'.
# - bfloat16 gives up digits (the errors printed above); whether it buys speed depends
#   on the hardware's matrix units: measure it against float32 in the same rounds.
# - ``need_weights=True`` moves the package's module off the fused kernel onto the path
#   that builds the :math:`(N, H, L, S)` weights; ``nn.MultiheadAttention``'s CPU fast
#   path builds them either way. Ask for them only to look at them.
# - A causal mask given as a flag lets a kernel skip the tiles above the diagonal; given
#   as a tensor, it is computed and masked. On a CUDA GPU only the flag, or
#   ``causal_lower_right``, keeps the flash backend.
#
# API used on this page: :class:`attention.FusedMultiHeadAttention`,
# :func:`attention.measure.compare`, :func:`attention.measure.round_ratios`,
# :func:`attention.measure.device_description`, :func:`attention.repro.num_threads`,
# :func:`attention.causal_mask` and :func:`attention.tiled.tiles`.

# %%
# Exercises
# ---------
#
# 1. **Count the operations with PyTorch's counter.**
#    ``torch.utils.flop_counter.FlopCounterMode`` adds up the floating-point operations
#    of the matrix products that run inside it. Count those of one call of
#    ``fused(x, need_weights=True)`` on the :math:`(2, 512, 256)` input of the
#    ``need_weights`` section and compare with the formula
#    :math:`8NLE^2 + 4NL^2E`. Which term is larger here?

# %%
# .. solution 1
#
# The counter sees the two projections (the packed :math:`(3E, E)` one is a single
# product that counts as much as three :math:`(E, E)` ones) and the two products of
# attention, and adds exactly what the formula says. At :math:`L = 512 = 2E` the two
# terms are equal.

from torch.utils.flop_counter import FlopCounterMode

N, L = x.shape[:2]
with torch.inference_mode(), FlopCounterMode(display=False) as counter:
    _ = fused(x, need_weights=True)
projections_flop = 8 * N * L * E * E
attention_flop = 4 * N * L * L * E
print(
    f"FlopCounterMode: {counter.get_total_flops() / 1e9:.3f} GFLOP; formula: "
    f"{projections_flop / 1e9:.3f} in the projections + {attention_flop / 1e9:.3f} in "
    "attention"
)
assert counter.get_total_flops() == projections_flop + attention_flop

# %%
# Next: :ref:`sphx_glr_tutorials_5_scale_18_memory_efficient.py` opens the fused
# kernel: how attention can be computed without ever holding the :math:`(L, S)` matrix,
# in the forward pass and in training.

# sphinx_gallery_thumbnail_number = 1
