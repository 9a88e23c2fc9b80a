"""attention.repro: the device and seed of every page, claims with their margins, thread counts."""

import json

import pytest
import torch

from attention.repro import claim, default_device, num_threads, seed_everything


@pytest.mark.parametrize("name", ["", "cpu", " cpu "])
def test_the_device_is_the_cpu_here(monkeypatch, name):
    monkeypatch.setenv("ATTENTION_DEVICE", name)
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert default_device() == torch.device("cpu")


@pytest.mark.parametrize(
    "cuda, mps, expected", [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")]
)
def test_without_a_name_the_device_is_cuda_then_apples_gpu_then_the_cpu(
    monkeypatch, cuda, mps, expected
):
    monkeypatch.delenv("ATTENTION_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert default_device() == torch.device(expected)


@pytest.mark.parametrize(
    "name, message",
    [
        ("gpu", r"ATTENTION_DEVICE must name a device such as 'cpu', 'cuda' or 'mps'; got 'gpu'"),
        ("meta", r"ATTENTION_DEVICE='meta', but this PyTorch has no meta device here"),
        ("mps", r"no mps device here|MPS"),
        ("cuda", r"no cuda device here"),
        ("cuda:7", r"no cuda device here|has \d CUDA device"),
    ],
)
def test_a_device_this_machine_lacks_is_refused(monkeypatch, name, message):
    available = {"mps": torch.backends.mps.is_available(), "cuda": torch.cuda.is_available()}
    if available.get(name.split(":")[0]) and name != "cuda:7":
        pytest.skip(f"this machine has {name}")
    monkeypatch.setenv("ATTENTION_DEVICE", name)
    with pytest.raises(ValueError, match=message):
        default_device()


def test_seed_everything_seeds_every_generator_and_reads_the_environment(monkeypatch):
    import random

    import numpy as np

    seed_everything(7)
    first = (random.random(), np.random.rand(), torch.rand(1))
    monkeypatch.setenv("ATTENTION_SEED", "7")
    assert seed_everything() == 7
    assert (random.random(), np.random.rand(), torch.rand(1)) == first


@pytest.mark.parametrize(
    "seed, error, message",
    [
        (2**64, ValueError, r"seed must be in \[0, 2\*\*32\); got 18446744073709551616"),
        (2**32, ValueError, r"seed must be in \[0, 2\*\*32\)"),
        (-1, ValueError, r"seed must be in \[0, 2\*\*32\); got -1"),
        (True, TypeError, r"seed must be an int; got bool"),
        (1.5, TypeError, r"seed must be an int; got float"),
    ],
)
def test_bad_seeds_are_refused_before_any_generator_is_seeded(seed, error, message):
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    with pytest.raises(error, match=message):
        seed_everything(seed)
    assert random.random() == expected  # Python's generator was left alone


def test_a_seed_that_is_not_a_number_in_the_environment(monkeypatch):
    monkeypatch.setenv("ATTENTION_SEED", "three")
    with pytest.raises(ValueError, match=r"ATTENTION_SEED must be an integer; got 'three'"):
        seed_everything()


def test_claim_records_its_margin(tmp_path, monkeypatch):
    path = tmp_path / "claims.jsonl"
    monkeypatch.setenv("ATTENTION_CLAIMS", str(path))
    claim("accuracy", torch.tensor(0.95), above=0.9)
    claim("ratio", 2, above=1.0, below=4.0)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["claim"] for r in records] == ["accuracy", "ratio"]
    assert records[0]["margin"] == pytest.approx(0.05 / 0.9)
    assert records[1]["margin"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"value": 0.5, "above": 0.9, "below": 0.1}, ValueError, r"the bounds leave no room"),
        ({"value": 0.5, "above": 0.5, "below": 0.5}, ValueError, r"the bounds leave no room"),
        ({"value": 0.5, "above": "0.1"}, TypeError, r"above must be a number; got str"),
        ({"value": 0.5, "below": float("nan")}, ValueError, r"below must be finite; got nan"),
        ({"value": "high", "above": 0.1}, TypeError, r"value must be a number; got str"),
        ({"value": torch.ones(2), "above": 0.1}, ValueError, r"value must be one number"),
        ({"value": 0.5}, ValueError, r"claim needs a bound"),
    ],
)
def test_bad_claims_are_refused_as_such(kwargs, error, message):
    with pytest.raises(error, match=message):
        claim("something", **kwargs)


@pytest.mark.parametrize("value", [0.85, float("nan"), float("inf")])
def test_a_claim_that_fails_says_so(value):
    with pytest.raises(AssertionError, match=r"claim failed: accuracy = .*, expected above 0.9"):
        claim("accuracy", value, above=0.9)


def test_num_threads_restores_the_count_even_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(ZeroDivisionError), num_threads(1):
        assert torch.get_num_threads() == 1
        raise ZeroDivisionError
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match=r"n must be at least 1 .*; got 0"), num_threads(0):
        pass
    with pytest.raises(TypeError, match=r"n must be an int; got float"), num_threads(1.0):
        pass
