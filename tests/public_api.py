"""The package's public modules and names, found from the package itself, never listed by hand.

The tests that must reach every module (the bad-input fuzz, the docstring layout, the API pages)
take their lists from here, so a new module is covered the day it is added, or the tests say why
not. A public module is every module and subpackage under ``attention`` whose name has no part
starting with ``_``; its public names are its ``__all__``.

A module that needs an optional dependency (say a ``flash_triton.py`` that imports triton) is
skipped where that dependency is missing, with the reason, and only then: the dependencies that
may be missing are named in :data:`OPTIONAL_DEPENDENCIES`, and a module that fails to import for
any other reason is an error, not a skip.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import attention

#: Packages a module of ``attention`` may need without the package requiring them.
OPTIONAL_DEPENDENCIES = frozenset({"triton"})


def _import(name: str) -> ModuleType | str:
    """The module, or why it cannot be imported here (a missing optional dependency)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing in OPTIONAL_DEPENDENCIES:
            return f"{name} needs {missing}, which is not installed"
        raise


def public_modules(*, top_level: bool = False) -> dict[str, ModuleType | str]:
    """Every public module of the package, by full name: the module, or the reason it is
    skipped. With ``top_level``, only the modules and subpackages directly under ``attention``
    (a subpackage stands for its modules)."""
    found: dict[str, ModuleType | str] = {}
    walk = pkgutil.iter_modules if top_level else pkgutil.walk_packages
    for info in walk(attention.__path__, "attention."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue  # _checks, distributed.__main__: private
        found[info.name] = _import(info.name)
    return found


def skipped_modules() -> dict[str, str]:
    """The public modules that cannot be imported here, with the reason."""
    return {name: m for name, m in public_modules().items() if isinstance(m, str)}


def public_names() -> dict[str, object]:
    """Every public name by its full name (``attention.training.train``): the package's
    ``__all__`` and every importable public module's."""
    names = {f"attention.{name}": getattr(attention, name) for name in attention.__all__}
    for module_name, module in public_modules().items():
        if isinstance(module, str):
            continue
        assert hasattr(module, "__all__"), f"{module_name} has no __all__: its public names?"
        for name in module.__all__:
            names[f"{module_name}.{name}"] = getattr(module, name)
    return names
