"""Fixtures and settings shared by the unit tests.

Every test runs on the device of ``--device`` (see the root conftest.py): the ``device`` fixture
names it, and it is also torch's default device during the test, so tensors and modules that a
test makes without naming a device land there. ``pytest tests/unit --device cuda`` thus runs the
float64 golden tests, the masks, ``tiled_attention``, the decoder and the rest on a GPU.

The hypothesis profile keeps the property tests modest and reproducible: ``unit`` (the default)
draws the same examples on every run, so a failure in CI is a failure on every machine;
``HYPOTHESIS_PROFILE=explore`` draws fresh, more numerous examples when hunting for bugs.
"""

import os

import pytest
import torch
from hypothesis import settings

settings.register_profile("unit", max_examples=30, deadline=None, derandomize=True)
settings.register_profile("explore", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One thread per xdist worker: `-n 2` on two cores, not two workers fighting over four.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def device(pytestconfig) -> torch.device:
    """The device the unit tests run on (``--device``, default ``cpu``)."""
    device = torch.device(pytestconfig.getoption("--device"))
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.exit("--device cuda, but this PyTorch sees no CUDA device", returncode=4)
    return device


@pytest.fixture(autouse=True)
def _on_device(device):
    """Make ``device`` torch's default device for the test (a no-op on the CPU)."""
    if device.type == "cpu":
        yield
        return
    torch.set_default_device(device)
    try:
        yield
    finally:
        torch.set_default_device(None)


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state, whichever worker runs it and in what order."""
    torch.manual_seed(0)


@pytest.fixture(params=[torch.float64, torch.float32], ids=["float64", "float32"])
def dtype(request):
    """Run a golden test in float64 (the tight check) and in float32 (the everyday dtype)."""
    return request.param
