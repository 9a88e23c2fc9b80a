"""Exercises and the prerequisites line (docs/_ext/attention_exercises.py and
attention_prerequisites.py): the reST transformation and the reading time on made-up text, then
two builds of a copy of the site with made-up pages."""

from __future__ import annotations

import re
import sys

import pytest
from docbuild import ROOT, build_site_copy, gallery_script

# The build tests share one build of a copy of the site: one xdist worker runs them all.
pytestmark = pytest.mark.xdist_group("exercises-build")

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import attention_exercises as ex  # noqa: E402
import attention_prerequisites as pre  # noqa: E402

# The shape of the reST sphinx-gallery writes: a comment before every block, a footer after.
GENERATED = """\
.. _sphx_glr_tutorials_99_page.py:

Title
=====

.. GENERATED FROM PYTHON SOURCE LINES 5-9

Exercises
---------

1. **One.** A question.

.. GENERATED FROM PYTHON SOURCE LINES 9-14

.. solution 1

What to notice.

.. GENERATED FROM PYTHON SOURCE LINES 14-16

.. code-block:: Python

    print(2)


.. rst-class:: sphx-glr-script-out

 .. code-block:: none

    2

.. GENERATED FROM PYTHON SOURCE LINES 16-17

.. code-block:: Python

    x = 3

.. GENERATED FROM PYTHON SOURCE LINES 18-20

Next: another page.

.. rst-class:: sphx-glr-timing

   **Total running time of the script:** (0 minutes 0.1 seconds)
"""


def test_a_solution_and_its_code_and_output_go_into_a_closed_dropdown():
    folded = ex.fold_solutions(GENERATED)
    dropdown = folded.index(".. dropdown:: Solution to exercise 1\n")
    inside = folded[dropdown:].split("\n.. GENERATED FROM PYTHON SOURCE LINES 18-20")[0]
    assert "   :class-container: attention-solution\n" in inside
    assert ":open:" not in inside
    assert "\n   What to notice.\n" in inside
    assert "\n   .. code-block:: Python\n\n       print(2)\n" in inside
    assert "\n   .. rst-class:: sphx-glr-script-out\n\n    .. code-block:: none\n" in inside
    assert "\n   .. code-block:: Python\n\n       x = 3\n" in inside
    assert ".. solution" not in folded
    # Before the marker and from the next text block on, nothing moves.
    assert folded[:dropdown] == GENERATED[: GENERATED.index(".. solution 1")]
    tail = GENERATED[GENERATED.index(".. GENERATED FROM PYTHON SOURCE LINES 18-20") :]
    assert folded.endswith(tail)


def test_a_solution_at_the_end_of_a_page_stops_before_the_footer():
    page = GENERATED.replace(
        ".. GENERATED FROM PYTHON SOURCE LINES 18-20\n\nNext: another page.\n\n", ""
    )
    folded = ex.fold_solutions(page)
    assert "\n   .. code-block:: Python\n\n       x = 3\n" in folded
    assert "\n.. rst-class:: sphx-glr-timing\n\n   **Total running time" in folded


def test_two_solutions_get_two_dropdowns():
    second = GENERATED.replace("Next: another page.", ".. solution 2\n\nSecond.")
    folded = ex.fold_solutions(second)
    assert folded.count(".. dropdown:: ") == 2
    second_dropdown = (
        ".. dropdown:: Solution to exercise 2\n   :class-container: attention-solution"
    )
    assert f"{second_dropdown}\n\n   Second.\n" in folded


def test_a_page_without_solutions_is_unchanged():
    page = GENERATED.replace(".. solution 1\n\n", "")
    assert ex.fold_solutions(page) == page
    assert ex.fold_solutions("No blocks at all.\n") == "No blocks at all.\n"


def test_a_marker_inside_the_exercises_block_folds_the_rest_of_it():
    page = GENERATED.replace(
        "1. **One.** A question.\n\n.. GENERATED FROM PYTHON SOURCE LINES 9-14\n\n",
        "1. **One.** A question.\n\n",
    )
    folded = ex.fold_solutions(page)
    assert "1. **One.** A question.\n\n.. dropdown:: Solution to exercise 1\n" in folded
    assert "\n   What to notice.\n" in folded


def test_two_markers_in_one_block_are_an_error():
    page = GENERATED.replace("What to notice.", "What to notice.\n\n.. solution 2")
    with pytest.raises(ValueError, match=r"'\.\. solution 2' must start a line"):
        ex.fold_solutions(page)


# -- Reading time ------------------------------------------------------------------------------


def test_prose_words_count_role_contents_and_skip_directives_and_comments():
    text = "Two words, :func:`attention.causal_mask`.\n\n.. math::\n\n.. a comment\n\nIt's here."
    assert pre.prose_words(text) == 2 + 1 + 2


def test_reading_time_follows_the_stated_rates():
    prose = " ".join(["word"] * pre.WORDS_PER_MINUTE * 3)
    code = "\n".join(["x = 1", ""] * pre.CODE_LINES_PER_MINUTE * 2)

    def include(arg, options):
        assert (arg, options) == ("../../a.py", {"pyobject": "f"})
        return "def f():\n\n    return 1\n" * pre.CODE_LINES_PER_MINUTE

    shown = ".. literalinclude:: ../../a.py\n   :pyobject: f\n"
    assert pre.reading_minutes([("text", prose, 1)], include) == 3
    assert pre.reading_minutes([("text", prose, 1), ("code", code, 2)], include) == 5
    assert pre.reading_minutes([("text", prose + "\n\n" + shown, 1)], include) == 5
    assert pre.reading_minutes([("code", "x = 1", 1)], include) == 1  # at least a minute


def test_the_rule_is_stated_in_the_conventions():
    conventions = (ROOT / "docs" / "conventions.rst").read_text(encoding="utf-8")
    assert f"{pre.WORDS_PER_MINUTE} words a minute" in conventions
    assert f"{pre.CODE_LINES_PER_MINUTE} lines of code a minute" in conventions


def test_page_label_is_sphinx_gallerys():
    assert pre.page_label("tutorials/05_masks", "04_multi_head") == (
        "sphx_glr_tutorials_04_multi_head.py"
    )


def test_page_label_finds_a_page_in_another_part(tmp_path):
    # docs/tutorials/<part>/<page>.py, as sphinx-gallery lays out the rendered gallery.
    for part, page in [("1_foundations", "05_masks"), ("4_generation", "12_decoder")]:
        (tmp_path / "tutorials" / part).mkdir(parents=True)
        (tmp_path / "tutorials" / part / f"{page}.py").write_text("")
    label = pre.page_label("tutorials/4_generation/12_decoder", "05_masks", tmp_path)
    assert label == "sphx_glr_tutorials_1_foundations_05_masks.py"
    # The same part, and a page that is nowhere (a label next to the document).
    assert pre.page_label("tutorials/1_foundations/05_masks", "05_masks", tmp_path) == (
        "sphx_glr_tutorials_1_foundations_05_masks.py"
    )
    assert pre.page_label("tutorials/4_generation/12_decoder", "99_none", tmp_path) == (
        "sphx_glr_tutorials_4_generation_99_none.py"
    )


# -- Builds ------------------------------------------------------------------------------------

PAGE = '''"""
A page with exercises
=====================

.. prerequisites:: 01_qkv_analogy 02_scaled_dot_product

Written by the test suite. {extra}
"""

# %%
# Exercises
# ---------
#
# 1. **Double.** What is twice 21?
#
# .. solution 1
#
# Multiply.

answer = 2 * 21
print(f"the answer is {{answer}}")
assert answer == {expected}

# %%
# Next: nothing.
'''

PLAIN = '''"""
A page without exercises
========================

.. prerequisites::
   :assumes: a PyTorch tensor

Written by the test suite.
"""

# %%
print("no solution here")
'''


IN_A_PART = '''"""
A page in a part
================

.. prerequisites:: 05_masks 98_exercises
   :summary: A made-up page, to find pages in other parts.

Written by the test suite.
"""

# %%
print("in a part")
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exercises")
    long = " ".join(["word"] * 3000)
    scripts = {
        "98_exercises.py": PAGE.format(extra="", expected=42),
        "98_exercises_long.py": PAGE.format(extra=long, expected=42),
        "98_plain.py": PLAIN,
        "4_generation/98_in_a_part.py": IN_A_PART,
    }
    proc = build_site_copy(tmp, scripts, pattern=r"98_")
    assert proc.returncode == 0, proc.output[-3000:]
    return tmp / "site" / "build" / "html" / "tutorials"


def _prerequisites_line(html: str) -> str:
    match = re.search(r'<p class="attention-prerequisites">(.*?)</p>', html, flags=re.DOTALL)
    assert match, html[:3000]
    return match.group(1)


def test_the_solution_is_in_a_closed_dropdown_with_its_code_and_output(built):
    html = (built / "98_exercises.html").read_text(encoding="utf-8")
    (details,) = re.findall(r"<details\b[^>]*>.*?</details>", html, flags=re.DOTALL)
    opening = details[: details.index(">") + 1]
    assert "attention-solution" in opening and " open" not in opening
    assert "Solution to exercise 1" in details
    assert "Multiply." in details
    assert re.search(r"answer.*=.*2.*\*.*21", re.sub(r"<[^>]+>", "", details))
    assert "the answer is 42" in details  # the printed output
    # The page's other text stays outside.
    assert "Next: nothing." not in details and "What is twice 21?" not in details


def test_a_page_without_solutions_has_no_dropdown(built):
    html = (built / "98_plain.html").read_text(encoding="utf-8")
    assert "<details" not in html
    assert "no solution here" in html


def test_the_prerequisites_line_links_the_pages_by_title_and_times_the_page(built):
    html = (built / "98_exercises.html").read_text(encoding="utf-8")
    line = _prerequisites_line(html)
    links = re.findall(r'<a class="reference internal" href="([^"]+)"[^>]*>(.*?)</a>', line)
    # The pages are in a part of the gallery; this one is at its top.
    assert [href for href, _ in links] == [
        "1_foundations/01_qkv_analogy.html#sphx-glr-tutorials-1-foundations-01-qkv-analogy-py",
        "1_foundations/02_scaled_dot_product.html"
        "#sphx-glr-tutorials-1-foundations-02-scaled-dot-product-py",
    ]
    for href, title in links:
        target = (built / href.split("#")[0]).read_text(encoding="utf-8")
        assert re.sub(r"<[^>]+>", "", title) in target
        assert "Queries" in title or "Scaled" in title or "scaled" in title
    assert re.search(r"Reading time: about 1 min$", line.strip())
    # The line sits under the title.
    # (The page's first words are in its <head> too, as its description for link previews.)
    title_end = html.index("</h1>")
    line_at = html.index("attention-prerequisites", title_end)
    assert line_at < html.index("Written by the test suite", title_end)


def test_the_reading_time_grows_with_the_text(built):
    short = _prerequisites_line((built / "98_exercises.html").read_text(encoding="utf-8"))
    long = _prerequisites_line((built / "98_exercises_long.html").read_text(encoding="utf-8"))
    minutes = [int(re.search(r"about (\d+) min", x).group(1)) for x in (short, long)]
    # The short page rounds up to the least there is; 3000 more words are 15 more minutes.
    assert minutes == [1, round(3000 / pre.WORDS_PER_MINUTE)]


def test_a_page_that_only_names_what_it_assumes_says_it(built):
    line = _prerequisites_line((built / "98_plain.html").read_text(encoding="utf-8"))
    assert "<strong>Prerequisites:</strong> a PyTorch tensor · Reading time: about 1 min" in line


def test_the_notebook_shows_the_line_and_a_bold_solution_heading(built):
    import json

    downloads = built.parent / "_downloads"
    (path,) = [p for p in downloads.rglob("98_exercises.ipynb")]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert re.search(
        r"\*\*Prerequisites:\*\* \[Queries[^\]]*\]\(http[^)]*01_qkv_analogy\.html[^)]*\), "
        r"\[[^\]]+\]\(http[^)]*02_scaled_dot_product\.html[^)]*\) · Reading time: about 1 min",
        markdown,
    ), markdown
    assert "**Solution to exercise 1**" in markdown
    assert ".. solution" not in markdown


def test_a_page_in_a_part_links_pages_in_other_parts(built):
    line = _prerequisites_line((built / "4_generation" / "98_in_a_part.html").read_text("utf-8"))
    hrefs = re.findall(r'<a class="reference internal" href="([^"]+)"', line)
    assert hrefs == [
        "../1_foundations/05_masks.html#sphx-glr-tutorials-1-foundations-05-masks-py",
        "../98_exercises.html#sphx-glr-tutorials-98-exercises-py",
    ]


def test_the_gallery_card_carries_the_number_the_summary_and_the_time(built):
    index = (built / "4_generation" / "index.html").read_text(encoding="utf-8")
    # The card, not the sidebar's link to the page.
    cards = re.findall(
        r'<div class="sphx-glr-thumbcontainer[^"]*".*?attention-card-time">.*?</div>',
        index[index.index("<article") :],
        flags=re.DOTALL,
    )
    (card,) = [c for c in cards if 'href="98_in_a_part.html"' in c]
    assert '<span class="attention-card-number">98</span>' in card
    assert "A made-up page, to find pages in other parts." in card
    assert re.search(r'attention-card-time">\d+ min<', card)
    assert "tooltip=" not in card


def test_the_fold_keeps_indented_blocks_intact():
    # A solution's text may hold a directive; its body stays nested under it.
    page = GENERATED.replace("What to notice.", ".. note::\n\n   Careful.")
    folded = ex.fold_solutions(page)
    assert "\n   .. note::\n\n      Careful.\n" in folded


def test_the_line_is_not_taken_for_the_pages_summary():
    # sphinx-gallery's thumbnails show the docstring's first paragraph that is no directive.
    from sphinx_gallery.gen_rst import extract_intro_and_title

    page = ROOT / "gallery" / gallery_script("01_qkv_analogy")
    docstring = page.read_text(encoding="utf-8").split('"""')[1]
    assert ".. prerequisites::" in docstring
    intro, _ = extract_intro_and_title(page, docstring)
    assert intro.startswith("Attention is a way of looking things up.")
