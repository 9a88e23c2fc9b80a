"""Every public name has a docstring in PyTorch's layout.

A one-paragraph summary; ``Args:`` naming every parameter, each with a default ending
"Default: ``x``"; ``Shape:`` for modules and for the functions whose tensors carry the
N/L/S/E/H/D letters; ``Returns:`` for functions and methods; an ``Examples::`` block with
``>>>`` lines, last. The examples themselves run as doctests (``pytest --doctest-modules
attention``), so they are not run again here.
"""

import inspect
import re
import sys
from pathlib import Path

import pytest
from torch import nn

import attention

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import public_api  # noqa: E402  (tests/public_api.py: the public names, from the package)

SECTIONS = ["Args:", "Shape:", "Returns:", "Yields:", "Examples::"]

# Shown whole on the multi-head page, where a one-line docstring keeps the reshape readable.
ONE_LINE = {"split_heads", "merge_heads"}


def _public():
    """(id, object) for every public callable, and the from_torch constructors."""
    found = {}
    for name, obj in public_api.public_names().items():  # every module's, none listed by hand
        if not callable(obj) or isinstance(obj, type(attention)) or obj in found.values():
            continue
        key = getattr(obj, "__qualname__", name.rsplit(".", 1)[-1])
        if key in found:  # masks.causal and flex.causal: the module tells them apart
            key = f"{obj.__module__.removeprefix('attention.')}.{key}"
        found[key] = obj
        if isinstance(obj, type) and "from_torch" in vars(obj):
            found[f"{obj.__name__}.from_torch"] = obj.from_torch
    return sorted(found.items())


PUBLIC = _public()
MODULES = [obj for _, obj in PUBLIC if isinstance(obj, type) and issubclass(obj, nn.Module)]

# Functions whose arguments and results are not shaped tensors, or whose Returns already says
# the shape in full ("same shape" as the input): no Shape: section needed.
NO_SHAPE = {
    "plot_attention",  # array-like weights, described in Args; returns a Figure
    "mask_legend",  # no tensors: legend entries
    "register_attention",  # a name and a function in, nothing out
    "count_parameters",  # a module in, a number out
    "to_torch_attn_mask",  # returns ``~mask``, same shape
    "encode",
    "decode",
    "accuracy",
    "train_classifier",
    "fit_sentiment_classifier",
    "accumulation_dtype",  # a dtype in, a dtype out
    "compare",  # callables in, timings out
    "time_it",
    "round_ratios",
    "device_description",
    "peak_memory",
    "default_device",
    "seed_everything",
    "claim",
    "num_threads",
    "train",  # a model and batches of any form; per-step records out
    "format_history",
    "trained_once",
    "head_ablated",  # a context manager; mean_head_outputs has the shapes
    "count_work",  # a context manager that counts
    "spawn",  # a function and its arguments in, each rank's result out
    "run_cases",  # cases (dicts) in, measurements out
    "command_worker",
    "bytes_formula",  # numbers in, a number out
    "python_docs",  # a str out
    "write_date",  # a date and a template in, a str out
    "split_dates",
    "make_dates",
    "decode_target",  # ids in, a str out
    "memory_use",  # counts in, counts out
    "MultiHeadAttention.from_torch",
    "FusedMultiHeadAttention.from_torch",
    "TransformerBlock.from_torch",
    "TransformerDecoderBlock.from_torch",
}


def _sections(doc):
    """The docstring's section headers (lines at the left margin), in order, and their text."""
    lines = inspect.cleandoc(doc).splitlines()
    headers = [(i, line) for i, line in enumerate(lines) if line in SECTIONS]
    bodies = {}
    for k, (i, line) in enumerate(headers):
        end = headers[k + 1][0] if k + 1 < len(headers) else len(lines)
        bodies[line] = "\n".join(lines[i + 1 : end])
    return [line for _, line in headers], bodies, lines


def _parameters(obj):
    signature = inspect.signature(obj.__init__ if isinstance(obj, type) else obj)
    return [
        p for p in signature.parameters.values()
        if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]  # fmt: skip


def _arg_entries(args_body):
    """{name: entry text} for the ``name (type): text`` entries of an Args: section."""
    entries, name = {}, None
    for line in args_body.splitlines():
        match = re.match(r"^    (\w+) \(", line)
        if match:
            name = match.group(1)
            entries[name] = line
        elif name is not None:
            entries[name] += "\n" + line
    return entries


def test_every_public_name_is_found():
    ids = {name for name, _ in PUBLIC}
    assert {"MultiHeadAttention", "causal_mask", "from_torch_masks", "make_dataset"} <= ids
    assert {"train_classifier", "accuracy", "MultiHeadAttention.from_torch"} <= ids


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[name for name, _ in PUBLIC])
def test_docstring_layout(name, obj):
    doc = obj.__doc__
    assert doc and doc.strip(), f"{name} has no docstring"
    order, bodies, lines = _sections(doc)
    summary = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    assert summary.endswith("."), f"{name}: the summary paragraph should end with a period"
    assert len(summary) > 20 and not lines[0].startswith(tuple(SECTIONS))
    if name in ONE_LINE:
        return

    params = _parameters(obj)
    is_class = isinstance(obj, type)
    required = ["Examples::"]
    if params:
        required.append("Args:")
    if (is_class and issubclass(obj, nn.Module)) or (not is_class and name not in NO_SHAPE):
        required.append("Shape:")
    if not is_class:
        required.append("Yields:" if "Yields:" in order else "Returns:")  # a context manager
    missing = [s for s in required if s not in order]
    assert not missing, f"{name} lacks the section(s) {missing}"
    assert order == sorted(order, key=SECTIONS.index), f"{name}: sections out of order {order}"
    assert ">>>" in bodies["Examples::"], f"{name}: Examples:: holds no >>> example"

    if params:
        entries = _arg_entries(bodies["Args:"])
        for p in params:
            assert p.name in entries, f"{name}: Args: does not describe {p.name!r}"
            if p.default is not p.empty:
                assert re.search(r"Default: ``[^`]+``", entries[p.name]), (
                    f"{name}: the entry for {p.name!r} should end with Default: ``...``"
                )


@pytest.mark.parametrize("cls", MODULES, ids=[cls.__name__ for cls in MODULES])
def test_module_shape_section_uses_the_shape_letters(cls):
    _, bodies, _ = _sections(cls.__doc__)
    assert re.search(r":math:`\([NLSEHD, ]+", bodies["Shape:"]), cls.__name__


@pytest.mark.parametrize("cls", MODULES, ids=[cls.__name__ for cls in MODULES])
def test_module_forward_is_documented(cls):
    doc = cls.forward.__doc__
    assert doc and doc.strip() and doc is not nn.Module.forward.__doc__, cls.__name__
