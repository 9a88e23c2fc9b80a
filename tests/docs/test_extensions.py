"""The site's extensions (docs/_ext) on their own, without a build: their docstring examples,
the course they read from the gallery, the API reference's list of names, and the reST they
rewrite."""

from __future__ import annotations

import doctest
import importlib
import sys

import pytest
from docbuild import GALLERY_DIR, ROOT

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import attention_api as api  # noqa: E402
import attention_course as course  # noqa: E402
import attention_tutorials as tutorials  # noqa: E402

EXTENSIONS = sorted(p.stem for p in (ROOT / "docs" / "_ext").glob("attention_*.py"))


@pytest.mark.parametrize("name", EXTENSIONS)
def test_docstring_examples(name: str):
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert failed == 0


def test_the_course_has_five_parts_and_pages_numbered_one_to_n():
    parts = course.course(GALLERY_DIR)
    named = [part for part in parts if part.folder]
    assert len(named) == 5, [part.title for part in parts]
    assert all(part.title.startswith(f"Part {i}:") for i, part in enumerate(named, 1))
    numbers = [page.number for page in course.pages_of(parts)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    assert all(page.title and page.summary for page in course.pages_of(parts))


def test_a_page_at_the_top_of_the_gallery_is_still_in_the_course(tmp_path):
    part = tmp_path / "1_first"
    part.mkdir()
    (part / "GALLERY_HEADER.rst").write_text("Part 1: First\n=============\n\nThe first.\n")
    page = '"""\nTitle {n}\n=======\n\n.. prerequisites::\n   :summary: Page {n}.\n\nText.\n"""\n'
    (part / "01_a.py").write_text(page.format(n=1))
    (tmp_path / "02_b.py").write_text(page.format(n=2))
    parts = course.course(tmp_path, minutes=lambda path: 3)
    assert [(p.title, [x.stem for x in p.pages]) for p in parts] == [
        ("Part 1: First", ["01_a"]),
        ("More tutorials", ["02_b"]),
    ]
    first = parts[0].pages[0]
    assert (first.summary, first.minutes, first.label()) == (
        "Page 1.",
        3,
        "sphx_glr_tutorials_1_first_01_a.py",
    )
    assert parts[1].pages[0].label() == "sphx_glr_tutorials_02_b.py"


def test_the_outline_lists_each_page_with_its_number_summary_and_time(tmp_path):
    parts = [course.Part("1_first", "Part 1: First", "The first.")]
    parts[0].pages.append(
        course.Page(7, tmp_path / "07_x.py", "1_first", "Seven", "What seven is.", 12)
    )
    text = "\n".join(course.outline_rst(parts, "tutorials"))
    assert ".. rubric:: :ref:`Part 1: First <sphx_glr_tutorials_1_first>`" in text
    assert "The first. (1 page, about 12 minutes)" in text
    item = "- 7\\. :ref:`sphx_glr_tutorials_1_first_07_x.py`: What seven is. *(12\u00a0min)*"
    assert item in text


def test_cards_get_a_number_a_summary_and_a_time():
    card = (
        '<div class="sphx-glr-thumbcontainer" tooltip="A long introduction.">\n\n'
        ".. only:: html\n\n  :doc:`/tutorials/1_first/07_x`\n\n.. raw:: html\n\n"
        '      <div class="sphx-glr-thumbnail-title">Seven</div>\n    </div>\n'
    )
    page = course.Page(7, GALLERY_DIR / "07_x.py", "1_first", "Seven", "Uses :ref:`a <b>`.", 4)
    out = course.annotate_cards(card, {"tutorials/1_first/07_x": page})
    assert 'tooltip="' not in out
    assert '<span class="attention-card-number">7</span> Seven</div>' in out
    assert '<div class="attention-card-summary">Uses a.</div>' in out
    assert '<div class="attention-card-time">4 min</div>' in out


def test_every_public_name_and_module_is_listed_in_the_api_reference():
    import pkgutil

    import attention

    listed = api.listed_names(ROOT / "docs" / "api.rst")
    missing = [f"attention.{n}" for n in attention.__all__ if f"attention.{n}" not in listed]
    modules = [m.name for m in pkgutil.iter_modules(attention.__path__)]
    for module in modules:
        if module.startswith("_"):
            continue
        names = getattr(importlib.import_module(f"attention.{module}"), "__all__", [])
        own_pages = all(
            f"attention.{n}" in listed or f"attention.{module}.{n}" in listed for n in names
        )
        if f"attention.{module}" not in listed and not (names and own_pages):
            missing.append(f"attention.{module}")
    assert not missing, f"not in docs/api.rst: {missing}"


def test_empty_code_boxes_are_dropped_and_others_kept():
    page = (
        ".. GENERATED FROM PYTHON SOURCE LINES 1-3\n\n.. code-block:: Python\n   :dedent: 1\n\n\n\n"
        ".. GENERATED FROM PYTHON SOURCE LINES 4-6\n\n.. code-block:: Python\n\n    x = 1\n"
    )
    out = tutorials.drop_empty_code_blocks(page)
    assert out.count(".. code-block:: Python") == 1 and "    x = 1" in out
    assert ":dedent: 1" not in out
