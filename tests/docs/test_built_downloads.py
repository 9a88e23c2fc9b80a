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
from docbuild import GALLERY_DIR, ROOT, gallery_scripts
from sphinx.directives.code import LiteralInclude, LiteralIncludeReader
from test_downloads_convert import REST_SYNTAX, fenced_blocks, markdown_prose

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
            options[option.group("name")] = LiteralInclude.option_spec[option.group("name")](value)
        path = (TUTORIALS_SRC / match.group("path")).resolve()
        config = SimpleNamespace(source_encoding="utf-8-sig")
        texts.append(LiteralIncludeReader(str(path), options, config).read()[0])
    return texts


def download(html_dir: Path, name: str) -> Path:
    (path,) = html_dir.glob(f"_downloads/*/{name}")
    return path


def notebook_cells(html_dir: Path, script: str) -> list[dict]:
    path = download(html_dir, script.replace(".py", ".ipynb"))
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
    match = re.fullmatch(r"pip install (\S+/packages/" + re.escape(WHEEL) + ")", line)
    assert match, f"the landing page's install line names no wheel {WHEEL}: {line!r}"
    return match.group(1)


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

    py = download(html_dir, script).read_text(encoding="utf-8")
    assert ".. literalinclude::" not in py
    uncommented = "\n".join(re.sub(r"^# ?", "", line) for line in py.splitlines())
    for text in included:
        shown = [textwrap.indent(text.rstrip("\n"), " " * k, str.strip) for k in range(4, 17)]
        assert any(s in uncommented for s in shown), f"{script}.py lacks:\n{text}"


@pytest.mark.parametrize("script", gallery_scripts())
def test_script_header_says_how_to_install(html_dir: Path, wheel_url: str, script: str):
    py = download(html_dir, script).read_text(encoding="utf-8")
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
        for cell in notebook_cells(html_dir, "07_transformer_block.py")
        if cell["cell_type"] == "markdown"
    )
    links = re.findall(r"\[Vaswani et al\. \(2017\)\]\((\S+?)#(\w+)\)", markdown)
    assert links, "page 7's notebook names no Vaswani et al. (2017)"
    bibliography = (html_dir / "references.html").read_text(encoding="utf-8")
    for url, anchor in links:
        assert url.endswith("/references.html")
        assert f'id="{anchor}"' in bibliography
    assert "(Ba et al., 2016)" in re.sub(r"\[([^\]]+)\]\(\S+?\)", r"\1", markdown)
