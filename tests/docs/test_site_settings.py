"""The site settings of docs/_ext/attention_site.py and conf.py: links to other projects'
documentation (intersphinx), the bibliography, the memory column of the computation-times page
and the text the search indexes. The build tests here build small throwaway projects, in
seconds, with nothing reaching the network."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from docbuild import ROOT, load_conf

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import attention_site as site  # noqa: E402

#: A port on this machine that nothing listens on (the "discard" port): connections are refused.
CLOSED = "http://127.0.0.1:9"


def build(tmp_path: Path, conf: str, index: str) -> subprocess.CompletedProcess:
    """Build a one-page project with ``conf`` and ``index.rst`` under ``-W``; the process."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(textwrap.dedent(conf), encoding="utf-8")
    (src / "index.rst").write_text(textwrap.dedent(index), encoding="utf-8")
    env = {**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1", "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-E"]
    return subprocess.run(
        [*cmd, str(src), str(tmp_path / "out")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )


# -- Intersphinx -------------------------------------------------------------------------------


def test_intersphinx_is_on_on_read_the_docs_or_on_request():
    assert site.intersphinx_enabled({"READTHEDOCS": "True"})
    assert site.intersphinx_enabled({"ATTENTION_INTERSPHINX": "1"})
    assert not site.intersphinx_enabled({"READTHEDOCS": "", "ATTENTION_INTERSPHINX": ""})
    conf = load_conf(READTHEDOCS="True", ATTENTION_INTERSPHINX="")
    assert "sphinx.ext.intersphinx" in conf["extensions"]
    mapping = conf["intersphinx_mapping"]
    assert set(mapping) == {"python", "torch", "numpy", "matplotlib"}
    for url, (online, fallback) in mapping.values():
        assert url.startswith("https://") and online is None
        assert Path(fallback).is_file()


def test_readthedocs_config_turns_intersphinx_on_explicitly():
    text = (ROOT / ".readthedocs.yaml").read_text(encoding="utf-8")
    commands = [line for line in text.splitlines() if line.strip().startswith("- ")]
    assert any("ATTENTION_INTERSPHINX=1" in line and "make html" in line for line in commands)


def test_empty_inventory_is_a_valid_inventory_of_nothing(tmp_path):
    from sphinx.util.inventory import InventoryFile

    path = site.empty_inventory(tmp_path / "empty.inv")
    with open(path, "rb") as f:
        inventory = InventoryFile.load(f, "https://example.invalid", lambda base, uri: uri)
    assert len(getattr(inventory, "data", inventory)) == 0  # a dict, or an _Inventory
    assert site.empty_inventory(path).read_bytes() == path.read_bytes()  # rewriting: the same


INTERSPHINX_CONF = """\
    import sys
    sys.path.insert(0, {ext!r})
    import attention_site
    extensions = ["sphinx.ext.intersphinx"]
    projects = {{name: {closed!r} + "/" + name for name in attention_site.INTERSPHINX_PROJECTS}}
    {mapping}
    intersphinx_timeout = 5
"""
WITH_FALLBACK = "intersphinx_mapping = attention_site.intersphinx_mapping(projects, {fallback!r})"
WITHOUT_FALLBACK = "intersphinx_mapping = {{name: (url, None) for name, url in projects.items()}}"
INDEX = """\
    Page
    ====

    A :class:`torch.Tensor`, an :class:`int` and a :func:`numpy.exp`.
"""


def intersphinx_conf(tmp_path: Path, mapping: str) -> str:
    fallback = str(site.empty_inventory(tmp_path / "empty.inv"))
    return INTERSPHINX_CONF.format(
        ext=str(ROOT / "docs" / "_ext"),
        closed=CLOSED,
        mapping=mapping.format(fallback=fallback),
    )


def test_unreachable_inventories_do_not_fail_the_build(tmp_path):
    proc = build(tmp_path, intersphinx_conf(tmp_path, WITH_FALLBACK), INDEX)
    assert proc.returncode == 0, proc.stdout
    # The failure is reported, as information, and the names are shown unlinked.
    assert "127.0.0.1:9" in proc.stdout
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "torch.Tensor" in html and "127.0.0.1" not in html


def test_without_the_fallback_an_unreachable_inventory_fails_the_build(tmp_path):
    # What the fallback prevents: Sphinx's own warning, which -W makes an error.
    proc = build(tmp_path, intersphinx_conf(tmp_path, WITHOUT_FALLBACK), INDEX)
    assert proc.returncode != 0
    assert "failed to reach any of the inventories" in proc.stdout


def test_other_warnings_still_fail_the_build_with_intersphinx_on(tmp_path):
    index = INDEX + "\nA :ref:`label-that-does-not-exist`.\n"
    proc = build(tmp_path, intersphinx_conf(tmp_path, WITH_FALLBACK), index)
    assert proc.returncode != 0
    assert "label-that-does-not-exist" in proc.stdout


# -- Computation times -------------------------------------------------------------------------


def test_peak_memory_sees_what_a_call_allocates():
    import numpy as np

    def allocate():
        block = np.ones(64 * 2**20 // 8)  # 64 MiB, written so that it is resident
        time.sleep(0.05)
        return float(block[-1])

    used, out = site.PeakMemory()(allocate)
    assert out == 1.0
    assert 48 <= used <= 256, used


def test_peak_memory_is_configured_and_compares_equal_across_builds():
    from sphinx.config import is_serializable

    conf = load_conf()
    hook = conf["sphinx_gallery_conf"]["show_memory"]
    assert callable(hook) and hook == site.PeakMemory() and hash(hook) == hash(site.PeakMemory())
    assert is_serializable(conf["sphinx_gallery_conf"])  # Sphinx can cache the configuration


def test_peak_memory_is_the_packages_meter_and_sees_a_short_spike():
    """The column is measured by attention.measure.peak_memory (VmHWM): a spike that lasts
    no longer than an allocation, inside a page's own measurement, still shows."""
    import numpy as np

    from attention.measure import peak_memory

    def page():
        def spike():
            block = np.ones(96 * 2**20 // 8)  # 96 MiB, freed at once
            block[-1] = 2.0
            return float(block[-1])

        inner = peak_memory(spike)  # a page measuring memory itself
        return inner

    used, inner = site.PeakMemory()(page)
    assert inner is not None and inner >= 64 * 2**20, inner
    assert used >= 64, used  # the sampler every 5 ms of the old column missed such a spike


def test_computation_times_page_is_out_of_the_navigation_and_linked_from_the_build_notes():
    index = (ROOT / "docs" / "index.rst").read_text(encoding="utf-8")
    toctree = index[index.index(".. toctree::") :]
    assert not re.search(r"^\s+sg_execution_times$", toctree, flags=re.MULTILINE)
    assert re.search(r"^\s+references$", toctree, flags=re.MULTILINE)
    notes = index[index.index("How this site is built") : index.index(".. toctree::")]
    assert ":ref:`computation times <sphx_glr_sg_execution_times>`" in notes


def test_built_computation_times_pages_are_orphans_and_searched_once(html_dir):
    """No computation-times page in the sidebar, and only the site-wide one in the search."""
    index = (html_dir / "index.html").read_text(encoding="utf-8")
    sidebar = index[index.index('class="sidebar-tree"') :]
    assert "sg_execution_times" not in sidebar[: sidebar.index("</div>")]
    text = (html_dir / "searchindex.js").read_text(encoding="utf-8")
    data = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    timed = {i: d for i, d in enumerate(data["docnames"]) if d.endswith("sg_execution_times")}
    assert "sg_execution_times" in timed.values(), timed
    # Every document is listed (docnames); a page marked :nosearch: gives no word and no title.
    found = {d: 0 for d in timed.values()}
    for docs in [*data["terms"].values(), *data["titleterms"].values()]:
        for doc in docs if isinstance(docs, list) else [docs]:
            if doc in timed:
                found[timed[doc]] += 1
    for titles in data["alltitles"].values():
        for doc, _ in titles:
            if doc in timed:
                found[timed[doc]] += 1
    searched = [d for d, n in found.items() if n]
    assert searched == ["sg_execution_times"], found


# -- Search ------------------------------------------------------------------------------------

SEARCH_CONF = """\
    import sys
    sys.path.insert(0, {ext!r})
    extensions = ["sphinx.ext.mathjax", "attention_site"]
"""
SEARCH_INDEX = r"""
    Shapes
    ======

    The scores have shape :math:`(L, S)` and are divided by :math:`\sqrt{D}` before the
    softmax of the :math:`\mathbf{q}` vectors:

    .. math::

       \operatorname{softmax}\left(\frac{Q K^\top}{\sqrt{D}}\right) V
"""


def search_terms(searchindex: Path) -> set[str]:
    text = searchindex.read_text(encoding="utf-8")
    terms = re.search(r'"terms":\{(.*?)\},"titles"', text, flags=re.DOTALL).group(1)
    return set(re.findall(r'"([^"]+)":', terms))


def test_maths_is_left_out_of_the_search_index(tmp_path):
    conf = SEARCH_CONF.format(ext=str(ROOT / "docs" / "_ext"))
    proc = build(tmp_path, conf, SEARCH_INDEX)
    assert proc.returncode == 0, proc.stdout
    terms = search_terms(tmp_path / "out" / "searchindex.js")
    assert {"score", "softmax", "divid", "vector"} <= terms  # the prose (stemmed) is indexed
    assert not terms & {"sqrt", "mathbf", "frac", "operatornam", "top", "left", "right"}
    # The snippets' script is on every page, and the formulas are still typeset.
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "search-text.js" in html and r"\sqrt{D}" in html
    assert (tmp_path / "out" / "_static" / "search-text.js").is_file()


#: LaTeX commands of the site's formulas, as the search's stemmer indexes them.
LATEX_WORDS = ("sqrt", "frac", "cdot", "mathbf", "le")
_MATH_HTML = re.compile(r'<(span|div) class="[^"]*\bmath\b[^"]*">.*?</\1>', flags=re.DOTALL)


def test_the_site_search_index_has_no_latex(html_dir):
    """A LaTeX word is indexed for a page only where the page also has it outside its
    formulas (in code, such as ``math.sqrt``)."""
    text = (html_dir / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    terms = index["terms"]
    assert {"attent", "queri", "softmax"} <= set(terms)  # stemmed
    for word in LATEX_WORDS:
        docs = terms.get(word, [])
        for doc in [docs] if isinstance(docs, int) else docs:
            docname = index["docnames"][doc]
            page = (html_dir / f"{docname}.html").read_text(encoding="utf-8")
            outside = re.sub(r"<[^>]+>", " ", _MATH_HTML.sub(" ", page))
            # the index is lower case: "Le" (an author's name) is indexed as "le"
            assert re.search(rf"\b{word}\b", outside, re.IGNORECASE), (word, docname)


# -- References --------------------------------------------------------------------------------

_CITE = re.compile(r":cite:(?:p|t|ps|ts|author|year|label)s?:`([^`]+)`")


def bib_keys() -> list[str]:
    text = (ROOT / "docs" / "references.bib").read_text(encoding="utf-8")
    return re.findall(r"^@\w+\{([^,\s]+),", text, flags=re.MULTILINE)


def cited_keys() -> dict[str, set[str]]:
    """Which files cite which keys: the pages, the package (API docs) and docs/*.rst."""
    files = [*ROOT.rglob("gallery/**/*.py"), *ROOT.glob("attention/**/*.py")]
    files += [*ROOT.glob("docs/*.rst")]
    cited: dict[str, set[str]] = {}
    for path in files:
        for match in _CITE.finditer(path.read_text(encoding="utf-8")):
            for key in match.group(1).split(","):
                cited.setdefault(key.strip(), set()).add(path.relative_to(ROOT).as_posix())
    return cited


def test_bibliography_has_every_work_once_and_each_is_cited_from_a_page_or_the_api():
    keys = bib_keys()
    assert len(keys) >= 15 and len(keys) == len(set(keys))
    cited = cited_keys()
    assert set(cited) <= set(keys), set(cited) - set(keys)
    uncited = [k for k in keys if not (cited.get(k, set()) - {"docs/references.rst"})]
    assert not uncited


def test_bibliography_entries_name_their_identifier():
    import pybtex.database

    data = pybtex.database.parse_file(str(ROOT / "docs" / "references.bib"))
    for key, entry in data.entries.items():
        fields = entry.fields
        assert entry.persons.get("author"), key
        assert re.fullmatch(r"20[0-2]\d|19\d\d", fields["year"]), key
        assert fields.get("eprint") or fields.get("doi") or fields.get("url"), key
        if "eprint" in fields:
            assert re.fullmatch(r"\d{4}\.\d{4,5}", fields["eprint"]), key
            assert fields["url"] == f"https://arxiv.org/abs/{fields['eprint']}", key


@pytest.mark.parametrize("path", sorted(ROOT.glob("gallery/**/*.py")), ids=lambda p: p.name)
def test_pages_cite_works_by_role_and_name_every_paper(path):
    text = path.read_text(encoding="utf-8")
    # Every "the paper" names the work it means, in the same sentence.
    for match in re.finditer(r"\bthe (?:original )?paper\b", text, flags=re.IGNORECASE):
        sentence = text[match.start() : text.find(".", match.end()) + 1]
        assert _CITE.search(sentence), f"{path.name}: {sentence!r}"
    # A work in the bibliography is cited with a role, not as plain "Author et al. (year)".
    plain = re.findall(r"\b([A-Z][a-z]+) et al\.,? \(?(\d{4})", text)
    bib = {(k.rstrip("0123456789"), k[-4:]) for k in bib_keys()}
    assert not [(a, y) for a, y in plain if (a.lower(), y) in bib]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the script")
def test_search_snippets_read_formulas_as_plain_text():
    script = (ROOT / "docs" / "_ext" / "static" / "search-text.js").read_text(encoding="utf-8")
    harness = (
        "globalThis.document = {addEventListener() {}};\n"
        "globalThis.Search = {htmlToText: (html, anchor) => html};\n"
        + script
        + "\nconst out = Search.htmlToText("
        + json.dumps(r"Shape \((N, L, E)\), scale \(1/\sqrt{D}\), \(L \times S\) scores.")
        + ");\nconsole.log(JSON.stringify(out));\n"
        + "console.log(JSON.stringify(Search.htmlToText("
        + json.dumps(
            r"\[\text{bias}_{h, i, j} = -m_h \, \lvert (S - L + i) - j \rvert\] and "
            r"\(\frac{1}{\sqrt{D}}\)"
        )
        + ")));\n"
    )
    proc = subprocess.run(
        ["node", "-e", harness], capture_output=True, text=True, timeout=60, check=True
    )
    first, second = proc.stdout.splitlines()
    assert json.loads(first) == "Shape (N, L, E), scale 1/√D, L × S scores."
    # The alibi_bias formula of the API page: no command, brace or backslash left.
    assert json.loads(second) == "bias_h, i, j = -m_h | (S - L + i) - j | and (1)/(√D)"
