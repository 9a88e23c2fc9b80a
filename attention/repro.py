"""Reproducible examples: one device and one seed for every page, claims checked with margins.

A page that trains or samples states claims about the *model*, not about one run: they must hold
for every seed and on every CPU, whose vector instructions round differently. Two helpers make
that checkable:

- :func:`default_device` is the device every page runs on: ``ATTENTION_DEVICE`` when set, else
  CUDA when there is a GPU, else the CPU.
- :func:`seed_everything` seeds ``random``, NumPy and PyTorch from ``ATTENTION_SEED``
  (default 0). The site's build calls it before every page, and a downloaded script calls it
  itself, so ``ATTENTION_SEED=3 python 11_classifier.py`` reruns a page with another seed.
- :func:`claim` asserts that a measured number lies on the right side of a bound, and, when
  ``ATTENTION_CLAIMS`` names a file, appends the number and its margin to it as one JSON line.
  ``make robust`` reruns the pages over seeds and CPU capabilities and tabulates the weakest
  margin of every claim.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import random
from pathlib import Path

import torch

__all__ = ["default_device", "seed_everything", "claim"]

#: The environment variable that sets the seed of every example.
SEED_ENV = "ATTENTION_SEED"
#: The environment variable that chooses the device of every example ("cpu", "cuda", "cuda:1").
DEVICE_ENV = "ATTENTION_DEVICE"
#: The environment variable naming the file that :func:`claim` appends its records to.
CLAIMS_ENV = "ATTENTION_CLAIMS"


def default_device() -> torch.device:
    """The device the examples run on: ``ATTENTION_DEVICE``, else CUDA when present, else the CPU.

    Returns:
        torch.device: the device.

    Raises:
        ValueError: if ``ATTENTION_DEVICE`` names no device, or a CUDA device that is not there.

    Examples::

        >>> default_device().type in ("cpu", "cuda")
        True
    """
    name = os.environ.get(DEVICE_ENV, "").strip()
    if not name:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        message = f"{DEVICE_ENV} must name a device such as 'cpu' or 'cuda'; got {name!r}"
        raise ValueError(message) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{DEVICE_ENV}={name!r}, but this PyTorch sees no CUDA device")
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
    if seed < 0:
        raise ValueError(f"seed must be non-negative; got {seed}")
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

    Returns nothing, so that a claim at the end of a page's cell prints nothing there.

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
    if isinstance(value, torch.Tensor):
        value = value.detach()
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
