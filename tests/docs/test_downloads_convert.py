"""The conversion of a page's downloads (docs/_ext/attention_downloads.py), on small made-up
pages: no build needed. What the real build wrote is checked in test_built_downloads.py."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from docbuild import GALLERY_DIR, ROOT, gallery_scripts
from packaging.utils import parse_wheel_filename
from sphinx.directives.code import LiteralIncludeReader

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import attention_downloads as dl  # noqa: E402

CONFIG = SimpleNamespace(source_encoding="utf-8-sig")

#: reST a Markdown cell must not contain (outside code): directives and roles.
REST_SYNTAX = re.compile(r"^\s*\.\. [\w:-]+::|:[\w-]+:`", flags=re.MULTILINE)

MODULE = '''\
"""A made-up module."""


class Box:
    """A box."""

    def __init__(self, size: int):
        self.size = size  # (N,)

    def grow(self, by: int) -> int:
        """Grow the box."""
        total = self.size + by
        return total


def helper():
    return 1
'''


def fenced_blocks(markdown: str) -> list[str]:
    """The contents of the fenced code blocks of ``markdown``, dedented as a reader sees them."""
    blocks = re.findall(r"(?ms)^([ \t]*)(`{3,})[^\n]*\n(.*?)^\1\2[ \t]*$", markdown)
    return [textwrap.dedent(code) for _, _, code in blocks]


def markdown_prose(cell_source: str) -> str:
    """A Markdown cell without its fenced code blocks and code spans (code may show reST)."""
    text = re.sub(r"(?ms)^([ \t]*)(`{3,})[^\n]*\n.*?^\1\2[ \t]*$", "", cell_source)
    return re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", text)


class FakeLinks(dl.Links):
    def python(self, role, target, from_doc):
        if target.startswith("attention."):
            return None, f"https://site.test/generated/{target}.html#{target}"
        return None

    def label(self, name, from_doc):
        if name == "sphx_glr_tutorials_05_masks.py":
            return "Building masks", "https://site.test/tutorials/05_masks.html#building-masks"
        return None

    def document(self, name, from_doc):
        return ("API reference", "https://site.test/api.html") if name == "../api" else None

    def citation(self, key, from_doc):
        works = {
            "vaswani2017": ("Vaswani et al.", "2017", "https://site.test/references.html#id7"),
            "press2022": ("Press et al.", "2022", "https://site.test/references.html#id3"),
            "shazeer2019": ("Shazeer", "2019", None),
        }
        return works.get(key)


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "pkg" / "box.py"
    path.parent.mkdir()
    path.write_text(MODULE, encoding="utf-8")
    return path


def include_from(module: Path):
    def include(arg, options):
        assert arg == "../../pkg/box.py"
        return dl.read_literalinclude(module, options, CONFIG)

    return include


def sphinx_reads(module: Path, **options) -> str:
    return LiteralIncludeReader(str(module), options, CONFIG).read()[0]


PAGE = '''\
r"""
A made-up page
==============

It uses :class:`attention.MultiHeadAttention`, :func:`~attention.causal_mask`,
:class:`torch.nn.Linear`, :math:`\\sqrt{D}` and :ref:`sphx_glr_tutorials_05_masks.py`,
see :doc:`the reference <../api>`. Literal ``:class:`x``` stays literal.

.. literalinclude:: ../../pkg/box.py
   :language: python
   :pyobject: Box.__init__
"""

# %%
# Only a part
# -----------
#
# .. note::
#    A note with a role, :func:`attention.masks.causal_mask`.
#
# .. literalinclude:: ../../pkg/box.py
#    :language: python
#    :pyobject: Box.grow
#    :start-at: total =
#    :end-at: return total
#    :dedent: 8
#
# - A list item, with its own block:
#
#   .. literalinclude:: ../../pkg/box.py
#      :lines: 16-17
#
# .. code-block:: bash
#
#    make html
#
# A literal block::
#
#     x = 1
#
# .. A comment that no reader sees.
#
# .. math::
#
#    a = b

print("code")
'''


def test_site_url_prefers_the_variable_then_read_the_docs_then_make_serve():
    rtd = {"READTHEDOCS_CANONICAL_URL": "https://x.readthedocs.io/en/latest/"}
    assert dl.site_url({}) == "http://127.0.0.1:8000/"
    assert dl.site_url(rtd) == rtd["READTHEDOCS_CANONICAL_URL"]
    assert dl.site_url({**rtd, "ATTENTION_SITE_URL": "http://127.0.0.1:9"}) == (
        "http://127.0.0.1:9/"
    )


def test_wheel_name_is_one_pip_accepts():
    name = dl.wheel_name("0.1.0")
    assert name == "attention_in_pytorch-0.1.0-py3-none-any.whl"
    dist, version, _, tags = parse_wheel_filename(name)
    assert (dist, str(version)) == ("attention-in-pytorch", "0.1.0")
    assert {str(t) for t in tags} == {"py3-none-any"}


def test_install_cell_is_valid_ipython_that_installs_from_the_site():
    from IPython.core.inputtransformer2 import TransformerManager

    cell = dl.install_cell(
        site="http://127.0.0.1:9/",
        version="1.2.3",
        torch_requirement="torch>=2.4",
        versions={"torch": "2.13.0", "attention-in-pytorch": "1.2.3"},
    )
    python = TransformerManager().transform_cell(cell)
    compile(python, "<cell>", "exec")
    wheel = "http://127.0.0.1:9/packages/attention_in_pytorch-1.2.3-py3-none-any.whl"
    assert f"run_line_magic('pip', 'install \"torch>=2.4\" matplotlib {wheel}')" in python
    assert 'if installed != "1.2.3":' in python
    assert "torch 2.13.0, attention-in-pytorch 1.2.3" in cell


def test_notebook_carries_the_included_code_and_no_rest(tmp_path: Path, module: Path):
    page = tmp_path / "docs" / "tutorials" / "99_page.py"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE, encoding="utf-8")
    gallery_conf = {
        "first_notebook_cell": "# first",
        "last_notebook_cell": None,
        "notebook_images": False,
        "pypandoc": False,
        "promote_jupyter_magic": False,
        "remove_config_comments": True,
    }
    notebook, includes = dl.convert_notebook(
        page, gallery_conf, include=include_from(module), links=FakeLinks(), docname="t/99"
    )
    cells = notebook["cells"]
    assert [c["cell_type"] for c in cells] == ["code", "markdown", "markdown", "code"]
    assert "".join(cells[-1]["source"]) == 'print("code")'
    markdown = "".join(cells[1]["source"]) + "".join(cells[2]["source"])

    expected = [
        sphinx_reads(module, pyobject="Box.__init__"),
        sphinx_reads(module, pyobject="Box.grow", **{"start-at": "total =", "end-at": "return"}),
        sphinx_reads(module, lines="16-17"),
    ]
    expected = [textwrap.dedent(code) for code in expected]
    assert includes == expected
    assert expected[1] == "total = self.size + by\nreturn total\n"
    blocks = fenced_blocks(markdown)
    for code in expected:
        assert code in blocks
    # A method shows from the margin, under the file and the object it comes from.
    assert expected[0].startswith("def __init__")
    assert "*From `pkg/box.py`: `Box.__init__`:*\n\n```python\n" + expected[
        0
    ].rstrip() + "\n```" in (markdown)
    # Inside a list item the block keeps the item's indentation.
    assert "  ```python\n  def helper():\n      return 1\n  ```" in markdown

    assert "[`attention.MultiHeadAttention`](https://site.test/generated/" in markdown
    assert "[`causal_mask()`](https://site.test/generated/attention.causal_mask.html" in markdown
    assert "`torch.nn.Linear`" in markdown and "[`torch.nn.Linear`]" not in markdown
    assert "$\\sqrt{D}$" in markdown
    assert "[Building masks](https://site.test/tutorials/05_masks.html#building-masks)" in markdown
    assert "[the reference](https://site.test/api.html)" in markdown
    assert "``:class:`x```" in markdown
    assert "\n\n> **Note**\n>\n> A note with a role, [`attention.masks" in markdown
    assert "```bash\nmake html\n```" in markdown
    assert "A literal block:\n\n```\nx = 1\n```" in markdown
    assert "$$\na = b\n$$" in markdown
    assert "comment" not in markdown
    assert "# A made-up page" in markdown and "## Only a part" in markdown
    assert not REST_SYNTAX.search(markdown_prose(markdown)), markdown


def test_roles_without_links_become_plain_code():
    converter = dl._Converter(include=None, links=dl.Links(), docname="x")
    text = converter.finish(
        converter.prepare_text(":class:`attention.X`, :meth:`a.b <attention.X.b>`, :term:`q`")
    )
    assert text == "`attention.X`, `a.b`, `q`"


def test_citations_become_author_year_text_linked_to_the_bibliography():
    converter = dl._Converter(include=None, links=FakeLinks(), docname="tutorials/99")
    text = converter.finish(
        converter.prepare_text(
            "As in :cite:t:`vaswani2017`, ALiBi :cite:p:`press2022` and MQA\n"
            ":cite:p:`shazeer2019, vaswani2017`; :cite:t:`press2022,shazeer2019`."
        )
    )
    assert text == (
        "As in [Vaswani et al. (2017)](https://site.test/references.html#id7), ALiBi "
        "([Press et al., 2022](https://site.test/references.html#id3)) and MQA\n"
        "(Shazeer, 2019; [Vaswani et al., 2017](https://site.test/references.html#id7)); "
        "[Press et al. (2022)](https://site.test/references.html#id3), Shazeer (2019)."
    )
    assert not REST_SYNTAX.search(text)


def test_citations_name_one_two_or_the_first_of_many_authors():
    assert dl.cite_authors(["Shazeer"]) == "Shazeer"
    assert dl.cite_authors(["Rabe", "Staats"]) == "Rabe and Staats"
    assert dl.cite_authors(["Press", "Smith", "Lewis"]) == "Press et al."


def test_unknown_citations_keep_their_key_without_rest():
    converter = dl._Converter(include=None, links=dl.Links(), docname="x")
    text = converter.finish(converter.prepare_text(":cite:p:`nobody2000` and :cite:t:`x`"))
    assert text == "(nobody2000) and x"


def test_script_gets_a_header_and_the_included_code_as_plain_comments(module: Path):
    text, includes = dl.convert_script(
        PAGE, include=include_from(module), header="# HEADER\n", links=FakeLinks()
    )
    assert text.startswith('# HEADER\nr"""\nA made-up page\n')
    assert len(includes) == 3
    assert ".. literalinclude::" not in text and ".. code-block::" not in text
    # In the docstring, plain lines; in a comment block, commented lines; each excerpt under
    # its file and object, dedented, then indented by 4.
    assert "\nFrom `pkg/box.py`: `Box.__init__`:\n\n    def __init__(self, size: int):\n" in text
    assert (
        "\n# From `pkg/box.py`: `Box.grow`:\n#\n#     total = self.size + by\n#     return total\n"
        in (text)
    )
    assert "\n#   From `pkg/box.py`, lines 16-17:\n#\n#       def helper():\n" in text
    # Roles are their text, without links; literals read as `code`; maths as LaTeX.
    assert "It uses `attention.MultiHeadAttention`, `causal_mask()`," in text
    assert "and Building masks," in text and "see the reference." in text
    assert "Literal `:class:`x`` stays literal." in text
    assert "# Note: A note with a role, `attention.masks.causal_mask()`." in text
    assert "#     make html\n" in text and "# A literal block:\n#\n#     x = 1\n" in text
    assert "comment" not in text
    compile(text, "page.py", "exec")
    # The program is the page's: only the docstring and the comments changed.
    assert '\nprint("code")' in text


def test_an_include_that_would_end_the_docstring_is_refused(module: Path):
    page = 'r"""\nT\n=\n\n.. literalinclude:: ../../pkg/box.py\n   :pyobject: Box\n"""\n'
    with pytest.raises(ValueError, match="triple quote"):
        dl.convert_script(page, include=include_from(module), header="")


EXERCISES_PAGE = '''\
"""
A page with exercises
=====================

.. prerequisites:: 04_multi_head 05_masks
   :assumes: a ``torch.Tensor``

Text.
"""

# %%
# Exercises
# ---------
#
# 1. **One.** A question.
#
# .. solution 1
#
# What to notice.

print(1)

# %%
# .. solution 2

print(2)
'''


class ExerciseLinks(FakeLinks):
    def label(self, name, from_doc):
        if name == "sphx_glr_tutorials_04_multi_head.py":
            return "Multi-head", "https://site.test/tutorials/04_multi_head.html#mh"
        return super().label(name, from_doc)


def test_notebook_folds_the_solutions_and_shows_the_prerequisites_line(tmp_path: Path):
    page = tmp_path / "docs" / "tutorials" / "99_page.py"
    page.parent.mkdir(parents=True)
    page.write_text(EXERCISES_PAGE, encoding="utf-8")
    gallery_conf = {"first_notebook_cell": None, "last_notebook_cell": None}
    gallery_conf |= {"notebook_images": False, "pypandoc": False}
    gallery_conf |= {"promote_jupyter_magic": False, "remove_config_comments": True}
    notebook, _ = dl.convert_notebook(
        page, gallery_conf, include=None, links=ExerciseLinks(), docname="tutorials/99_page"
    )
    cells = notebook["cells"]
    kinds = [c["cell_type"] for c in cells]
    assert kinds == ["markdown", "markdown", "markdown", "markdown", "code", "markdown", "code"]
    sources = ["".join(c["source"]) for c in cells]
    hidden = [bool(c["metadata"].get("jupyter", {}).get("source_hidden")) for c in cells]
    # Both pages linked by title, and the reading time the page shows (1 minute: short).
    assert (
        "**Prerequisites:** [Multi-head](https://site.test/tutorials/04_multi_head.html#mh), "
        "[Building masks](https://site.test/tutorials/05_masks.html#building-masks), "
        "a ``torch.Tensor`` · "
        "Reading time: about 1 min"
    ) in sources[0]
    # The exercises, then each solution's heading (shown) and its cells (folded).
    assert sources[1].strip().endswith("1. **One.** A question.")
    assert sources[2].startswith("**Solution to exercise 1** (folded")
    assert sources[3].strip() == "What to notice."
    assert sources[5].startswith("**Solution to exercise 2** (folded")
    assert hidden == [False, False, False, True, True, False, True]
    for markdown in (sources[0], sources[1], sources[2], sources[5]):
        assert ".. " not in markdown and not REST_SYNTAX.search(markdown_prose(markdown))


def test_notebook_keeps_hidden_lines_each_block_a_folded_cell(tmp_path: Path):
    page = tmp_path / "99_page.py"
    page.write_text(
        '"""\nT\n=\n\nText.\n"""\n\n# %%\n# A check.\n\nx = 1\n# sphinx_gallery_start_ignore\n'
        "assert x == 1\n# sphinx_gallery_end_ignore\nprint(x)\n\n# %%\n"
        "for i in range(2):\n    # sphinx_gallery_start_ignore\n    assert i < 2\n"
        "    # sphinx_gallery_end_ignore\n    print(i)\n",
        encoding="utf-8",
    )
    gallery_conf = {"first_notebook_cell": None, "last_notebook_cell": None}
    gallery_conf |= {"notebook_images": False, "pypandoc": False}
    gallery_conf |= {"promote_jupyter_magic": False, "remove_config_comments": True}
    notebook, _ = dl.convert_notebook(
        page, gallery_conf, include=None, links=dl.Links(), docname="tutorials/99_page"
    )
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in code]
    hidden = [bool(c["metadata"].get("jupyter", {}).get("source_hidden")) for c in code]
    note = dl.HIDDEN_CODE_NOTE["en"]
    # The hidden block at the top level is a cell of its own, in order, folded; one inside a
    # loop stays in the loop's cell, without its markers.
    assert sources == [
        "x = 1",
        f"{note}\nassert x == 1",
        "print(x)",
        "for i in range(2):\n    assert i < 2\n    print(i)",
    ]
    assert hidden == [False, True, False, False]
    # The notebook runs as the page does.
    namespace: dict = {}
    for source in sources:
        exec(source, namespace)
    assert namespace["x"] == 1


def test_script_says_the_prerequisites_and_the_solutions_in_words():
    text, _ = dl.convert_script(
        EXERCISES_PAGE,
        include=None,
        header="",
        links=ExerciseLinks(),
        docname="tutorials/99_page",
        minutes=3,
    )
    assert (
        "\nPrerequisites: Multi-head, Building masks, a `torch.Tensor` · "
        "Reading time: about 3 min\n" in text
    )
    assert "\n# Solution to exercise 1:\n" in text and "\n# Solution to exercise 2:\n" in text
    assert ".. " not in text and ":cite:" not in text
    compile(text, "page.py", "exec")


FIRST_PAGE = '''\
"""
The first page
==============

.. prerequisites::
   :summary: A summary that goes on
      over two lines.
   :assumes: a PyTorch tensor

Text.
"""

print(1)
'''


def _first_markdown(tmp_path: Path, text: str) -> str:
    page = tmp_path / "docs" / "tutorials" / "99_page.py"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    gallery_conf = {"first_notebook_cell": None, "last_notebook_cell": None}
    gallery_conf |= {"notebook_images": False, "pypandoc": False}
    gallery_conf |= {"promote_jupyter_magic": False, "remove_config_comments": True}
    notebook, _ = dl.convert_notebook(
        page, gallery_conf, include=None, links=FakeLinks(), docname="tutorials/99_page"
    )
    return "".join(notebook["cells"][0]["source"])


def test_a_page_that_assumes_no_page_says_what_it_assumes(tmp_path: Path):
    """An option that goes on over two lines (:summary:) does not hide the next (:assumes:)."""
    first = _first_markdown(tmp_path, FIRST_PAGE)
    assert "**Prerequisites:** a PyTorch tensor · Reading time: about 1 min" in first, first
    text, _ = dl.convert_script(FIRST_PAGE, include=None, header="", links=FakeLinks(), minutes=2)
    assert "\nPrerequisites: a PyTorch tensor · Reading time: about 2 min\n" in text, text


def test_a_page_that_assumes_nothing_prints_its_reading_time_alone(tmp_path: Path):
    page = FIRST_PAGE.replace("   :assumes: a PyTorch tensor\n", "")
    first = _first_markdown(tmp_path, page)
    assert "Prerequisites" not in first and "\nReading time: about 1 min\n" in first, first


def test_script_citations_are_author_and_year():
    page = '"""\nT\n=\n\nAs :cite:t:`vaswani2017` wrote :cite:p:`press2022`.\n"""\n'
    text, _ = dl.convert_script(page, include=None, header="", links=FakeLinks())
    assert "As Vaswani et al. (2017) wrote (Press et al., 2022)." in text


TRITON_PAGE = '''"""
A kernel
========

Runs a Triton kernel.
"""

import torch

from attention.flash_triton import flash_attention

print("kernel")
'''


def test_a_page_that_imports_the_triton_kernels_installs_triton_or_stops(tmp_path: Path):
    from IPython.core.inputtransformer2 import TransformerManager

    assert dl.needs_triton(TRITON_PAGE) and dl.needs_triton("from attention import flash_triton")
    assert not dl.needs_triton(PAGE) and not dl.needs_triton("# attention.flash_triton, later")
    page = tmp_path / "21_kernel.py"
    page.write_text(TRITON_PAGE, encoding="utf-8")
    gallery_conf = {
        "first_notebook_cell": "# the install cell",
        "last_notebook_cell": None,
        "notebook_images": False,
        "pypandoc": False,
        "promote_jupyter_magic": False,
        "remove_config_comments": True,
    }
    notebook, _ = dl.convert_notebook(
        page, gallery_conf, include=lambda *_: "", links=FakeLinks(), docname="t/21"
    )
    first = "".join(notebook["cells"][0]["source"])
    assert first.startswith(dl.triton_cell(dl.triton_requirement()))
    assert first.endswith("# the install cell")
    cell = TransformerManager().transform_cell(dl.triton_cell("triton==3.9.0"))
    assert "run_line_magic('pip', 'install \"triton==3.9.0\"')" in cell
    # Where Triton has no wheel the cell stops, before installing anything, and says why.
    for platform, stops in (("darwin", True), ("win32", True), ("linux", False)):
        namespace = {"get_ipython": lambda: SimpleNamespace(run_line_magic=lambda *_: None)}
        code = cell.replace("import sys\n", f"import sys\nsys.platform = {platform!r}\n", 1)
        saved = sys.platform
        try:
            if stops:
                with pytest.raises(RuntimeError, match="wheels for Linux only"):
                    exec(compile(code, "<cell>", "exec"), namespace)
            else:
                exec(compile(code, "<cell>", "exec"), namespace)
        finally:
            sys.platform = saved


def test_a_widget_becomes_a_link_to_the_sites_page():
    # A notebook or script has no widget: it says where the page that holds one is.
    class PageLinks(dl.Links):
        def document(self, name, from_doc):
            assert name == "/tutorials/99" and from_doc == "tutorials/99"
            return "A page", "https://site.test/tutorials/99.html"

    source = "Try it:\n\n.. widget:: language-model\n   :model: char-lm\n\nAfter."
    for language, words in dl.WIDGET_WORDS.items():
        converter = dl._Converter(
            include=None, links=PageLinks(), docname="tutorials/99", language=language
        )
        markdown = converter.finish(converter.prepare_text(source))
        assert f"*[{words}](https://site.test/tutorials/99.html).*" in markdown, markdown
        assert "language-model" not in markdown and "widget" not in markdown
        plain = dl._Converter(
            include=None, links=PageLinks(), docname="tutorials/99", plain=True, language=language
        )
        text = plain.finish(plain.prepare_text(source))
        assert f"({words}: https://site.test/tutorials/99.html)" in text, text


def test_a_head_view_is_left_out_of_the_downloads():
    # The site's view of the figure above (attention_headviews): the download keeps the figure.
    source = "The figure.\n\n.. head-view:: 16-methods\n\nAfter."
    for plain in (False, True):
        converter = dl._Converter(include=None, links=dl.Links(), docname="t/99", plain=plain)
        text = converter.finish(converter.prepare_text(source))
        assert "The figure." in text and "After." in text, text
        assert "head-view" not in text and "16-methods" not in text, text


@pytest.mark.parametrize("script", gallery_scripts(), ids=lambda s: Path(s).stem)
def test_every_cell_of_every_notebook_is_python_on_its_own(script):
    # The page's code cut as the notebook cuts it: what the page shows and each hidden block.
    from attention_prerequisites import script_blocks

    # A marker with words after it hides from there to the next end marker on the page, and
    # leaves its words as code in the notebook.
    source = (GALLERY_DIR / script).read_text(encoding="utf-8")
    assert not re.search(r"sphinx_gallery_(start|end)_ignore[ \t]*\S", source), script
    # Each end marker at its start marker's indentation: one that is deeper hides the head of
    # a block (a loop's `for` line) and shows its body.
    markers = re.findall(r"^([ \t]*)# sphinx_gallery_(start|end)_ignore$", source, re.MULTILINE)
    for (indent, kind), (end_indent, end_kind) in zip(markers[::2], markers[1::2], strict=True):
        assert (kind, end_kind) == ("start", "end"), f"{script}: markers out of order"
        assert indent == end_indent, f"{script}: a hidden block ends at another indentation"
    gallery_conf = {"remove_config_comments": True}
    blocks = script_blocks(GALLERY_DIR / script, gallery_conf, hidden=True)
    cells = [(label, content) for label, content, _ in blocks if label in ("code", "hidden")]
    assert any(label == "code" for label, _ in cells)
    for i, (label, content) in enumerate(cells):
        try:
            compile(textwrap.dedent(content), f"{script}, cell {i} ({label})", "exec")
        except SyntaxError as error:
            pytest.fail(f"{script}: a notebook cell is not Python on its own: {error}")


def test_an_excerpt_without_its_docstring_starts_at_the_signature_and_keeps_the_code(module):
    whole = dl.read_literalinclude(module, {"pyobject": "Box.grow"}, CONFIG)
    shown = dl.read_literalinclude(module, {"pyobject": "Box.grow", "no-docstring": ""}, CONFIG)
    assert '"""' in whole and '"""' not in shown
    assert shown.splitlines()[0] == whole.splitlines()[0]  # the signature
    assert shown.splitlines()[-1] == whole.splitlines()[-1]  # the code, to its end
    assert len(shown.splitlines()) < len(whole.splitlines())
