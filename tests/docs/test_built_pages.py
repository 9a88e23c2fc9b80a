"""What the real build wrote for a reader: the landing page and its course, the gallery's
cards, the tutorials' excerpts, code boxes and "view source" button, the API's module pages,
the sidebar, and what a shared link or a search engine reads (Open Graph, the sitemap, the
favicon). The layout in a browser is checked in tests/site/test_layout.py."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from docbuild import GALLERY_DIR, ROOT, gallery_scripts, pages

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import attention_course as course  # noqa: E402

PARTS = course.course(GALLERY_DIR)
PAGES = course.pages_of(PARTS)


def html(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def text_of(fragment: str) -> str:
    """Visible text of an HTML fragment: tags removed, entities and spaces simplified."""
    import html as html_module

    return re.sub(r"\s+", " ", html_module.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


def section(page: str, anchor: str) -> str:
    """The HTML of the section with id ``anchor``, up to the next section of its level."""
    start = page.index(f'id="{anchor}"')
    end = page.find("<section", start + 1)
    return page[start : end if end > 0 else len(page)]


def tutorial_hrefs(fragment: str) -> set[str]:
    """The tutorial pages a fragment of the landing page links, as ``<part>/<stem>``."""
    return {m for m in re.findall(r'href="tutorials/([\w/]+)\.html', fragment)}


def reading_minutes(html_dir: Path, page: course.Page) -> int:
    rendered = html(html_dir / "tutorials" / f"{pages.relative(page.path)}.html")
    return int(re.search(r"Reading time: about (\d+) min", rendered).group(1))


# -- The landing page ----------------------------------------------------------------------------


def test_the_landing_page_starts_with_what_the_course_is_and_start_here(html_dir: Path):
    page = html(html_dir / "index.html")
    main = page[page.index("<h1") :]
    lead = re.search(r'<p class="attention-lead">(.*?)</p>', main, flags=re.DOTALL)
    assert lead and "course" in text_of(lead.group(1)), "no lead paragraph under the title"
    start = re.search(r'<p class="attention-start">(.*?)</p>', main, flags=re.DOTALL)
    assert start, "no 'Start here' on the landing page"
    first = PAGES[0]
    assert text_of(start.group(1)).startswith(f"Start here: {first.number}. {first.title}")
    assert f'href="tutorials/{pages.relative(first.path)}.html' in start.group(1)
    # Right under the lead: before the figure and every section.
    assert main.index("attention-start") < main.index("attention-landing-figure")
    assert main.index("attention-start") < main.index("<section", 10)


def test_the_landing_page_shows_the_whole_course_in_its_parts(html_dir: Path):
    page = html(html_dir / "index.html")
    outline = section(page, "the-course")
    titles = [text_of(t) for t in re.findall(r'<p class="[^"]*\brubric\b[^"]*">(.*?)</p>', outline)]
    assert titles == [part.title for part in PARTS], titles
    assert len([p for p in PARTS if p.folder]) == 5
    linked = tutorial_hrefs(outline)
    for page_ in PAGES:
        assert pages.relative(page_.path) in linked, f"the outline does not link {page_.stem}"
        item = re.search(
            rf"<li><p>{page_.number}\. <a [^>]*href=\"tutorials/{pages.relative(page_.path)}"
            rf"\.html[^>]*>.*?</li>",
            outline,
            flags=re.DOTALL,
        )
        assert item, f"no item '{page_.number}. <title>' for {page_.stem}"
        words = text_of(item.group(0))
        assert re.search(r": \S.*\(\d+ min\)$", words), f"no summary and time: {words!r}"


def test_the_total_reading_time_is_the_sum_of_the_pages(html_dir: Path):
    minutes = [reading_minutes(html_dir, page) for page in PAGES]
    total = course.duration(sum(minutes))
    page = text_of(html(html_dir / "index.html"))
    assert f"takes about {total} to read" in page, total
    assert f"about {total} of reading in all" in page
    for part in PARTS:
        part_total = sum(reading_minutes(html_dir, p) for p in part.pages)
        assert f"about {course.duration(part_total)})" in page, part.title


#: The longest a page may take to read: one idea in one sitting (README, "Adding a tutorial").
MAX_READING_MINUTES = 25


def test_no_page_takes_more_than_one_sitting_to_read(html_dir: Path):
    minutes = {page.path.stem: reading_minutes(html_dir, page) for page in PAGES}
    long = {stem: m for stem, m in minutes.items() if m > MAX_READING_MINUTES}
    assert not long, f"pages over {MAX_READING_MINUTES} minutes of reading: {long}"


#: A line that only lays out a figure: a new figure, its axes' labels, ticks, titles,
#: limits, legend, colour bar.
FIGURE_LAYOUT = re.compile(
    r"plt\.subplots\(|\.set_(x|y)?(label|ticks|ticklabels|title|xlim|ylim|scale|aspect)\("
    r"|\.set\(|\.legend\(|\.colorbar\(|\.suptitle\(|\.tick_params\(|\.axis\(|\.annotate\("
)
#: The figure-layout lines a page may show: the figure code a reader sees is the call that
#: draws the attention (attention.plot_attention, plot_matrix), the rest is hidden.
MAX_FIGURE_LINES = 12


def test_pages_show_the_attention_code_not_the_figure_layout():
    sys.path.insert(0, str(ROOT))
    from attention_prerequisites import script_blocks

    from conf import sphinx_gallery_conf

    shown = {}
    for script in gallery_scripts():
        blocks = script_blocks(GALLERY_DIR / script, sphinx_gallery_conf)
        code = "\n".join(content for label, content, _ in blocks if label == "code")
        layout = [line for line in code.splitlines() if FIGURE_LAYOUT.search(line)]
        shown[Path(script).stem] = len(layout)
    heavy = {stem: n for stem, n in shown.items() if n > MAX_FIGURE_LINES}
    assert not heavy, f"figure layout shown to the reader (lines per page): {heavy}"


#: The input checks a package excerpt may open with before its idea: one line, a check helper's
#: call (the checks themselves are on the API page and in the downloaded package).
MAX_LEADING_CHECKS = 1
#: A package excerpt on a page: the file and the object shown.
EXCERPT = re.compile(
    r"# \.\. literalinclude:: (?:\.\./)+(\S+)\n(?:#    :.*\n)*?#    :pyobject: (\S+)"
)


def _checks_only(statement: ast.stmt) -> bool:
    """A statement that only checks arguments: a call of a ``check`` helper, or an ``if`` that
    only raises."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        name = ast.unparse(statement.value.func).rsplit(".", 1)[-1]
        return name.lstrip("_").startswith("check")
    if isinstance(statement, ast.If):
        return all(isinstance(s, ast.Raise) for s in statement.body) and not statement.orelse
    return False


def test_package_excerpts_open_with_the_idea_not_the_input_checks():
    opening, seen = {}, 0
    for script in gallery_scripts():
        text = (GALLERY_DIR / script).read_text(encoding="utf-8")
        for path, name in EXCERPT.findall(text):
            node = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            for part in name.split("."):
                node = next(n for n in ast.iter_child_nodes(node) if getattr(n, "name", "") == part)
            seen += 1
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            checks = next((i for i, s in enumerate(body) if not _checks_only(s)), len(body))
            if checks > MAX_LEADING_CHECKS:
                opening[f"{Path(script).stem}: {name}"] = checks
    assert seen > 40, f"only {seen} excerpts found: has the literalinclude syntax changed?"
    assert not opening, f"excerpts that open with more than one line of checks: {opening}"


def test_what_you_will_learn_covers_every_page(html_dir: Path):
    learn = section(html(html_dir / "index.html"), "what-you-will-learn")
    linked = tutorial_hrefs(learn)
    missing = [p.stem for p in PAGES if pages.relative(p.path) not in linked]
    assert not missing, f"'What you will learn' does not cover {missing}"
    assert "(coming)" not in text_of(learn), "'What you will learn' names a page that is not built"


def test_the_landing_page_says_what_a_reader_needs_first(html_dir: Path):
    needs = text_of(section(html(html_dir / "index.html"), "before-you-start"))
    for word in ("Python", "matrix product", "CPU"):
        assert word in needs, word


def test_the_landing_figure_is_made_for_it_in_both_schemes(html_dir: Path):
    page = html(html_dir / "index.html")
    figure = page[page.index("attention-landing-figure") :]
    figure = figure[: figure.index("attention-landing-caption")]
    images = re.findall(r"<img [^>]*>", figure)
    sources = [re.search(r'src="([^"]+)"', img).group(1) for img in images]
    assert not any("thumb" in src for src in sources), sources
    light = [img for img in images if "only-light" in img]
    dark = [img for img in images if "only-dark" in img]
    assert len(light) == len(dark) == 2, images
    for img in images:
        src = re.search(r'src="([^"]+)"', img).group(1)
        assert src.endswith(".svg") and (html_dir / src).is_file(), src
        assert re.search(r'alt="[^"]{40,}"', img), f"no description: {img}"
    for src in sources:
        svg = html(html_dir / src)
        ground = "#131416" if "dark" in src else "#ffffff"
        assert ground in svg, f"{src}: not on the page's ground {ground}"


def test_computation_times_are_linked_from_the_build_notes(html_dir: Path):
    notes = section(html(html_dir / "index.html"), "how-this-site-is-built")
    assert 'href="sg_execution_times.html' in notes


# -- The gallery's index ------------------------------------------------------------------------


def test_the_gallery_index_has_the_parts_and_numbered_summarised_cards(html_dir: Path):
    index = html(html_dir / "tutorials" / "index.html")
    for part in PARTS:
        if part.folder:
            assert f">{part.title}<" in index, part.title
    cards = re.findall(
        r'<div class="sphx-glr-thumbcontainer attention-card".*?attention-card-time">',
        index,
        flags=re.DOTALL,
    )
    assert len(cards) == len(PAGES), f"{len(cards)} numbered cards for {len(PAGES)} pages"
    for page_, card in zip(PAGES, cards, strict=True):
        assert f'<span class="attention-card-number">{page_.number}</span>' in card
        summary = re.search(r'attention-card-summary">(.*?)</div>', card, flags=re.DOTALL)
        assert summary and len(text_of(summary.group(1))) > 10, card[:500]
        # A role in a summary is resolved, never shown as its label (sphx_glr_..._py).
        assert "sphx_glr_" not in text_of(summary.group(1)), summary.group(1)
        assert "tooltip=" not in card


def test_every_page_has_a_one_line_summary_of_its_own():
    """Each page says in one line what it is about (``:summary:`` under its prerequisites),
    for the landing page and its card; the first sentence of its introduction is a fallback."""
    from attention_prerequisites import directive_options

    missing = []
    for page_ in PAGES:
        docstring = course._docstring(page_.path)
        summary = directive_options(docstring, "prerequisites").get("summary", "")
        if not summary or len(summary) > 160:
            missing.append(page_.stem)
    assert not missing, (
        f"pages without a one-line ':summary:' (160 characters at most) in their "
        f"'.. prerequisites::' line: {missing}"
    )


# -- The tutorials -------------------------------------------------------------------------------

_INCLUDE = re.compile(
    r"^#?\s*\.\. literalinclude::\s*(?:\.\./)+(?P<path>(?:attention|benchmarks)/\S+)\s*$",
    flags=re.MULTILINE,
)


@pytest.mark.parametrize("script", gallery_scripts())
def test_every_package_excerpt_is_captioned_with_its_file(html_dir: Path, script: str):
    """Each literalinclude of the package is captioned with its file (linked to its source)
    and its object (linked to its API page, or its source)."""
    source = (GALLERY_DIR / script).read_text(encoding="utf-8")
    included = _INCLUDE.findall(source)
    rendered = html(html_dir / "tutorials" / script.replace(".py", ".html"))
    captions = re.findall(
        r'<div class="literal-block-wrapper attention-excerpt[^"]*"[^>]*>\s*'
        r'<div class="code-block-caption"><span class="[^"]*caption-text">(.*?)</span>'
        r'<a class="headerlink"',
        rendered,
        flags=re.DOTALL,
    )
    assert len(captions) == len(included), (
        f"{script}: {len(included)} excerpts of the package, {len(captions)} captioned"
    )
    for path, caption in zip(included, captions, strict=True):
        assert text_of(caption).startswith(path), f"{script}: {text_of(caption)!r} for {path}"
        if path.startswith("attention/"):  # the package's source and API pages are here
            assert "<a " in caption, f"{script}: the caption of {path} links nowhere"


_FRAGMENT_OPTIONS = re.compile(r":(?:start-at|start-after|end-at|end-before|lines):")


@pytest.mark.parametrize("script", gallery_scripts())
def test_every_package_excerpt_is_a_whole_object(script: str):
    """An excerpt reads on its own: a whole function, class or method (``:pyobject:``), never
    lines cut out of one."""
    source = (GALLERY_DIR / script).read_text(encoding="utf-8")
    fragments = []
    for match in _INCLUDE.finditer(source):
        options = source[match.end() : match.end() + 400].split("\n")[1:]
        block = []
        for line in options:
            if re.match(r"^#?\s+:[\w-]+:", line):
                block.append(line)
            else:
                break
        text = "\n".join(block)
        if ":pyobject:" not in text or _FRAGMENT_OPTIONS.search(text):
            fragments.append(f"{match.group('path')} {' '.join(s.strip('# ') for s in block)}")
    assert not fragments, f"{script} shows fragments of the package: {fragments}"


@pytest.mark.parametrize("script", gallery_scripts())
def test_no_empty_code_box(html_dir: Path, script: str):
    rendered = html(html_dir / "tutorials" / script.replace(".py", ".html"))
    boxes = re.findall(
        r'<div class="highlight-Python notranslate"><div class="highlight"><pre>(.*?)</pre>',
        rendered,
        flags=re.DOTALL,
    )
    empty = [i for i, box in enumerate(boxes) if not text_of(box)]
    assert not empty, f"{script}: empty code boxes (numbers {empty} of {len(boxes)})"


@pytest.mark.parametrize("script", gallery_scripts())
def test_view_source_opens_the_pages_script(html_dir: Path, script: str):
    page = html_dir / "tutorials" / script.replace(".py", ".html")
    rendered = html(page)
    view = re.search(r'<div class="view-this-page">\s*<a [^>]*href="([^"]+)"', rendered)
    assert view, f"{script}: no 'view this page' button"
    href = view.group(1)
    assert not href.endswith(".rst.txt"), f"{script}: the button opens the generated reST"
    assert href.endswith(Path(script).name), href
    if not href.startswith("http"):
        assert (page.parent / href).resolve().is_file()


def test_the_landing_page_offers_no_view_of_its_raw_source(html_dir: Path):
    """Without a repository to link to, a hand-written page has no "view this page" button: it
    would open the raw reST (directives, roles) of the landing page."""
    from docbuild import load_conf

    if load_conf()["html_theme_options"].get("source_repository"):
        pytest.skip("a repository is named: the button opens the file there")
    assert '<div class="view-this-page">' not in html(html_dir / "index.html")


# The code cells of a tutorial (sphinx-gallery writes them as "highlight-Python"; the package
# excerpts are "highlight-python"), and the HTML of its prose without any code.
_CELL = re.compile(
    r'<div class="highlight-Python notranslate"><div class="highlight"><pre>(.*?)</pre>',
    flags=re.DOTALL,
)
_ANY_CODE = re.compile(
    r'<div class="[^"]*highlight-\w+ notranslate"><div class="highlight"><pre>.*?</pre>',
    flags=re.DOTALL,
)


def visible_code(rendered: str) -> str:
    """The code of a tutorial's cells as the reader sees it (hidden lines are not there)."""
    return "\n".join(text_of_code(cell) for cell in _CELL.findall(rendered))


def text_of_code(fragment: str) -> str:
    import html as html_module

    return html_module.unescape(re.sub(r"<[^>]+>", "", fragment))


def prose_of(rendered: str) -> str:
    article = rendered[rendered.index("<article") : rendered.index("</article>")]
    return _ANY_CODE.sub("", article)


@pytest.mark.parametrize("script", gallery_scripts())
def test_a_name_imported_in_sight_is_used_in_sight(html_dir: Path, script: str):
    """A page that shows ``from attention.repro import claim`` shows a ``claim(...)`` too:
    an import whose every use is hidden reads as an unused import."""
    code = visible_code(html(html_dir / "tutorials" / script.replace(".py", ".html")))
    unused = []
    for imported in re.findall(r"^from attention\.repro import ([\w, ]+)$", code, re.MULTILINE):
        for name in (n.strip() for n in imported.split(",")):
            if len(re.findall(rf"\b{name}\b", code)) < 2:
                unused.append(name)
    assert not unused, (
        f"{script} imports {unused} from attention.repro in a code cell but calls "
        "it only in hidden lines: show one call, or hide the import with the calls"
    )


@pytest.mark.parametrize("name", ["seed_everything", "claim"])
def test_the_repro_helpers_are_explained_where_a_reader_first_meets_them(html_dir: Path, name: str):
    """The first page whose code calls ``seed_everything`` or ``claim`` says in its prose what
    it does, with a link to its API entry."""
    for script in gallery_scripts():
        rendered = html(html_dir / "tutorials" / script.replace(".py", ".html"))
        if re.search(rf"\b{name}\(", visible_code(rendered)):
            break
    else:
        pytest.fail(f"no page calls {name} in sight")
    prose = prose_of(rendered)
    assert re.search(
        rf'href="[^"]*generated/attention\.repro[^"]*#attention\.repro\.{name}"', prose
    ), (
        f"{script}, the first page that calls {name}, does not explain it (no link to its "
        "API entry in the prose)"
    )


@pytest.mark.parametrize("script", gallery_scripts())
def test_a_method_the_prose_names_is_shown(script: str):
    """A sentence that points at "its ``mask`` method" shows that method's code."""
    source = (GALLERY_DIR / script).read_text(encoding="utf-8")
    prose = "\n".join(line for line in source.split("\n") if line.startswith("#"))
    shown = set(re.findall(r":pyobject:\s*\S*?\.?(\w+)\s*$", source, flags=re.MULTILINE))
    shown |= set(re.findall(r"^\s*def (\w+)\(", source, flags=re.MULTILINE))
    named = set(re.findall(r"``(\w+)`` method", prose))
    missing = sorted(named - shown)
    assert not missing, f"{script} names the method(s) {missing} but never shows them"


_GENERATED_LINES = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES (\d+)-(\d+)$", re.M)
_PRINT = re.compile(r"^\s*print\(")
_SHOW = re.compile(r"^\s*plt\.show\(")


def output_order(rst: str, script: str) -> list[tuple[int, str, str]]:
    """For each cell of a rendered page that both prints and shows a figure, where its source
    prints (``"before"`` or ``"after"`` its first ``plt.show()``; cells that do both are left
    out) and where the page shows the printed text (``"above"`` or ``"below"`` the figures).
    Returns (first line of the cell, printed, shown)."""
    source = script.split("\n")
    marks = list(_GENERATED_LINES.finditer(rst))
    found = []
    for k, mark in enumerate(marks):
        section = rst[mark.end() : marks[k + 1].start() if k + 1 < len(marks) else len(rst)]
        if ".. code-block:: Python" not in section:
            continue
        image = re.search(r"^\.\. (?:image-sg|image)::|sphx-glr-horizontal", section, re.M)
        output = section.find("sphx-glr-script-out")
        if image is None or output < 0:
            continue
        first, last = int(mark.group(1)), int(mark.group(2))
        lines = source[first - 1 : last]
        shows = [i for i, line in enumerate(lines) if _SHOW.match(line)]
        prints = [i for i, line in enumerate(lines) if _PRINT.match(line)]
        if not shows or not prints:
            continue
        if max(prints) < shows[0]:
            printed = "before"
        elif min(prints) > shows[0]:
            printed = "after"
        else:
            continue
        found.append((first, printed, "above" if output < image.start() else "below"))
    return found


def test_output_order_is_read_from_a_page():
    script = "x\nprint(1)\nplt.show()\nplt.show()\nprint(2)\n"
    rst = (
        ".. GENERATED FROM PYTHON SOURCE LINES 2-3\n\n.. code-block:: Python\n\n    x\n\n"
        ".. rst-class:: sphx-glr-script-out\n\n.. image-sg:: a.png\n\n"
        ".. GENERATED FROM PYTHON SOURCE LINES 4-5\n\n.. code-block:: Python\n\n    x\n\n"
        ".. image-sg:: b.png\n\n.. rst-class:: sphx-glr-script-out\n"
    )
    assert output_order(rst, script) == [(2, "before", "above"), (4, "after", "below")]


@pytest.mark.parametrize("script", gallery_scripts())
def test_printed_lines_keep_their_place_around_the_figures(script: str):
    """A cell shows what it printed where it printed it: above its figures what it printed
    before ``plt.show()`` (a line that introduces the figure), below them what it printed
    after, as a notebook shows it (sphinx-gallery alone puts all of it below)."""
    rst_path = ROOT / "docs" / "tutorials" / script.replace(".py", ".rst")
    if not rst_path.is_file():
        pytest.skip(f"{rst_path} is not built")
    order = output_order(
        rst_path.read_text(encoding="utf-8"), (GALLERY_DIR / script).read_text(encoding="utf-8")
    )
    wrong = [
        f"the cell at line {line} prints {printed} plt.show(); the page shows it {shown}"
        for line, printed, shown in order
        if (printed, shown) in {("before", "below"), ("after", "above")}
    ]
    assert not wrong, f"{script}: " + "; ".join(wrong)


# -- The API reference ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module",
    ["attention.repro", "attention.masks", "attention.flex", "attention.recipes",
     "attention.training", "attention.measure", "attention.distributed", "attention.data",
     "attention.dates", "attention.text"],
)  # fmt: skip
def test_module_pages_end_with_the_tutorials_that_use_them(html_dir: Path, module: str):
    page = html(html_dir / "generated" / f"{module}.html")
    assert "Examples using <code" in page and module in page, f"{module}: no mini-gallery"
    assert "sphx-glr-thumbcontainer" in page


def test_every_api_page_ends_with_the_tutorials_that_use_it_or_says_none_does(html_dir: Path):
    pages = sorted((html_dir / "generated").glob("attention.*.html"))
    assert len(pages) > 40
    silent = []
    for path in pages:
        page = html(path)
        if "sphx-glr-thumbcontainer" not in page and "attention-used-by-none" not in page:
            silent.append(path.name)
    assert not silent, silent
    assert "No tutorial calls <code" in html(html_dir / "generated" / "attention.search.html")


def _downloads_at_the_top(site: Path, script: str) -> list[str]:
    """What is wrong with the top of a tutorial: its notebook and script buttons under the
    prerequisites line, before the first section, linking files of the site; no note sending
    the reader to the end of the page."""
    stem = Path(script).stem
    page = html(site / "tutorials" / script.replace(".py", ".html"))
    article = page[page.index("<article") :]
    problems = []
    if "sphx-glr-download-link-note" in article:
        problems.append(f"{script}: the 'Go to the end' note is still there")
    if 'class="attention-downloads' not in article:
        return [*problems, f"{script}: no downloads at the top"]
    top = article.index('class="attention-downloads')
    if not article.index("attention-prerequisites") < top < article.index("<h2"):
        problems.append(f"{script}: the downloads are not under the prerequisites line")
    box = article[top : article.index("</div>\n</div>", top)]
    hrefs = re.findall(r'href="([^"]+)"', box)
    if [Path(h).name for h in hrefs] != [f"{stem}.ipynb", f"{stem}.py"]:
        problems.append(f"{script}: the top downloads are {hrefs}")
    base = (site / "tutorials" / script).parent
    problems += [f"{script}: {h} is missing" for h in hrefs if not (base / h).resolve().is_file()]
    return problems


def test_every_tutorial_offers_its_downloads_at_the_top(html_dir: Path):
    problems = [p for script in gallery_scripts() for p in _downloads_at_the_top(html_dir, script)]
    assert not problems, "\n".join(problems)


def test_every_chinese_tutorial_offers_its_downloads_at_the_top(zh_html_dir: Path):
    problems = [
        p for script in gallery_scripts() for p in _downloads_at_the_top(zh_html_dir, script)
    ]
    assert not problems, "\n".join(problems)


def test_an_api_page_says_no_tutorial_calls_its_name_only_when_none_does(html_dir: Path):
    """Page 5 calls ``MultiHeadAttention(E, H)``: its page lists page 5 and does not say that
    no tutorial calls it; no page says both."""
    both = []
    for path in sorted((html_dir / "generated").glob("attention.*.html")):
        page = html(path)
        if "sphx-glr-thumbcontainer" in page and "attention-used-by-none" in page:
            both.append(path.name)
    assert not both, f"these pages list tutorials and say that none calls their name: {both}"
    page = html(html_dir / "generated" / "attention.MultiHeadAttention.html")
    assert "No tutorial calls" not in page
    assert re.search(r'class="sphx-glr-thumbcontainer".*?href="[^"]*/05_masks\.html', page, re.S)


def meta_tags(page: str) -> dict[str, str]:
    """The ``<meta>`` tags of a page, by their ``name`` or ``property``, with their content."""
    import html as html_module

    tags = {}
    for tag in re.findall(r"<meta\b[^>]*>", page):
        attributes = dict(re.findall(r'([\w:-]+)="([^"]*)"', tag))
        key = attributes.get("name") or attributes.get("property")
        if key and "content" in attributes:
            tags[key] = html_module.unescape(attributes["content"])
    return tags


def test_an_api_page_describes_itself_by_its_objects_summary(html_dir: Path):
    """The description a search engine shows and a link preview's are the first paragraph of
    the object's docstring, not the first words Sphinx finds on the page."""
    import attention_api

    wrong = []
    for path in sorted((html_dir / "generated").glob("attention*.html")):
        summary = attention_api.summary(path.stem)
        assert summary, f"{path.stem} has no docstring to describe its page"
        assert "\\" not in summary and "`" not in summary, f"{path.stem}: {summary!r}"
        tags = meta_tags(html(path))
        for key in ("description", "og:description"):
            if tags.get(key) != summary:
                wrong.append(f"{path.name} {key}: {tags.get(key)!r}, not {summary!r}")
    assert not wrong, "\n".join(wrong)


def test_a_name_with_its_own_page_is_not_documented_again_on_its_module_page(html_dir: Path):
    masks = html(html_dir / "generated" / "attention.masks.html")
    assert 'id="attention.masks.to_torch_attn_mask"' in masks
    assert 'id="attention.masks.causal_mask"' not in masks


@pytest.mark.parametrize("page", ["api.html", "generated/attention.sliding_window_mask.html"])
def test_the_sidebar_breaks_names_only_after_a_dot_or_an_underscore(html_dir: Path, page: str):
    """On every page, the name's own too, where its entry is the current one."""
    text = html(html_dir / page)
    sidebar = text[text.index('class="sidebar-tree"') :]
    assert "attention.<wbr>sliding_<wbr>window_<wbr>mask" in sidebar
    css = html(html_dir / "_static" / "custom.css")
    assert re.search(r"\.sidebar-tree \.reference \{[^}]*overflow-wrap: normal", css)


# -- Sharing and finding -------------------------------------------------------------------------


def test_pages_carry_link_previews_with_the_sites_address(html_dir: Path):
    from docbuild import load_conf

    site = load_conf()["attention_site_url"]
    for rel in ["index.html", f"tutorials/{gallery_scripts()[0].replace('.py', '.html')}"]:
        page = html(html_dir / rel)
        assert re.search(r'<meta property="og:title" content="[^"]+"', page), rel
        url = re.search(r'<meta property="og:url" content="([^"]+)"', page).group(1)
        assert url.startswith(site), url
        image = re.search(r'<meta property="og:image" content="([^"]+)"', page).group(1)
        assert image.startswith(site) and image.endswith(".png"), image
        assert (html_dir / image[len(site) :]).is_file()


def test_a_sitemap_lists_every_page_at_the_sites_address(html_dir: Path):
    from docbuild import load_conf

    site = load_conf()["attention_site_url"]
    sitemap = html(html_dir / "sitemap.xml")
    urls = re.findall(r"<loc>([^<]+)</loc>", sitemap)
    assert f"{site}index.html" in urls
    for script in gallery_scripts():
        assert f"{site}tutorials/{script.replace('.py', '.html')}" in urls, script


def test_every_page_has_a_favicon(html_dir: Path):
    page = html(html_dir / "index.html")
    icon = re.search(r'<link rel="(?:shortcut )?icon" href="([^"]+)"', page)
    assert icon and (html_dir / icon.group(1).split("?")[0]).is_file()
