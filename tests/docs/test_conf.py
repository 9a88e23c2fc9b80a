"""The build configuration: which scripts run, in which order, from which random state."""

from __future__ import annotations

import importlib
import random
import re
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
from docbuild import GALLERY_DIR, ROOT, gallery_scripts, load_conf


def _reset_callable(name: str):
    module, _, func = name.rpartition(".")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        return getattr(importlib.import_module(module), func)
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


def test_every_script_runs_by_default_whatever_its_name():
    conf = load_conf(ATTENTION_GALLERY_PATTERN="")["sphinx_gallery_conf"]
    pattern = conf["filename_pattern"]
    for name in [*gallery_scripts(), "my_new_page.py", "plot_x.py"]:
        assert re.search(pattern, str(GALLERY_DIR / name)), name
    assert not re.search(pattern, str(GALLERY_DIR / "README.rst"))


def test_pattern_variable_selects_scripts():
    conf = load_conf(ATTENTION_GALLERY_PATTERN="04_")["sphinx_gallery_conf"]
    assert conf["filename_pattern"] == "04_"


def test_learning_path_order_is_file_name_order():
    conf = load_conf()["sphinx_gallery_conf"]
    assert conf["within_subsection_order"] == "FileNameSortKey"
    assert conf["examples_dirs"] == "../gallery"
    assert conf["gallery_dirs"] == "tutorials"
    assert conf["doc_module"] == ("attention",)


def test_stale_examples_rerun_when_asked():
    assert load_conf(ATTENTION_RUN_STALE="1")["sphinx_gallery_conf"]["run_stale_examples"]
    assert not load_conf(ATTENTION_RUN_STALE="0")["sphinx_gallery_conf"]["run_stale_examples"]


def test_reset_before_each_example_makes_random_numbers_repeat():
    conf = load_conf()["sphinx_gallery_conf"]
    resets = conf["reset_modules"]
    assert "matplotlib" in resets
    assert conf["reset_modules_order"] in ("before", "both")
    (seeder,) = [_reset_callable(r) for r in resets if "." in r]

    def draws():
        seeder(conf, "example.py")
        return random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist()

    first = draws()
    random.random(), np.random.rand(5), torch.rand(5)  # a page that consumed numbers
    torch.set_default_dtype(torch.float64)  # and changed a global default
    try:
        second = draws()
        assert torch.get_default_dtype() == torch.float32
    finally:
        torch.set_default_dtype(torch.float32)
    assert first == second


def test_notebook_first_cell_installs_from_the_site_and_states_versions():
    conf = load_conf(ATTENTION_SITE_URL="http://127.0.0.1:8123")
    cell = conf["sphinx_gallery_conf"]["first_notebook_cell"]
    wheel = (
        f"http://127.0.0.1:8123/packages/attention_in_pytorch-{conf['release']}-py3-none-any.whl"
    )
    assert f'%pip install "{conf["attention_torch_requirement"]}" matplotlib {wheel}' in cell
    for dist in ("torch", "numpy", "matplotlib"):
        assert f"{dist} {metadata.version(dist)}" in cell
    assert f"attention-in-pytorch {conf['release']}" in cell


def test_site_url_comes_from_the_environment_or_make_serve():
    assert load_conf(ATTENTION_SITE_URL="", READTHEDOCS_CANONICAL_URL="")["attention_site_url"] == (
        "http://127.0.0.1:8000/"
    )
    rtd = "https://attention-in-pytorch.readthedocs.io/en/latest/"
    assert (
        load_conf(ATTENTION_SITE_URL="", READTHEDOCS_CANONICAL_URL=rtd)["attention_site_url"] == rtd
    )
    local = load_conf(ATTENTION_SITE_URL="http://127.0.0.1:9/x", READTHEDOCS_CANONICAL_URL=rtd)
    assert local["attention_site_url"] == "http://127.0.0.1:9/x/"


def test_version_and_torch_requirement_are_the_distributions():
    conf = load_conf()
    assert conf["release"] == metadata.version("attention-in-pytorch")
    assert conf["attention_torch_requirement"] in metadata.requires("attention-in-pytorch")
    assert conf["attention_torch_requirement"].startswith("torch>=")


def test_intersphinx_is_off_without_opt_in():
    conf = load_conf(ATTENTION_INTERSPHINX="", READTHEDOCS="")
    assert "sphinx.ext.intersphinx" not in conf["extensions"]


def test_the_repository_is_linked_only_when_named():
    options = load_conf(ATTENTION_REPOSITORY_URL="", READTHEDOCS_GIT_CLONE_URL="")[
        "html_theme_options"
    ]
    assert "source_repository" not in options and "footer_icons" not in options


def test_a_fork_names_its_repository_and_the_pages_link_to_it():
    conf = load_conf(
        ATTENTION_REPOSITORY_URL="https://github.com/someone/attention-fork",
        ATTENTION_REPOSITORY_BRANCH="work",
    )
    options = conf["html_theme_options"]
    assert options["source_repository"] == "https://github.com/someone/attention-fork/"
    assert options["source_branch"] == "work" and options["source_directory"] == "docs/"
    (icon,) = options["footer_icons"]
    assert icon["url"] == "https://github.com/someone/attention-fork" and "<svg" in icon["html"]


def test_on_read_the_docs_the_repository_is_the_one_the_build_cloned():
    conf = load_conf(
        ATTENTION_REPOSITORY_URL="",
        ATTENTION_REPOSITORY_BRANCH="",
        READTHEDOCS="True",
        READTHEDOCS_GIT_CLONE_URL="https://github.com/org/attention.git",
        READTHEDOCS_GIT_IDENTIFIER="v1.0",
    )
    options = conf["html_theme_options"]
    assert options["source_repository"] == "https://github.com/org/attention/"
    assert options["source_branch"] == "v1.0"


def test_previews_and_sitemap_use_the_sites_address():
    conf = load_conf(ATTENTION_SITE_URL="https://example.org/attention")
    assert {"sphinxext.opengraph", "sphinx_sitemap"} <= set(conf["extensions"])
    assert conf["html_baseurl"] == conf["ogp_site_url"] == "https://example.org/attention/"
    assert conf["ogp_image"].endswith(".png")
    assert Path(conf["html_favicon"]).is_file()


def test_the_new_site_extensions_are_pinned():
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    for dist in ("sphinxext-opengraph", "sphinx-sitemap"):
        assert re.search(rf"^{dist}==[\d.]+$", requirements, flags=re.MULTILINE), dist
