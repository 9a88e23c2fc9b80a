"""Fixtures and settings shared by the unit tests.

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


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state, whichever worker runs it and in what order."""
    torch.manual_seed(0)


@pytest.fixture(params=[torch.float64, torch.float32], ids=["float64", "float32"])
def dtype(request):
    """Run a golden test in float64 (the tight check) and in float32 (the everyday dtype)."""
    return request.param
