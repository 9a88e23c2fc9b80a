"""Options and names shared by every test directory.

``--device`` (default: ``ATTENTION_DEVICE``, else ``cpu``) chooses where the unit tests run:
``pytest tests/unit --device cuda`` runs the whole unit suite on a GPU. The build and the
browser tests exercise the site, which is built on the CPU; they are skipped on another device.
The package's docstring examples get the names a reader would have imported. Without a GPU,
Triton's interpreter is switched on for every test (``attention.flash_triton``).
"""

import importlib.util
import os

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

# Without a GPU, attention.flash_triton's kernels run in Triton's interpreter, which must be on
# before anything imports triton.language (torch.compile does, in the FlexAttention tests).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# Where Triton is not installed (it has wheels for Linux only), its module's examples cannot run.
collect_ignore = [] if importlib.util.find_spec("triton") else ["attention/flash_triton.py"]


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default=os.environ.get("ATTENTION_DEVICE") or "cpu",
        help="device of the unit tests: cpu (default), cuda, cuda:1, ... "
        "(default from ATTENTION_DEVICE)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_only(reason): runs on the CPU only; skipped else")


def pytest_collection_modifyitems(config, items):
    device = config.getoption("--device")
    if device == "cpu":
        return
    for item in items:
        parts = item.path.parts
        if "docs" in parts or "site" in parts:
            reason = "the site is built and read on the CPU"
        elif marker := item.get_closest_marker("cpu_only"):
            reason = marker.args[0] if marker.args else "runs on the CPU only"
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=f"--device {device}: {reason}"))


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    import torch
    import torch.nn.functional as F
    from torch import nn

    import attention
    import attention.data
    import attention.masks

    doctest_namespace.update(torch=torch, nn=nn, F=F)
    doctest_namespace.update({name: getattr(attention, name) for name in attention.__all__})
    doctest_namespace.update(
        {name: getattr(attention.masks, name) for name in attention.masks.__all__}
    )
    doctest_namespace.update(
        {name: getattr(attention.data, name) for name in attention.data.__all__}
    )
    torch.manual_seed(0)
