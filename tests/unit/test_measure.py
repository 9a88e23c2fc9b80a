"""attention.measure: the timer's interleaved rounds and the peak-memory meter."""

import statistics
import sys

import pytest
import torch

from attention.measure import (
    Timing,
    compare,
    device_description,
    peak_memory,
    round_ratios,
    time_it,
)


def test_compare_times_every_candidate_in_every_round_in_a_rotating_order():
    order = []
    cases = {name: (lambda name=name: order.append(name)) for name in "abc"}
    timings = compare(cases, rounds=3, min_run_time=0.001)
    assert list(timings) == ["a", "b", "c"]
    assert all(len(t.round_medians) == 3 and t.runs >= 3 for t in timings.values())
    # Each round starts with the next candidate: a b c, then b c a, then c a b.
    firsts = [order[0]]
    for previous, name in zip(order, order[1:], strict=False):
        if name != previous:
            firsts.append(name)
    starts = [firsts[i] for i in range(0, len(firsts)) if i % 3 == 0]
    assert starts[:3] == ["a", "b", "c"]


class _ScriptedTimer:
    """Stands in for ``torch.utils.benchmark.Timer``: each ``blocked_autorange`` calls the
    candidate once and reports the next scripted list of per-run times, so that what
    :func:`compare` makes of its samples can be checked exactly, with no clock involved."""

    script: dict = {}

    def __init__(self, stmt, globals, num_threads):
        self.fn = globals["fn"]
        self.name = self.fn.__name__

    def blocked_autorange(self, min_run_time):
        self.fn()

        class Measurement:
            times = _ScriptedTimer.script[self.name].pop(0)

        return Measurement()


def _counted(name, calls):
    def fn():
        calls[name] += 1

    fn.__name__ = name
    return fn


def test_compare_summarises_the_samples_it_was_given(monkeypatch):
    from torch.utils import benchmark

    monkeypatch.setattr(benchmark, "Timer", _ScriptedTimer)
    _ScriptedTimer.script = {
        "a": [[3.0, 1.0, 2.0], [10.0, 20.0]],  # round medians 2.0 and 15.0
        "b": [[4.0, 4.0, 8.0], [5.0]],  # round medians 4.0 and 5.0
    }
    calls = {"a": 0, "b": 0}
    timings = compare({name: _counted(name, calls) for name in "ab"}, rounds=2)
    assert calls == {"a": 2, "b": 2}  # one blocked_autorange per candidate and round
    assert all(not left for left in _ScriptedTimer.script.values())  # every sample used
    a, b = timings["a"], timings["b"]
    assert (a.round_medians, b.round_medians) == ((2.0, 15.0), (4.0, 5.0))
    assert (a.runs, b.runs) == (5, 4)
    assert a.median == 3.0 and b.median == 4.5  # medians of all five and all four runs
    q1, _, q3 = statistics.quantiles([3.0, 1.0, 2.0, 10.0, 20.0], n=4)
    assert a.iqr == q3 - q1
    assert round_ratios(a, b) == [0.5, 3.0]


def test_time_it_returns_one_timing_with_a_median_per_round():
    x = torch.randn(64, 64)
    timing = time_it(lambda: x @ x, rounds=2, min_run_time=0.01)
    assert isinstance(timing, Timing) and len(timing.round_medians) == 2
    assert timing.runs >= 2 and timing.iqr >= 0


def test_timing_prints_its_median_and_spread():
    assert str(Timing(0.0123, 0.0004, 30)) == "12.3 ms (IQR 0.4 ms, 30 runs)"
    assert Timing(0.5, 0.0, 1).ms == 500


def test_compare_needs_a_candidate():
    with pytest.raises(ValueError, match=r"cases must hold at least one candidate"):
        compare({})


def test_device_description_names_the_device_threads_dtype_and_torch():
    text = device_description("cpu", torch.bfloat16)
    assert text.startswith("cpu (") and f"{torch.get_num_threads()} threads" in text
    assert "bfloat16" in text and torch.__version__ in text


linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")


@linux
def test_peak_memory_sees_a_temporary_allocation():
    extra = peak_memory(lambda: torch.ones(2**24).sum())  # 64 MiB, freed before returning
    assert 2**25 < extra < 2**27


@linux
def test_a_measurement_inside_another_keeps_the_outer_one_right():
    inner = []

    def outer():
        big = torch.ones(2**24)  # 64 MiB held while the inner measurement resets the peak
        del big
        inner.append(peak_memory(lambda: torch.ones(2**20)))  # 4 MiB

    extra = peak_memory(outer)
    assert inner[0] < 2**24 and extra > 2**25


def test_closing_an_inner_measurement_leaves_an_equal_outer_one_open(monkeypatch):
    # Two nested measurements may hold the same running peak (here both 100 bytes when the
    # inner one closes): the inner one must close itself, not the first equal list.
    import itertools

    from attention import measure

    readings = itertools.chain([100], itertools.repeat(200))  # VmHWM: 100, then 200
    monkeypatch.setattr(measure, "_status_bytes", lambda field: next(readings))
    monkeypatch.setattr(measure, "_reset_resident_peak", lambda: 100)
    inner = []
    extra = peak_memory(lambda: inner.append(peak_memory(lambda: None)))
    assert inner == [100] and extra == 100 and not measure._OPEN


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        # rounds 0 and -1 raised IndexError, a NaN min_run_time hung, "0.01" failed comparing.
        ({"rounds": 0}, ValueError, r"rounds must be at least 1; got 0"),
        ({"rounds": -1}, ValueError, r"rounds must be at least 1; got -1"),
        ({"rounds": 1.0}, TypeError, r"rounds must be an int"),
        ({"min_run_time": float("nan")}, ValueError, r"min_run_time must be a positive finite"),
        ({"min_run_time": 0.0}, ValueError, r"min_run_time must be a positive finite"),
        ({"min_run_time": "0.01"}, TypeError, r"min_run_time must be a positive finite"),
        ({"device": "bogus"}, ValueError, r"device must name a device"),
    ],
)
def test_bad_timer_settings_are_refused_before_anything_runs(kwargs, error, message):
    calls = []
    for call in (
        lambda: compare({"f": lambda: calls.append(1)}, **kwargs),
        lambda: time_it(lambda: calls.append(1), **kwargs),
    ):
        with pytest.raises(error, match=message):
            call()
    assert not calls


def test_bad_candidates_are_refused():
    with pytest.raises(TypeError, match=r"cases\['a'\] must be callable; got int"):
        compare({"a": 3})
    with pytest.raises(TypeError, match=r"cases must be a dict"):
        compare([lambda: None])
    with pytest.raises(TypeError, match=r"fn must be callable; got str"):
        time_it("x @ x")
    with pytest.raises(TypeError, match=r"fn must be callable; got int"):
        peak_memory(3)


def test_round_ratios_refuses_a_baseline_of_zero_and_timings_of_other_compares():
    # A zero baseline raised ZeroDivisionError.
    with pytest.raises(ValueError, match=r"baseline rounds above 0 s"):
        round_ratios(Timing(1.0, 0.0, 2, (1.0, 1.0)), Timing(0.0, 0.0, 2, (0.0, 1.0)))
    with pytest.raises(ValueError, match=r"as many rounds"):
        round_ratios(Timing(1.0, 0.0, 2, (1.0, 1.0)), Timing(1.0, 0.0, 3, (1.0, 1.0, 1.0)))
    with pytest.raises(TypeError, match=r"baseline must be a Timing; got float"):
        round_ratios(Timing(1.0, 0.0, 2, (1.0, 1.0)), 1.0)
