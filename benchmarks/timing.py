"""How the benchmarks time code and count its work.

- On the CPU, :func:`interleaved` times every candidate of one case in turn, for a few rounds,
  with ``torch.utils.benchmark`` (``blocked_autorange``: warm-up, then blocks of runs long
  enough for the clock), and keeps the median of all the runs. Interleaving matters on a shared
  machine: a burst of load slows every candidate of the round, not only the one that was
  running, so the ratios between candidates stay meaningful even when absolute times move.
- On a GPU, :func:`cuda_times` records a pair of CUDA events around each call after a warm-up and
  synchronises once at the end: the events measure the kernels on the device, not the Python
  that queued them.
- FLOPs follow FlashAttention-2's count: a forward pass of attention does two matmuls of
  ``2 * L * S * D`` operations per head (``4 * N * H * L * S * D``), half of it when causal; a
  backward pass counts as 2.5 forward passes. A module's forward adds its four projections, and
  its training step (forward and backward, the backward computing the gradients of the inputs
  and of the weights) counts as 3 forward passes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.utils import benchmark


@dataclass
class Timing:
    """The runs of one candidate: median and interquartile range in seconds, and on the CPU the
    median of each interleaved round, in the order the rounds ran."""

    median: float
    iqr: float
    runs: int
    round_medians: tuple[float, ...] = ()

    def cells(self) -> dict[str, float | int]:
        """The columns every results row gives a timing: median and IQR in ms, and the runs."""
        return {"median_ms": self.median * 1e3, "iqr_ms": self.iqr * 1e3, "runs": self.runs}


def interleaved(
    cases: dict[str, Callable[[], object]], *, rounds: int = 3, min_run_time: float = 0.5
) -> dict[str, Timing]:
    """Time each callable on the CPU, in turn, ``rounds`` times; the order rotates each round."""
    threads = torch.get_num_threads()  # Timer would otherwise run single-threaded
    timers = {
        name: benchmark.Timer("fn()", globals={"fn": fn}, num_threads=threads, label=name)
        for name, fn in cases.items()
    }
    runs: dict[str, list[float]] = {name: [] for name in cases}
    per_round: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            measurement = timers[name].blocked_autorange(min_run_time=min_run_time)
            runs[name] += measurement.times
            per_round[name].append(measurement.median)
    return {name: summarise(runs[name], per_round[name]) for name in cases}


def cuda_times(fn: Callable[[], object], *, warmup: int = 5, reps: int = 20) -> Timing:
    """Time ``fn`` on the current CUDA device with events: warm up, record, synchronise once."""
    for _ in range(warmup):  # first calls pick kernels, allocate, fill caches
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()  # wait for every kernel before reading the events
    seconds = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]  # ms -> s
    return summarise(seconds)


def summarise(times: list[float], round_medians: Sequence[float] = ()) -> Timing:
    """Median and interquartile range of per-run times in seconds."""
    if len(times) < 2:
        return Timing(times[0], 0.0, len(times), tuple(round_medians))
    q1, _, q3 = statistics.quantiles(times, n=4)
    return Timing(statistics.median(times), q3 - q1, len(times), tuple(round_medians))


def round_ratios(candidate: Timing, baseline: Timing) -> list[float]:
    """The time ratio of ``candidate`` to ``baseline`` in each round of one :func:`interleaved`
    run. A round times the two within seconds of each other, under much the same load: ratios
    that stay on one side of 1 show a real difference, ratios that straddle 1 are noise."""
    return [c / b for c, b in zip(candidate.round_medians, baseline.round_medians, strict=True)]


def attention_flops(N: int, H: int, L: int, S: int, D: int, *, causal: bool = False) -> float:
    """Forward FLOPs of attention (FlashAttention-2's count): ``4 N H L S D``, halved if causal."""
    flops = 4 * N * H * L * S * D  # Q K^T and P V: 2 L S D each per head
    return flops / 2 if causal else flops


def mha_flops(
    N: int, L: int, S: int, E: int, H: int, *, training: bool = False, recompute: bool = False
) -> float:
    """FLOPs of a multi-head attention module: projections plus attention; training = 3x.

    ``recompute=True`` counts a training step's attention as FlashAttention-2 does for its
    kernels, whose backward recomputes :math:`QK^\\top`: forward plus 2.5 forwards, not 3x.
    """
    projections = 2 * N * L * E * E * 2 + 2 * N * S * E * E * 2  # q, out on L rows; k, v on S
    attention = attention_flops(N, H, L, S, E // H)
    if not training:
        return projections + attention
    return 3 * projections + (3.5 if recompute else 3) * attention


def matmul_case(n: int = 2048, *, device=None, dtype=torch.float32):
    """A square ``(n, n) @ (n, n)`` product and its FLOPs: what the hardware can do."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return (lambda: a @ b), 2 * n**3


def module_step(m: torch.nn.Module, call: Callable, x: torch.Tensor, mode: str) -> Callable:
    """A function of no arguments that runs ``call(m, x)`` once: an inference pass, or for
    ``mode="training"`` a forward and backward pass to the input and every parameter."""
    if mode == "inference":
        m.eval()

        def step():
            with torch.inference_mode():
                return call(m, x)

        return step
    m.train()  # dropout is 0: train() changes the code path, not the result
    xg = x.clone().requires_grad_()
    inputs, grad = [xg, *m.parameters()], torch.randn_like(x)
    return lambda: torch.autograd.grad(call(m, xg), inputs, grad)
