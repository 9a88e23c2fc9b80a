"""How a tutorial page reads: its package excerpts, its code boxes, its "view source" button.
Loaded by ``conf.py`` as a Sphinx extension.

- Every ``literalinclude`` of the project's code (``attention/``, ``benchmarks/``) on a page gets
  a caption naming the file and the object it shows (:func:`excerpt_caption`), linked to the
  object's place in the highlighted source (viewcode's ``_modules/`` pages) and, where it has
  one, to its API page; a page writes no caption of its own. An excerpt with a caption of its own
  keeps it. The option ``:no-docstring:`` shows a function or class from its signature on,
  without its docstring (the API page shows that).
- A code cell whose lines are all hidden (``sphinx_gallery_start_ignore`` ... ``end_ignore``,
  the build's own checks) leaves no empty code box (:func:`drop_empty_code_blocks`).
- furo's "view this page" button of a tutorial opens the page's script (its ``.py`` download,
  or the file in the repository when one is configured), not the reST that sphinx-gallery
  generated from it; an API page's opens its module's highlighted source. Its "edit" button,
  with a repository, opens the file to edit: the script, the gallery header, the module.
- The computation-times pages are reached from the landing page's build notes only: no page of
  the navigation, and only the site-wide one in the search (``:orphan:``, ``:nosearch:``).
- The sidebar breaks a long name (``attention.sliding_window_mask``) after a dot or an
  underscore, never inside a word.
- A tutorial's downloads, its notebook and its script, stand at the top of the page, under the
  prerequisites line, as the PyTorch tutorials have them (:func:`downloads_at_the_top`), in
  place of sphinx-gallery's note that sends the reader to the end of the page for them
  (sphinx-gallery has no option for this). The buttons at the end stay, with the zip.
"""

from __future__ import annotations

import copy
import posixpath
import re
from pathlib import Path

from attention_downloads import NO_DOCSTRING, without_docstring
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.directives.code import LiteralInclude

#: The folders of the checkout whose code the pages show.
PROJECT_CODE = ("attention", "benchmarks")
#: The class of an excerpt's caption and of its container.
EXCERPT_CLASS = "attention-excerpt"

# -- Captions of the package excerpts --------------------------------------------------------------


class excerpt_link(nodes.Inline, nodes.TextElement):
    """A placeholder in an excerpt's caption, made into links once the pages are known."""


def excerpt_caption(relpath: str, options: dict) -> tuple[str, str | None]:
    """What an excerpt shows: its file (from the checkout's root) and its object, if any.

    >>> excerpt_caption("attention/multi_head.py", {"pyobject": "MultiHeadAttention.forward"})
    ('attention/multi_head.py', 'MultiHeadAttention.forward')
    >>> excerpt_caption("attention/masks.py", {"lines": "3-9"})
    ('attention/masks.py', None)
    """
    return relpath, options.get("pyobject") or None


class ExcerptInclude(LiteralInclude):
    """``literalinclude``, with a caption for an excerpt of the project's code."""

    option_spec = {**LiteralInclude.option_spec, NO_DOCSTRING: directives.flag}

    def run(self):
        no_docstring = self.options.pop(NO_DOCSTRING, False) is not False
        result = super().run()
        if no_docstring:
            for block in (n for node in result for n in node.findall(nodes.literal_block)):
                text = without_docstring(block.astext())
                block.rawsource = text
                block.children = [nodes.Text(text)]
        if "caption" in self.options or not result:
            return result
        _, path = self.env.relfn2path(self.arguments[0])
        root = Path(self.config.attention_root)
        try:
            relpath = Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            return result
        if relpath.split("/", 1)[0] not in PROJECT_CODE:
            return result
        block = result[0]
        if not isinstance(block, nodes.literal_block):
            return result
        file, obj = excerpt_caption(relpath, self.options)
        module = relpath[: -len(".py")].replace("/", ".") if relpath.endswith(".py") else None
        module = module.removesuffix(".__init__") if module else None
        caption = nodes.caption("", classes=[EXCERPT_CLASS])
        caption += excerpt_link(file, file, module=module, object=obj or "", kind="file")
        if obj:
            caption += nodes.Text(" · ")
            caption += excerpt_link(obj, obj, module=module, object=obj, kind="object")
        container = nodes.container(
            "", literal_block=True, classes=["literal-block-wrapper", EXCERPT_CLASS]
        )
        container += caption
        container += block
        self.set_source_info(container)
        self.add_name(container)
        return [container, *result[1:]]


def _api_target(env, module: str | None, obj: str) -> tuple[str, str] | None:
    """(docname, anchor) of the API entry of ``module.obj`` or of its public name."""
    if not module:
        return None
    objects = env.domains["py"].objects
    names = [f"{module}.{obj}"]
    package = module.split(".")[0]
    names.append(f"{package}.{obj}")
    for name in names:
        entry = objects.get(name)
        if entry is not None and not entry.aliased:
            return entry.docname, entry.node_id
    return None


def source_anchor(obj: str, documented) -> str | None:
    """The anchor of ``obj`` in viewcode's highlighted source of its module: viewcode marks
    only the objects the API reference documents (``documented``), so a private function or
    an undocumented method is found through the documented object that holds it, else the
    link goes to the top of the module's source.

    >>> source_anchor("MultiHeadAttention._project", {"MultiHeadAttention": "generated/x"})
    'MultiHeadAttention'
    >>> source_anchor("_scores", {"scaled_dot_product_attention": "generated/y"}) is None
    True
    """
    parts = obj.split(".") if obj else []
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in documented:
            return name
    return None


def _resolve_excerpt_links(app, doctree, docname) -> None:
    """Make each caption placeholder a link: the file to its highlighted source at the object,
    the object to its API page (else to the source too)."""
    env = app.env
    modules = getattr(env, "_viewcode_modules", {})
    for node in list(doctree.findall(excerpt_link)):
        module, obj, kind = node["module"], node["object"], node["kind"]
        literal = nodes.literal(node.astext(), node.astext())
        uri = None
        if kind == "object":
            target = _api_target(env, module, obj)
            if target is not None:
                uri = app.builder.get_relative_uri(docname, target[0]) + f"#{target[1]}"
        if uri is None and module and modules.get(module):
            source = "_modules/" + module.replace(".", "/")
            anchor = source_anchor(obj, modules[module][2])
            uri = app.builder.get_relative_uri(docname, source) + (f"#{anchor}" if anchor else "")
        repo = app.config.html_theme_options.get("source_repository")
        if uri is None and kind == "file" and repo:  # code with no page here (benchmarks/)
            branch = app.config.html_theme_options.get("source_branch", "main")
            uri = f"{repo.rstrip('/')}/blob/{branch}/{node.astext()}"
        if uri is None:
            node.replace_self(literal)
            continue
        title = "its API page" if kind == "object" and "_modules/" not in uri else "its source"
        internal = not uri.startswith("http")
        reference = nodes.reference("", "", literal, internal=internal, refuri=uri, reftitle=title)
        node.replace_self(reference)


# -- Empty code boxes ------------------------------------------------------------------------------

_CODE_BLOCK = re.compile(r"^\.\. code-block:: \w+[ \t]*$", flags=re.IGNORECASE)


def drop_empty_code_blocks(text: str) -> str:
    """The reST of a generated page without the code blocks that show nothing: sphinx-gallery
    writes one for a cell whose lines are all hidden.

    >>> page = ".. code-block:: Python\\n   :dedent: 1\\n\\n\\n\\nText\\n"
    >>> drop_empty_code_blocks(page)
    '\\n\\n\\nText\\n'
    >>> kept = ".. code-block:: Python\\n\\n    x = 1\\n"
    >>> drop_empty_code_blocks(kept) == kept
    True
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not _CODE_BLOCK.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and re.match(r"^[ \t]+:[\w-]+:", lines[j]):
            j += 1  # the directive's options
        k = j
        while k < len(lines) and (not lines[k].strip() or lines[k][:1].isspace()):
            if lines[k].strip():
                break
            k += 1
        body = k < len(lines) and lines[k][:1].isspace() and lines[k].strip()
        if body:
            out.append(lines[i])
            i += 1
            continue
        i = j  # drop the directive and its options; the blank lines stay
    return "\n".join(out)


def _gallery_dirs(app) -> list[str]:
    dirs = app.config.sphinx_gallery_conf.get("gallery_dirs") or []
    return [dirs] if isinstance(dirs, str) else list(dirs)


def _examples_dirs(app) -> list[str]:
    dirs = app.config.sphinx_gallery_conf.get("examples_dirs") or []
    return [dirs] if isinstance(dirs, str) else list(dirs)


def _in_gallery(app, docname: str) -> bool:
    return any(docname.startswith(d.rstrip("/") + "/") for d in _gallery_dirs(app))


def _on_source_read(app, docname, source) -> None:
    if docname.endswith("sg_execution_times"):
        text = source[0]
        if not text.lstrip().startswith(":orphan:"):
            text = ":orphan:\n\n" + text
        if docname != "sg_execution_times" and ":nosearch:" not in text:
            text = ":nosearch:\n" + text
        source[0] = text
        return
    if _in_gallery(app, docname):
        source[0] = drop_empty_code_blocks(source[0])


# -- "View this page" and "Edit this page" ---------------------------------------------------------


def source_path(app, pagename: str) -> str | None:
    """The file of the checkout that a page is made from, relative to its root, or None.

    A tutorial comes from its gallery script, a gallery index from a ``GALLERY_HEADER.rst``,
    an API page from its module, a hand-written page from ``docs/``; a computation-times page
    from nothing.
    """
    root = Path(app.config.attention_root)
    srcdir = Path(app.srcdir)
    if pagename.endswith("sg_execution_times"):
        return None
    for gallery, examples in zip(_gallery_dirs(app), _examples_dirs(app), strict=False):
        prefix = gallery.rstrip("/") + "/"
        if pagename.startswith(prefix):
            rest = pagename[len(prefix) :]
            base = (srcdir / examples).resolve()
            if rest == "index" or rest.endswith("/index"):
                candidate = base / rest.removesuffix("index") / "GALLERY_HEADER.rst"
            else:
                candidate = base / f"{rest}.py"
            return candidate.relative_to(root).as_posix() if candidate.is_file() else None
    if pagename.startswith("generated/"):
        name = pagename.removeprefix("generated/")
        module = _module_of(name)
        if module is None:
            return None
        path = Path(module.__file__).resolve()
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            return None
    doc = srcdir / f"{pagename}.rst"
    return doc.resolve().relative_to(root).as_posix() if doc.is_file() else None


def _module_of(name: str):
    """The module that defines the object ``name`` (``attention.KVCache``), or the module
    ``name`` itself."""
    import importlib
    import inspect

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
        if obj is None:
            return None
        return inspect.getmodule(obj) if not inspect.ismodule(obj) else obj
    return None


def _download_of(app, pagename: str) -> str | None:
    """The site path of a tutorial's ``.py`` download (``_downloads/<hash>/name.py``)."""
    for src, (_, dest) in app.env.dlfiles.items():
        if Path(src).as_posix() == f"{pagename}.py":
            return f"_downloads/{dest}"
    return None


def _set_source_links(app, pagename, templatename, context, doctree) -> None:
    """Point furo's "view" and "edit" buttons at the file a page is made from."""
    if "page_source_suffix" not in context:
        return
    path = source_path(app, pagename)
    repo = app.config.html_theme_options.get("source_repository")
    branch = app.config.html_theme_options.get("source_branch", "main")
    if pagename.endswith("sg_execution_times"):
        context["page_source_suffix"] = ""  # generated: nothing to view or edit
        return
    generated = _in_gallery(app, pagename) or pagename.startswith("generated/")
    if not generated:
        # A page of docs/: furo's own links to its file in the repository are right; without
        # a repository the button would open the raw reST, directives and all.
        if not repo:
            context["page_source_suffix"] = ""
        return
    view = edit = None
    if repo and path:
        view = f"{repo.rstrip('/')}/blob/{branch}/{path}"
        edit = f"{repo.rstrip('/')}/edit/{branch}/{path}"
    elif _in_gallery(app, pagename) and (download := _download_of(app, pagename)):
        view = posixpath.relpath(download, posixpath.dirname(pagename) or ".")
    elif pagename.startswith("generated/") and path:
        module = path[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        source = "_modules/" + module.replace(".", "/")
        if module in getattr(app.env, "_viewcode_modules", {}):
            view = app.builder.get_relative_uri(pagename, source)
    # furo formats these with the page's file name; a link without braces is kept as it is.
    context["theme_source_view_link"] = view or ""
    context["theme_source_edit_link"] = edit or ""
    if not view:
        context["page_source_suffix"] = ""  # no button rather than the generated reST


# -- Downloads at the top -------------------------------------------------------------------------

#: sphinx-gallery's note above a tutorial's title: "Go to the end to download the full example
#: code".
END_NOTE_CLASS = "sphx-glr-download-link-note"
#: The buttons at the end of a tutorial that the top of the page repeats, in this order.
TOP_BUTTONS = ("sphx-glr-download-jupyter", "sphx-glr-download-python")
#: The class of the box that holds them at the top.
TOP_DOWNLOADS_CLASS = "attention-downloads"
#: The class of the prerequisites line (``attention_prerequisites.LINE_CLASS``).
_PREREQUISITES_CLASS = "attention-prerequisites"


def downloads_at_the_top(doctree: nodes.document) -> bool:
    """Put a copy of a tutorial's notebook and script buttons under its prerequisites line
    (under its title on a page without one) and take out the note that sends the reader to the
    end for them. Returns whether the page is a tutorial with downloads. The copies keep the
    buttons' download references, so they link the same files, in either language."""
    notes = [n for n in doctree.findall(nodes.Element) if END_NOTE_CLASS in n["classes"]]
    containers = list(doctree.findall(nodes.container))
    buttons = [next((c for c in containers if name in c["classes"]), None) for name in TOP_BUTTONS]
    if not notes or None in buttons:
        return False
    for note in notes:
        note.parent.remove(note)
    box = nodes.container(classes=[TOP_DOWNLOADS_CLASS])
    box.extend(copy.deepcopy(button) for button in buttons)
    line = next(
        (p for p in doctree.findall(nodes.paragraph) if _PREREQUISITES_CLASS in p["classes"]),
        None,
    )
    if line is not None:
        line.parent.insert(line.parent.index(line) + 1, box)
    else:
        section = next(doctree.findall(nodes.section))
        title = next(iter(section.findall(nodes.title)))
        section.insert(section.index(title) + 1, box)
    return True


def _downloads_at_the_top(app, doctree, docname) -> None:
    if app.builder.format == "html":
        downloads_at_the_top(doctree)


# -- The sidebar -----------------------------------------------------------------------------------

#: A link of the navigation tree, the current page's too (``class="current reference internal"``).
_LINK_TEXT = re.compile(r'(<a class="[^"]*\breference internal\b[^"]*"[^>]*>)([^<]*)(</a>)')


def break_after_separators(navigation: str) -> str:
    """The sidebar's HTML with a line-break opportunity after each dot and underscore of a
    link's text.

    >>> break_after_separators('<a class="reference internal" href="x">attention.a_b</a>')
    '<a class="reference internal" href="x">attention.<wbr>a_<wbr>b</a>'
    >>> break_after_separators('<a class="current reference internal" href="#">a.b</a>')
    '<a class="current reference internal" href="#">a.<wbr>b</a>'
    """

    def wbr(match: re.Match) -> str:
        text = re.sub(r"([._])(?=\w)", r"\1<wbr>", match.group(2))
        return match.group(1) + text + match.group(3)

    return _LINK_TEXT.sub(wbr, navigation)


def _break_sidebar_names(app, pagename, templatename, context, doctree) -> None:
    if "furo_navigation_tree" in context:
        context["furo_navigation_tree"] = break_after_separators(context["furo_navigation_tree"])


def setup(app):
    app.add_config_value("attention_root", "", "env", str)
    app.add_node(excerpt_link, html=(lambda self, node: None, lambda self, node: None))
    app.add_directive("literalinclude", ExcerptInclude, override=True)
    app.connect("doctree-resolved", _resolve_excerpt_links)
    app.connect("doctree-resolved", _downloads_at_the_top)
    app.connect("source-read", _on_source_read)
    # After furo's own handler (priority 500), which computes the navigation tree.
    app.connect("html-page-context", _set_source_links, priority=600)
    app.connect("html-page-context", _break_sidebar_names, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = [
    "ExcerptInclude",
    "break_after_separators",
    "downloads_at_the_top",
    "drop_empty_code_blocks",
    "excerpt_caption",
    "source_anchor",
    "source_path",
]
