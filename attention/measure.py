"""Measuring: one timer and one peak-memory meter for the pages, the benchmarks and the tests.

- :func:`compare` times several candidates in interleaved rounds and keeps, for each, the median
  and the spread of its runs. On the CPU each round runs ``torch.utils.benchmark``'s
  ``blocked_autorange`` (a warm-up, then blocks of runs long enough for the clock); on a GPU,
  CUDA events around each call after a warm-up, with one synchronisation at the end, so that
  the kernels are timed and not the Python that queued them. Interleaving matters on a shared
  machine: a burst of load slows every candidate of a round, so the *ratios* stay meaningful
  when absolute times move. :func:`time_it` times one candidate the same way.
- :func:`peak_memory` measures the extra peak memory of one call: on a GPU from PyTorch's
  allocator statistics, on Linux from the process's peak resident memory (``VmHWM``, reset
  through ``/proc/self/clear_refs``), which counts every byte the call touched, whoever
  allocated it.
- :func:`device_description` names what a measurement ran on, for the line printed with it.
"""

from __future__ import annotations

import ctypes
import platform
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ._checks import check_factory, check_int, check_positive

__all__ = ["Timing", "compare", "time_it", "round_ratios", "peak_memory", "device_description"]


@dataclass(frozen=True)
class Timing:
    """The runs of one candidate: median and interquartile range in seconds, the number of
    runs, and the median of each interleaved round in the order the rounds ran.

    Args:
        median (float): the median time of one run, in seconds.
        iqr (float): the interquartile range of the runs, in seconds.
        runs (int): how many runs were timed.
        round_medians (tuple[float, ...]): the median of each round. Default: ``()``.

    Examples::

        >>> print(Timing(0.0123, 0.0004, 30))
        12.3 ms (IQR 0.4 ms, 30 runs)
    """

    median: float
    iqr: float
    runs: int
    round_medians: tuple[float, ...] = ()

    @property
    def ms(self) -> float:
        """The median in milliseconds."""
        return self.median * 1e3

    def __str__(self) -> str:
        return f"{self.ms:.3g} ms (IQR {self.iqr * 1e3:.2g} ms, {self.runs} runs)"


def _summarise(times: list[float], round_medians: tuple[float, ...] = ()) -> Timing:
    if len(times) < 2:
        return Timing(times[0], 0.0, len(times), round_medians)
    q1, _, q3 = statistics.quantiles(times, n=4)
    return Timing(statistics.median(times), q3 - q1, len(times), round_medians)


def _cuda_round(fn: Callable[[], object], warmup: int, reps: int) -> list[float]:
    for _ in range(warmup):  # the first calls pick kernels, allocate, fill caches
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()  # wait for every kernel before reading the events
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends, strict=True)]  # ms -> s


def compare(
    cases: dict[str, Callable[[], object]],
    *,
    rounds: int = 3,
    min_run_time: float = 0.2,
    device=None,
) -> dict[str, Timing]:
    """Time each callable in turn, for ``rounds`` rounds; the order rotates every round.

    Args:
        cases (dict[str, Callable]): the candidates, each a function of no arguments.
        rounds (int): how many times each candidate is timed. Default: ``3``.
        min_run_time (float): seconds each candidate runs per round on the CPU, at most 3600.
            Default: ``0.2``.
        device (torch.device, optional): a CUDA device times with CUDA events. Default: ``None``
            (the CPU).

    Returns:
        dict[str, Timing]: the timing of every candidate, in the order given.

    Examples::

        >>> x = torch.randn(64, 64)
        >>> timings = compare({"matmul": lambda: x @ x, "add": lambda: x + x}, rounds=2,
        ...                   min_run_time=0.01)
        >>> sorted(timings), len(timings["add"].round_medians)
        (['add', 'matmul'], 2)
    """
    from torch.utils import benchmark

    _check_timing(cases, rounds, min_run_time, device)
    cuda = device is not None and torch.device(device).type == "cuda"
    threads = torch.get_num_threads()  # a Timer would otherwise run on one thread
    runs: dict[str, list[float]] = {name: [] for name in cases}
    per_round: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if cuda:
                times = _cuda_round(cases[name], warmup=3, reps=20)
            else:
                timer = benchmark.Timer("fn()", globals={"fn": cases[name]}, num_threads=threads)
                times = timer.blocked_autorange(min_run_time=min_run_time).times
            runs[name] += times
            per_round[name].append(statistics.median(times))
    return {name: _summarise(runs[name], tuple(per_round[name])) for name in cases}


#: The longest ``min_run_time`` :func:`compare` takes, in seconds: an hour per round.
MAX_RUN_TIME = 3600.0


def _check_timing(cases, rounds, min_run_time, device) -> None:
    """The checks of :func:`compare`: a clear error before anything runs."""
    if not isinstance(cases, dict):
        raise TypeError(f"cases must be a dict of name -> callable; got {type(cases).__name__}")
    if not cases:
        raise ValueError("cases must hold at least one candidate; got none")
    for name, fn in cases.items():
        if not callable(fn):
            raise TypeError(f"cases[{name!r}] must be callable; got {type(fn).__name__}")
    check_int(rounds, "rounds")
    check_positive(min_run_time, "min_run_time")
    if min_run_time > MAX_RUN_TIME:
        raise ValueError(f"min_run_time must be at most {MAX_RUN_TIME} s (per candidate and "
                         f"round); got {min_run_time!r}")  # fmt: skip
    check_factory(device, None)
    if device is not None and torch.device(device).type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} is a CUDA device, and CUDA is not available")


def time_it(fn: Callable[[], object], *, rounds: int = 3, min_run_time: float = 0.2, device=None):
    """Time one callable as :func:`compare` does.

    Args:
        fn (Callable): the function of no arguments to time.
        rounds (int): how many times it is timed. Default: ``3``.
        min_run_time (float): seconds it runs per round on the CPU. Default: ``0.2``.
        device (torch.device, optional): a CUDA device times with CUDA events. Default: ``None``.

    Returns:
        Timing: its median, spread and runs.

    Examples::

        >>> x = torch.randn(64, 64)
        >>> time_it(lambda: x @ x, rounds=1, min_run_time=0.01).median > 0
        True
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    return compare({"fn": fn}, rounds=rounds, min_run_time=min_run_time, device=device)["fn"]


def round_ratios(candidate: Timing, baseline: Timing) -> list[float]:
    """The time ratio of ``candidate`` to ``baseline`` in each round of one :func:`compare`.

    Two candidates of a round ran within seconds of each other, under much the same load:
    ratios that stay on one side of 1 show a real difference, ratios that straddle 1 are noise.

    Args:
        candidate (Timing): from one :func:`compare`.
        baseline (Timing): from the same :func:`compare`.

    Returns:
        list[float]: one ratio per round (a baseline round of 0 seconds, which has no ratio,
        is a ``ValueError``).

    Examples::

        >>> round_ratios(Timing(2.0, 0.1, 6, (2.0, 2.2)), Timing(1.0, 0.1, 6, (1.0, 1.1)))
        [2.0, 2.0]
    """
    for name, timing in (("candidate", candidate), ("baseline", baseline)):
        if not isinstance(timing, Timing):
            raise TypeError(f"{name} must be a Timing; got {type(timing).__name__}")
    rounds, base = candidate.round_medians, baseline.round_medians
    if len(rounds) != len(base) or not all(t > 0 for t in base):
        raise ValueError("candidate and baseline must come from one compare (as many rounds, "
                         f"baseline rounds above 0 s); got {rounds} and {base}")  # fmt: skip
    return [c / b for c, b in zip(rounds, base, strict=True)]


def device_description(device=None, dtype=None) -> str:
    """What a measurement ran on: the device, the threads on a CPU, the dtype, torch's version.

    Args:
        device (torch.device, optional): the device. Default: ``None`` (the CPU).
        dtype (torch.dtype, optional): the dtype measured. Default: ``None`` (not said).

    Returns:
        str: for instance ``cpu (x86_64, 2 threads), float32, torch 2.13.0``.

    Examples::

        >>> device_description("cpu", torch.float32).startswith("cpu (")
        True
    """
    check_factory(device, dtype)
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} is a CUDA device, and CUDA is not available")
    if device.type == "cuda":
        where = f"cuda ({torch.cuda.get_device_name(device)})"
    else:
        where = f"{device.type} ({platform.machine()}, {torch.get_num_threads()} threads)"
    kind = "" if dtype is None else f", {str(dtype).removeprefix('torch.')}"
    return f"{where}{kind}, torch {torch.__version__}"


# ---------------------------------------------------------------------------------------------
# Peak memory

#: The running peaks of the measurements in progress, outermost first (see peak_memory).
_OPEN: list[list[int]] = []


def _status_bytes(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE).group(1)) * 1024


def _reset_resident_peak() -> int | None:
    """Hand freed memory back to the system, reset VmHWM; return the resident bytes, or None
    where the process cannot (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        Path("/proc/self/clear_refs").write_text("5")
        return _status_bytes("VmRSS")
    except (OSError, AttributeError):
        return None


def peak_memory(fn: Callable, *args, device=None, **kwargs) -> int | None:
    """The extra peak memory of ``fn(*args, **kwargs)`` in bytes, or ``None`` where it cannot be
    measured.

    On a CUDA ``device``: ``torch.cuda.max_memory_allocated`` during the call minus the memory
    allocated before it. On the CPU under Linux: the peak resident memory of the process
    during the call (``VmHWM``, reset first by writing ``5`` to ``/proc/self/clear_refs``) minus
    its resident memory just before, after ``malloc_trim`` has handed freed memory back. A
    measurement inside another keeps the outer one right: the outer peak is read before the
    inner one resets it.

    Args:
        fn (Callable): what to measure.
        *args: its positional arguments.
        device (torch.device, optional): where ``fn`` allocates. Default: ``None`` (the CPU).
        **kwargs: its keyword arguments.

    Returns:
        int or None: extra peak bytes (``None`` on a CPU without Linux's ``/proc``).

    Examples::

        >>> extra = peak_memory(torch.ones, 2**24)  # 64 MiB of float32
        >>> extra is None or extra > 2**25  # at least half of it, whatever else moved
        True
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    check_factory(device, None)
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    for running in _OPEN:  # the measurements this one is inside keep their peak so far
        running[0] = max(running[0], _status_bytes("VmHWM"))
    before = _reset_resident_peak()
    if before is None:
        fn(*args, **kwargs)
        return None
    peak = [before]
    _OPEN.append(peak)
    try:
        fn(*args, **kwargs)
    finally:  # by identity: two running peaks may hold the same number
        del _OPEN[next(i for i, running in enumerate(_OPEN) if running is peak)]
        peak[0] = max(peak[0], _status_bytes("VmHWM"))
    return peak[0] - before
