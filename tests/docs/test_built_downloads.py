"""What the real build published for readers outside the project: the package's wheel, and
downloads that install it and carry the code their page shows, with no reST left in them.

The included code is read here with Sphinx's own ``LiteralIncludeReader`` from the options
written in each gallery script, independently of the build's conversion.
"""

from __future__ import annotations

import json
import re
import textwrap
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
from docbuild import GALLERY_DIR, ROOT, gallery_script, gallery_scripts
from sphinx.directives.code import LiteralInclude, LiteralIncludeReader
from test_downloads_convert import REST_SYNTAX, dl, fenced_blocks, markdown_prose

DIST = "attention-in-pytorch"
VERSION = metadata.version(DIST)
WHEEL = f"attention_in_pytorch-{VERSION}-py3-none-any.whl"
#: Where the gallery's pages are rendered: literalinclude paths are relative to it.
TUTORIALS_SRC = ROOT / "docs" / "tutorials"

_DIRECTIVE = re.compile(r"^(?P<prefix>#? ?)(?P<indent> *)\.\. literalinclude:: *(?P<path>\S+) *$")
_OPTION = re.compile(r"^ +:(?P<name>[\w-]+):(?P<value>.*)$")


def literalincludes(script: str) -> list[str]:
    """The texts the literalincludes of a gallery script show, as Sphinx reads them."""
    lines = (GALLERY_DIR / script).read_text(encoding="utf-8").splitlines()
    texts = []
    for i, line in enumerate(lines):
        match = _DIRECTIVE.match(line)
        if not match:
            continue
        options = {}
        for option_line in lines[i + 1 :]:
            option = _OPTION.match(option_line[len(match.group("prefix")) :])
            if not option_line.startswith(match.group("prefix")) or not option:
                break
            value = option.group("value").strip() or None
            if option.group("name") == dl.NO_DOCSTRING:
                options[dl.NO_DOCSTRING] = True
                continue
            options[option.group("name")] = LiteralInclude.option_spec[option.group("name")](value)
        # Relative to the rendered page, docs/tutorials/<part>/.
        path = (TUTORIALS_SRC / Path(script).parent / match.group("path")).resolve()
        config = SimpleNamespace(source_encoding="utf-8-sig")
        no_docstring = options.pop(dl.NO_DOCSTRING, False)
        text = LiteralIncludeReader(str(path), options, config).read()[0]
        texts.append(dl.without_docstring(text) if no_docstring else text)
    return texts


def download(html_dir: Path, name: str) -> Path:
    (path,) = html_dir.glob(f"_downloads/*/{name}")
    return path


def notebook_cells(html_dir: Path, script: str) -> list[dict]:
    path = download(html_dir, Path(script).with_suffix(".ipynb").name)
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def install_line(html_dir: Path) -> str:
    """The landing page's ``pip install`` line (its code block, tags removed)."""
    text = (html_dir / "index.html").read_text(encoding="utf-8")
    section = text[text.index('id="install-the-package"') :]
    block = re.search(r"<pre>(.*?)</pre>", section, flags=re.DOTALL).group(1)
    return re.sub(r"<[^>]+>", "", block).strip()


@pytest.fixture(scope="module")
def wheel_url(html_dir: Path) -> str:
    line = install_line(html_dir)
    match = re.fullmatch(r"pip install matplotlib (\S+/packages/" + re.escape(WHEEL) + ")", line)
    assert match, f"the landing page's install line names no matplotlib and wheel {WHEEL}: {line!r}"
    return match.group(1)


def test_landing_page_says_how_to_install_a_cpu_only_pytorch(html_dir: Path):
    text = re.sub(r"<[^>]+>", "", (html_dir / "index.html").read_text(encoding="utf-8"))
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in text


def test_wheel_is_published_with_every_module(html_dir: Path, wheel_url: str):
    wheels = sorted(p.name for p in (html_dir / "packages").glob("*.whl"))
    assert wheels == [WHEEL]
    with zipfile.ZipFile(html_dir / "packages" / WHEEL) as wheel:
        names = set(wheel.namelist())
        meta = Parser().parsestr(
            wheel.read(f"attention_in_pytorch-{VERSION}.dist-info/METADATA").decode()
        )
    assert (meta["Name"], meta["Version"]) == (DIST, VERSION)
    assert any(r.startswith("torch") for r in meta.get_all("Requires-Dist"))
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "attention").rglob("*.py")}
    assert modules and modules <= names, f"missing from the wheel: {sorted(modules - names)}"
    assert all(n.startswith(("attention/", "attention_in_pytorch-")) for n in names), names


@pytest.mark.parametrize("script", gallery_scripts())
def test_notebook_first_cell_installs_the_sites_wheel(html_dir: Path, wheel_url: str, script):
    first = notebook_cells(html_dir, script)[0]
    source = "".join(first["source"])
    assert first["cell_type"] == "code"
    assert re.search(
        rf'^    %pip install "torch>=[\d.]+" matplotlib {re.escape(wheel_url)}$',
        source,
        flags=re.MULTILINE,
    ), source
    for dist in ("torch", "numpy", "matplotlib", DIST):
        assert f"{dist} {metadata.version(dist)}" in source


@pytest.mark.parametrize("script", gallery_scripts())
def test_notebook_markdown_has_no_rest(html_dir: Path, script: str):
    problems = []
    for index, cell in enumerate(notebook_cells(html_dir, script)):
        if cell["cell_type"] != "markdown":
            continue
        for match in REST_SYNTAX.finditer(markdown_prose("".join(cell["source"]))):
            problems.append(f"cell {index + 1}: {match.group(0)!r}")
    assert not problems, f"{script}'s notebook shows reST:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("script", gallery_scripts())
def test_notebook_and_script_name_what_their_page_assumes(html_dir: Path, script: str):
    """The prerequisites line of a notebook and of a script names a page or says what the page
    assumes (page 1 assumes "a PyTorch tensor and a matrix product"); a line with a label and
    nothing after it is never printed."""
    first = "".join(notebook_cells(html_dir, script)[1]["source"])
    line = next(x for x in first.splitlines() if "Reading time" in x)
    assert re.match(r"\*\*Prerequisites:\*\* [^·\s]", line), f"{script}'s notebook: {line!r}"
    text = download(html_dir, Path(script).name).read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if "Reading time" in x)
    assert re.match(r"Prerequisites: [^·\s]", line), f"{script}'s script: {line!r}"


@pytest.mark.parametrize("script", gallery_scripts())
def test_downloads_carry_the_code_their_page_includes(html_dir: Path, script: str):
    included = literalincludes(script)
    cells = notebook_cells(html_dir, script)
    blocks = [
        block
        for cell in cells
        if cell["cell_type"] == "markdown"
        for block in fenced_blocks("".join(cell["source"]))
    ]
    missing = [text for text in included if textwrap.dedent(text) not in blocks]
    assert not missing, f"{script}'s notebook lacks included code:\n" + "\n---\n".join(missing)

    py = download(html_dir, Path(script).name).read_text(encoding="utf-8")
    assert ".. literalinclude::" not in py
    uncommented = "\n".join(re.sub(r"^# ?", "", line) for line in py.splitlines())
    for text in included:
        code = textwrap.dedent(text).rstrip("\n")
        shown = [textwrap.indent(code, " " * k, str.strip) for k in range(4, 17)]
        assert any(s in uncommented for s in shown), f"{script}.py lacks:\n{text}"


def _raw_fences(markdown: str) -> list[str]:
    """The contents of the fenced blocks of ``markdown`` as written, relative to the fence."""
    blocks = re.findall(r"(?ms)^([ \t]*)(`{3,})[^\n]*\n(.*?)^\1\2[ \t]*$", markdown)
    return [
        "\n".join(line[len(indent) :] for line in code.split("\n")) for indent, _, code in blocks
    ]


@pytest.mark.parametrize("script", gallery_scripts())
def test_notebook_excerpts_start_at_the_margin(html_dir: Path, script: str):
    """A method's excerpt shows from the margin in a notebook, not 8 spaces in."""
    indented = []
    for cell in notebook_cells(html_dir, script):
        if cell["cell_type"] == "markdown":
            for code in _raw_fences("".join(cell["source"])):
                if code.strip() and textwrap.dedent(code) != code:
                    indented.append(code.split("\n")[0])
    assert not indented, f"{script}'s notebook shows indented excerpts: {indented}"


@pytest.mark.parametrize("script", gallery_scripts())
def test_notebook_folds_every_solution(html_dir: Path, script: str):
    """Each exercise's solution cells are folded (jupyter.source_hidden), its heading is not,
    and no code cell is empty."""
    cells = notebook_cells(html_dir, script)
    source = (GALLERY_DIR / script).read_text(encoding="utf-8")
    solutions = len(re.findall(r"^# \.\. solution \d+\s*$", source, flags=re.MULTILINE))
    headings = [
        i
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "markdown"
        and re.match(r"\*\*Solution to exercise \d+\*\*", "".join(cell["source"]))
    ]
    assert len(headings) == solutions, f"{script}: {len(headings)} solution headings"
    for i in headings:
        assert not cells[i]["metadata"].get("jupyter", {}).get("source_hidden")
        following = cells[i + 1]
        assert following["metadata"].get("jupyter", {}).get("source_hidden"), (
            f"{script}: the cell after solution heading {i} is not folded"
        )
    empty = [
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "code" and not "".join(c["source"]).strip()
    ]
    assert not empty, f"{script}: empty code cells {empty}"


#: Sphinx markup that a downloaded script's docstring and comments must not show.
_SCRIPT_MARKUP = re.compile(
    r"^\s*\.\. [\w:-]+::|:[\w-]+:`|^\s*\.\. solution \d+\s*$|``", flags=re.MULTILINE
)


@pytest.mark.parametrize("script", gallery_scripts())
def test_script_reads_as_python_with_plain_comments(html_dir: Path, script: str):
    """No directive (``.. prerequisites::``), role (``:cite:p:``), solution marker or reST
    literal in the downloaded script's docstring and text comments; the code is the page's."""
    import ast

    py = download(html_dir, Path(script).name).read_text(encoding="utf-8")
    tree = ast.parse(py)
    docstring = ast.get_docstring(tree) or ""
    comments = []
    lines = py.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# %%"):
            j = i + 1
            while j < len(lines) and lines[j].startswith("#") and not lines[j].startswith("# %%"):
                comments.append(lines[j][2:])
                j += 1
    # Code shown in the comments is indented by 4 or more: it may hold anything.
    prose = [line for line in [*docstring.splitlines(), *comments] if not line.startswith("    ")]
    found = [m.group(0) for m in _SCRIPT_MARKUP.finditer("\n".join(prose))]
    assert not found, f"{script}.py shows Sphinx markup: {found[:5]}"


@pytest.mark.parametrize("script", gallery_scripts())
def test_script_header_says_how_to_install(html_dir: Path, wheel_url: str, script: str):
    py = download(html_dir, Path(script).name).read_text(encoding="utf-8")
    header = py[: py.index('r"""') if 'r"""' in py else py.index('"""')]
    assert re.search(
        rf'^#     pip install "torch>=[\d.]+" matplotlib {re.escape(wheel_url)}$',
        header,
        flags=re.MULTILINE,
    ), header
    compile(py, script, "exec")


def test_zips_hold_the_converted_downloads(html_dir: Path):
    converted = {
        path.name: path.read_bytes()
        for path in html_dir.glob("_downloads/*/*")
        if path.suffix in (".py", ".ipynb")
    }
    zips = sorted(html_dir.glob("_downloads/*/*.zip"))
    assert len(zips) >= len(gallery_scripts())
    checked = 0
    for path in zips:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = Path(info.filename).name
                if name in converted:
                    assert archive.read(info) == converted[name], f"{path.name}: {name}"
                    checked += 1
    assert checked >= 2 * len(gallery_scripts()) * 2  # each page's zip and the two galleries'


def test_notebook_citations_link_to_entries_of_the_bibliography(html_dir: Path):
    markdown = "".join(
        "".join(cell["source"])
        for cell in notebook_cells(html_dir, gallery_script("07_transformer_block"))
        if cell["cell_type"] == "markdown"
    )
    links = re.findall(r"\[Vaswani et al\. \(2017\)\]\((\S+?)#(\w+)\)", markdown)
    assert links, "page 7's notebook names no Vaswani et al. (2017)"
    bibliography = (html_dir / "references.html").read_text(encoding="utf-8")
    for url, anchor in links:
        assert url.endswith("/references.html")
        assert f'id="{anchor}"' in bibliography
    assert "(Ba et al., 2016)" in re.sub(r"\[([^\]]+)\]\(\S+?\)", r"\1", markdown)
