"""The API reference: one page per name and per module, each with the tutorials that use it.
Loaded by ``conf.py`` as a Sphinx extension, after ``sphinx.ext.autosummary``.

- A module's page (``docs/_templates/autosummary/module.rst``) documents the members that have
  no page of their own (``_skip_documented_elsewhere``): a name listed in ``docs/api.rst``
  is documented once, on its own page, so the search finds it once.
- A module's page ends with the tutorials that use the module or any of its names
  (``.. module-minigallery::``, :func:`module_backreferences`): sphinx-gallery records the
  names a page uses (``attention.flex.causal``), not the modules.
- A function's or a class's page ends with the tutorials that use it (``.. used-by::``, in
  ``function.rst`` and ``class.rst``). A page whose name no tutorial calls directly says so
  (:data:`UNUSED`) instead of ending without a word; a page whose name a tutorial calls does
  not (:func:`used_by_tutorials`).
- Every API page describes itself, to search engines and in link previews, by its object's
  own summary, the first paragraph of its docstring (:func:`summary`), not by the first words
  Sphinx finds on it.
"""

from __future__ import annotations

import functools
import html
import importlib
import inspect
import json
import re
from pathlib import Path

#: The package whose names the reference documents.
PACKAGE = "attention"

_ENTRY = re.compile(r"^[ \t]+(?P<name>[A-Za-z_][\w.]*)[ \t]*$")


# -- What has a page of its own ------------------------------------------------------------------


@functools.cache
def listed_names(api: Path) -> frozenset[str]:
    """The full names of the entries of the autosummary tables of ``api`` (``docs/api.rst``),
    whose module is ``attention`` (``causal_mask`` is ``attention.causal_mask``)."""
    names = set()
    lines = api.read_text(encoding="utf-8").split("\n")
    inside = False
    for line in lines:
        if re.match(r"^\.\. autosummary::", line):
            inside = True
            continue
        if inside and line.strip() and not line[:1].isspace():
            inside = False
        if inside and (entry := _ENTRY.match(line)) and not line.strip().startswith(":"):
            names.add(f"{PACKAGE}.{entry.group('name')}")
    return frozenset(names)


def has_own_page(module: str, name: str, obj, listed: frozenset[str]) -> bool:
    """Whether ``module.name`` is documented on a page of its own: listed under that name, or
    under the package's top-level name for the same object."""
    if f"{module}.{name}" in listed:
        return True
    package = importlib.import_module(PACKAGE)
    return f"{PACKAGE}.{name}" in listed and getattr(package, name, None) is obj


def _skip_documented_elsewhere(app, what, name, obj, skip, options):
    """``autodoc-skip-member``: a module page leaves out the members that have their own page."""
    if what != "module" or skip:
        return None
    module = getattr(obj, "__module__", None)
    if not module or not module.startswith(PACKAGE):
        return None
    listed = listed_names(Path(app.srcdir) / "api.rst")
    # ``obj.__module__`` is where it is defined; the page may be the package's that re-exports it.
    for owner in {module, module.rsplit(".", 1)[0]}:
        if has_own_page(owner, name, obj, listed):
            return True
    return None


# -- The tutorials that use a module ---------------------------------------------------------------


def module_backreferences(module_name: str) -> list[str]:
    """The names whose backreferences make a module's mini-gallery: the module, each name of
    its ``__all__``, and the package's top-level name for the objects it re-exports.

    >>> names = module_backreferences("attention.masks")
    >>> "attention.masks.to_torch_attn_mask" in names and "attention.causal_mask" in names
    True
    """
    module = importlib.import_module(module_name)
    package = importlib.import_module(PACKAGE)
    names = [module_name]
    for name in getattr(module, "__all__", ()):
        names.append(f"{module_name}.{name}")
        obj = getattr(module, name, None)
        defined = getattr(obj, "__module__", None)
        if defined and defined != module_name:
            names.append(f"{defined}.{name}")
        if getattr(package, name, None) is obj and obj is not None:
            names.append(f"{PACKAGE}.{name}")
    return list(dict.fromkeys(names))


#: What a page says when no tutorial uses its name.
UNUSED = "No tutorial calls ``{name}`` directly."


def used_by_tutorials(backreferences: Path, names: list[str]) -> bool:
    """Whether a tutorial uses any of ``names``, by sphinx-gallery's record of the names each
    page uses (``backreferences``: its ``backreferences_all.json``, which maps a name to the
    pages that use it). The mini-gallery writes its cards into the page's input and returns no
    node, so what it returns cannot tell."""
    try:
        found = json.loads(backreferences.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    return any(found.get(name) for name in names)


def resolve(name: str):
    """The object named ``name`` (``attention.masks.causal``): a module, or an attribute of
    the longest module that the name starts with."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(f"no module in {name!r}")


def summary(name: str) -> str:
    """The first paragraph of the docstring of the object ``name``, as plain text (roles as
    their content), on one line: the API page's description.

    >>> summary("attention.MultiHeadAttention")
    'Multi-head attention, with one projection each for queries, keys and values.'
    """
    from attention_prerequisites import plain_text

    doc = inspect.getdoc(resolve(name)) or ""
    first = doc.strip().split("\n\n")[0]
    return plain_text(_MATH.sub(lambda m: plain_maths(m.group(1)), first))


_MATH = re.compile(r":math:`([^`]*)`")
#: LaTeX commands as the characters they draw, in a description that shows no formula.
_SYMBOLS = {"to": "→", "times": "×", "cdot": "·", "le": "≤", "ge": "≥"}


def plain_maths(latex: str) -> str:
    r"""A formula of a docstring as text: its commands as the symbols they draw.

    >>> plain_maths(r"(N, L, E) \to (N, H, L, D), D = E / H")
    '(N, L, E) → (N, H, L, D), D = E / H'
    >>> plain_maths(r"-m\,\lvert q - k\rvert")
    '-m |q - k|'
    """
    text = re.sub(r"\\[,;:! ]", " ", latex)
    text = re.sub(r"\\lvert\s*", "|", re.sub(r"\s*\\rvert", "|", text))
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _SYMBOLS.get(m.group(1), m.group(1)), text)
    return " ".join(text.replace("{", "").replace("}", "").split())


def _minigallery_directives():
    from docutils import nodes
    from sphinx_gallery.directives import MiniGallery

    class UsedBy(MiniGallery):
        """``.. used-by:: attention.x.f``: the tutorials that use the name, under the heading
        "Examples using ``f``", or a line that says no tutorial calls it directly (a name
        reached only through another, such as the search that ``generate`` runs)."""

        required_arguments = 1
        optional_arguments = 0
        has_content = False
        option_spec = {}

        def names(self, name: str) -> list[str]:
            return [name]

        def heading(self, name: str) -> str:
            return name.rsplit(".", 1)[-1]

        def run(self):
            name = self.arguments[0]
            env = self.state.document.settings.env
            described = self.describe(name, env)
            conf = env.config.sphinx_gallery_conf
            backreferences = Path(conf["src_dir"], conf["backreferences_dir"])
            names = self.names(name)
            if used_by_tutorials(backreferences / "backreferences_all.json", names):
                self.options = {"add-heading": f"Examples using ``{self.heading(name)}``"}
                self.arguments = [" ".join(names)]
                return [*described, *super().run()]
            text = UNUSED.format(name=name)
            paragraph = nodes.paragraph(text, classes=["attention-used-by-none"])
            inline, messages = self.state.inline_text(text, self.lineno)
            paragraph += inline
            return [*described, paragraph, *messages]

        def describe(self, name: str, env) -> list:
            """The object's summary as the page's description: the ``description`` meta tag,
            and the link preview's (sphinxext-opengraph takes ``og:`` fields of the page's
            metadata over the first words it finds, here the API entry's, which it skips)."""
            text = summary(name)
            if not text:
                return []
            # sphinxext-opengraph writes a field as it is, quotes aside: escaped here as the
            # text it reads from a page is.
            preview = html.escape(text, quote=False)
            env.metadata.setdefault(env.docname, {})["og:description"] = preview
            return [nodes.meta(name="description", content=text)]

    class ModuleMiniGallery(UsedBy):
        """``.. module-minigallery:: attention.x``: the tutorials that use the module or any
        of its names, under the heading "Examples using ``attention.x``"."""

        def names(self, name: str) -> list[str]:
            return module_backreferences(name)

        def heading(self, name: str) -> str:
            return name

    return UsedBy, ModuleMiniGallery


def setup(app):
    app.setup_extension("sphinx.ext.autosummary")
    app.connect("autodoc-skip-member", _skip_documented_elsewhere)
    used_by, module_minigallery = _minigallery_directives()
    app.add_directive("used-by", used_by)
    app.add_directive("module-minigallery", module_minigallery)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = [
    "UNUSED",
    "has_own_page",
    "listed_names",
    "module_backreferences",
    "plain_maths",
    "resolve",
    "summary",
    "used_by_tutorials",
]
