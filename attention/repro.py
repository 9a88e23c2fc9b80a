"""Reproducible examples: one device and one seed for every page, claims checked with margins.

A page that trains or samples states claims about the *model*, not about one run: they must hold
for every seed and on every CPU, whose vector instructions round differently. Two helpers make
that checkable:

- :func:`default_device` is the device every page runs on: ``ATTENTION_DEVICE`` when set, else
  CUDA when there is an NVIDIA (or AMD) GPU, else Apple's GPU (MPS) on a Mac, else the CPU.
- :func:`seed_everything` seeds ``random``, NumPy and PyTorch from ``ATTENTION_SEED``
  (default 0). The site's build calls it before every page, and a downloaded script calls it
  itself, so ``ATTENTION_SEED=3 python 11_classifier.py`` reruns a page with another seed.
- :func:`claim` asserts that a measured number lies on the right side of a bound, and, when
  ``ATTENTION_CLAIMS`` names a file, appends the number and its margin to it as one JSON line.
  ``make robust`` reruns the pages over seeds and CPU capabilities and tabulates the weakest
  margin of every claim.
- :func:`num_threads` runs a block on a given number of CPU threads and restores the count: a
  model trained on one thread is the same on a machine of any core count.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import random
from pathlib import Path

import torch

__all__ = ["default_device", "seed_everything", "claim", "num_threads"]

#: The environment variable that sets the seed of every example.
SEED_ENV = "ATTENTION_SEED"
#: The environment variable that chooses the device of every example ("cpu", "cuda", "cuda:1").
DEVICE_ENV = "ATTENTION_DEVICE"
#: The environment variable naming the file that :func:`claim` appends its records to.
CLAIMS_ENV = "ATTENTION_CLAIMS"


def default_device() -> torch.device:
    """The device the examples run on: ``ATTENTION_DEVICE``, else a GPU when there is one (CUDA,
    then Apple's MPS), else the CPU.

    Returns:
        torch.device: the device.

    Raises:
        ValueError: if ``ATTENTION_DEVICE`` names no device, or a device this machine does not
            have (``meta`` holds no data, so no page can run on it).

    Examples::

        >>> default_device().type in ("cpu", "cuda", "mps")
        True
    """
    name = os.environ.get(DEVICE_ENV, "").strip()
    if not name:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        message = f"{DEVICE_ENV} must name a device such as 'cpu', 'cuda' or 'mps'; got {name!r}"
        raise ValueError(message) from None
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": torch.backends.mps.is_available(),
    }
    if not available.get(device.type, False):
        raise ValueError(
            f"{DEVICE_ENV}={name!r}, but this PyTorch has no {device.type} device here; "
            "use 'cpu'"
            + (", 'cuda'" if available["cuda"] else "")
            + (", 'mps'" if available["mps"] else "")
        )
    if device.type == "cuda" and device.index is not None:
        if device.index >= torch.cuda.device_count():
            raise ValueError(
                f"{DEVICE_ENV}={name!r}, but this machine has {torch.cuda.device_count()} "
                "CUDA device(s)"
            )
    return device


def seed_everything(seed: int | None = None) -> int:
    """Seed ``random``, NumPy (when installed) and PyTorch; return the seed used.

    Args:
        seed (int, optional): the seed. Default: ``None``, which reads ``ATTENTION_SEED`` from
            the environment, or 0 when it is not set.

    Returns:
        int: the seed.

    Examples::

        >>> seed_everything(3)
        3
        >>> a = torch.rand(2); _ = seed_everything(3); torch.equal(a, torch.rand(2))
        True
    """
    if seed is None:
        text = os.environ.get(SEED_ENV, "0").strip() or "0"
        try:
            seed = int(text)
        except ValueError:
            raise ValueError(f"{SEED_ENV} must be an integer; got {text!r}") from None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {type(seed).__name__}")
    if not 0 <= seed < 2**32:  # NumPy's generator takes at most 32 bits
        raise ValueError(f"seed must be in [0, 2**32); got {seed}")
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # numpy is optional for the package; the pages install it
        pass
    else:
        np.random.seed(seed)
    torch.manual_seed(seed)
    return seed


def claim(
    name: str, value: float, *, above: float | None = None, below: float | None = None
) -> None:
    """Assert ``above < value < below`` for a measured number, and record its margin.

    The margin is the distance to the nearer bound, as a fraction of that bound's size (of 1 when
    the bound is 0): 0.2 means the number could move 20% of the bound before the claim fails.
    When ``ATTENTION_CLAIMS`` names a file, one JSON line is appended to it with the calling
    script, the claim's name, the value, the bounds, the margin, the seed, the CPU capability and
    the thread count.

    Args:
        name (str): what is claimed, as the page says it ("held-out accuracy").
        value (float): the measured number.
        above (float, optional): the value must be greater than this. Default: ``None``.
        below (float, optional): the value must be less than this. Default: ``None``.

    Returns:
        None: nothing, so that a claim at the end of a page's cell prints nothing there.

    Raises:
        AssertionError: if the value is not strictly within the bounds (or is not finite).

    Examples::

        >>> claim("accuracy", 0.97, above=0.9)
        >>> claim("accuracy", 0.87, above=0.9)
        Traceback (most recent call last):
        ...
        AssertionError: claim failed: accuracy = 0.87, expected above 0.9
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str; got {name!r}")
    if above is None and below is None:
        raise ValueError("claim needs a bound: give above=, below= or both")
    for bound_name, bound in (("above", above), ("below", below)):
        if bound is None:
            continue
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            raise TypeError(f"{bound_name} must be a number; got {type(bound).__name__}")
        if not math.isfinite(bound):
            raise ValueError(f"{bound_name} must be finite; got {bound}")
    if above is not None and below is not None and not above < below:
        raise ValueError(
            f"the bounds leave no room: above={above:g} must be less than below={below:g}"
        )
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"value must be one number; got a tensor of shape {tuple(value.shape)}"
            )
        value = value.detach().item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)  # NumPy scalars
        except (TypeError, ValueError):
            raise TypeError(f"value must be a number; got {type(value).__name__}") from None
    value = float(value)
    margins = []
    if above is not None:
        margins.append((value - above) / (abs(above) or 1.0))
    if below is not None:
        margins.append((below - value) / (abs(below) or 1.0))
    margin = min(margins) if math.isfinite(value) else -math.inf
    path = os.environ.get(CLAIMS_ENV)
    if path:
        caller = Path(inspect.stack()[1].filename).name
        record = {
            "page": caller,
            "claim": name,
            "value": value,
            "above": above,
            "below": below,
            "margin": margin,
            "seed": int(os.environ.get(SEED_ENV, "0") or 0),
            "capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
        }
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")
    bounds = " and ".join(
        text
        for text in (
            None if above is None else f"above {above:g}",
            None if below is None else f"below {below:g}",
        )
        if text
    )
    if not margin > 0:  # raised, not asserted: `python -O` must not skip a page's claims
        raise AssertionError(f"claim failed: {name} = {value:g}, expected {bounds}")


@contextlib.contextmanager
def num_threads(n: int):
    """Run the block on ``n`` CPU threads, then restore the thread count.

    Sums split over threads are rounded differently from sums on one thread, so a model trained
    on one thread is the same on a machine of any core count (the processor's vector
    instructions still change the rounding); and timing small operations on one thread keeps
    them from waiting on each other.

    Args:
        n (int): the number of threads, at least 1.

    Returns:
        contextlib.AbstractContextManager: restores the thread count on leaving.

    Examples::

        >>> before = torch.get_num_threads()
        >>> with num_threads(1):
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int; got {type(n).__name__}")
    if not 1 <= n < 2**31:
        raise ValueError(f"n must be at least 1 (and below 2**31); got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
