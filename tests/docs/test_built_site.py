"""What the real build wrote: API pages, downloads, notebooks and offline assets."""

from __future__ import annotations

import re
from pathlib import Path

import public_api  # tests/public_api.py: conftest.py imported docbuild, which puts tests/ first
import pytest
from docbuild import gallery_scripts

import attention

#: Every public module directly under ``attention`` (a subpackage stands for its modules),
#: found from the package: each is documented whole on a page of its own, or name by name.
PUBLIC_MODULES = public_api.public_modules(top_level=True)

#: A script or a stylesheet (icon, preload, ...) loaded from another site. The canonical link
#: and the page in the other language (``<link rel="canonical">``, ``<link rel="alternate"
#: hreflang=...>``, the site's own addresses) are no assets: the browser loads nothing.
_REMOTE_ASSET = re.compile(
    r"<(?:script[^>]*\bsrc|link(?![^>]*\brel=[\"'](?:canonical|alternate))[^>]*\bhref)\s*=\s*[\"']"
    r"(?:https?:)?//",
    flags=re.IGNORECASE,
)


def _documents(html_dir: Path, full: str, anchor: str) -> bool:
    page = html_dir / "generated" / f"{full}.html"
    return page.is_file() and f'id="{anchor}"' in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", attention.__all__)
def test_every_public_name_has_an_api_page(html_dir: Path, name: str):
    full = f"attention.{name}"
    assert _documents(html_dir, full, full), f"no API page documents {full}"


@pytest.mark.parametrize("module_name", sorted(PUBLIC_MODULES))
def test_every_public_module_is_documented_whole_or_name_by_name(html_dir, module_name):
    module = PUBLIC_MODULES[module_name]
    if isinstance(module, str):
        pytest.skip(module)  # the reason: a missing optional dependency
    if (html_dir / "generated" / f"{module_name}.html").is_file():
        assert _documents(html_dir, module_name, f"module-{module_name}"), module_name
        return
    for name in module.__all__:  # no page of its own: a page for each of its names
        reexported = getattr(attention, name, None) is getattr(module, name)
        full = f"attention.{name}" if reexported else f"{module_name}.{name}"
        assert _documents(html_dir, full, full), f"{module_name}: no API page documents {full}"


def test_api_pages_list_the_examples_that_use_them(html_dir: Path):
    # Every tutorial imports the package, so at least one name shows its examples.
    pages = (html_dir / "generated").glob("attention.*.html")
    with_examples = [p.name for p in pages if "Examples using" in p.read_text(encoding="utf-8")]
    assert with_examples, "no API page has an 'Examples using ...' mini-gallery"


@pytest.mark.parametrize("script", gallery_scripts())
def test_tutorial_offers_py_and_ipynb(html_dir: Path, script: str):
    page = html_dir / "tutorials" / script.replace(".py", ".html")
    text = page.read_text(encoding="utf-8")
    stem = Path(script).stem
    for suffix in (".py", ".ipynb"):
        pattern = rf'href="((?:\.\./)+_downloads/[0-9a-f]+/{re.escape(stem)}{suffix})"'
        link = re.search(pattern, text)
        assert link, f"{page.name} has no {suffix} download"
        assert (page.parent / link.group(1)).resolve().is_file()


def test_gallery_offers_zips(html_dir: Path):
    text = (html_dir / "tutorials" / "index.html").read_text(encoding="utf-8")
    for zip_name in ("tutorials_python.zip", "tutorials_jupyter.zip"):
        link = re.search(rf'href="(\.\./_downloads/[0-9a-f]+/{zip_name})"', text)
        assert link, f"the gallery index does not offer {zip_name}"
        assert (html_dir / "tutorials" / link.group(1)).resolve().is_file()


@pytest.mark.parametrize("page", ["sg_execution_times.html", "tutorials/sg_execution_times.html"])
def test_computation_times_page_loads_nothing_remote(html_dir: Path, page: str):
    text = (html_dir / page).read_text(encoding="utf-8")
    assert "Computation times" in text
    assert not _REMOTE_ASSET.search(text), _REMOTE_ASSET.search(text).group(0)
    if page == "sg_execution_times.html":  # the site-wide one lists every page
        for script in gallery_scripts():
            assert Path(script).name in text, f"{script} missing from {page}"


def test_mathjax_is_served_from_the_site(html_dir: Path):
    text = (html_dir / "index.html").read_text(encoding="utf-8")
    src = re.search(r'<script[^>]*src="([^"?]*tex-chtml\.js)(?:\?[^"]*)?"', text)
    assert src and not src.group(1).startswith(("http:", "https:", "//")), src
    assert (html_dir / src.group(1)).is_file()
