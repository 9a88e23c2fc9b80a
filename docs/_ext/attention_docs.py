"""Build helpers for the site, loaded by ``conf.py`` as a Sphinx extension.

- :func:`reset_seeds` runs before every gallery example (sphinx-gallery's ``reset_modules``),
  so each page starts from the same random state and two builds print the same numbers.
- Names documented at the top level (``attention.MultiHeadAttention``) are defined in
  submodules (``attention.multi_head``); type hints name the submodule, so references to
  ``attention.multi_head.MultiHeadAttention`` are resolved to the public page.
- sphinx-gallery's computation-times pages load jQuery and DataTables from a CDN; the site must
  work offline, so those remote tags are dropped (the table stays, as a plain table).
- ``attention.masks`` is documented both through re-exported names (``attention.causal_mask``)
  and as a module; viewcode then links its source back to anchors that do not exist, so the
  "[docs]" links of the source pages are pointed at the anchors that do.
- sphinx-gallery writes figure titles into alt attributes unescaped; they are escaped, so a
  title with a double quote is the image's whole accessible name.
"""

from __future__ import annotations

import functools
import html
import re

# Remote <link>/<script> tags and the inline DataTables initialiser written into
# sg_execution_times.rst by sphinx-gallery.
_REMOTE_TAG = re.compile(r"^\s*<(link|script)\b[^>]*\bhttps?://[^>]*>(\s*</script>)?\s*$")
_DATATABLES_INIT = re.compile(
    r'<script type="text/javascript" class="init">.*?</script>', flags=re.DOTALL
)


def reset_seeds(gallery_conf, fname):
    """Seed ``random``, NumPy and PyTorch from ``ATTENTION_SEED`` and restore torch's defaults.

    sphinx-gallery calls this before every script (``reset_modules``); the scripts run in one
    process, so without it a page's numbers would depend on the pages that ran before it. The
    seed is :func:`attention.repro.seed_everything`'s, the one a downloaded script uses too.
    """
    import torch
    from attention_figures import record_show

    from attention.repro import seed_everything

    seed_everything()
    # What a cell prints before plt.show() goes above its figures (attention_figures.scraper).
    record_show()
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)


def strip_remote_assets(text: str) -> str:
    """Return the reST of a computation-times page without remote scripts or stylesheets."""
    text = _DATATABLES_INIT.sub("", text)
    lines = [line for line in text.splitlines() if not _REMOTE_TAG.match(line)]
    return "\n".join(lines) + "\n"


def _on_source_read(app, docname, source):
    if docname.endswith("sg_execution_times"):
        source[0] = strip_remote_assets(source[0])


@functools.cache
def _public_names() -> frozenset[str]:
    try:
        import attention
    except ImportError:
        return frozenset()
    return frozenset(getattr(attention, "__all__", ()))


def _resolve_reexported(app, env, node, contnode):
    """Point ``attention.<module>.<Name>`` at the page of ``attention.<Name>``."""
    if node.get("refdomain") != "py":
        return None
    parts = node.get("reftarget", "").split(".")
    if len(parts) < 3 or parts[0] != "attention":
        return None
    public = _public_names()
    for i in range(2, len(parts)):
        if parts[i] in public:
            target = ".".join(["attention", *parts[i:]])
            domain = env.domains["py"]
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], target, node, contnode
            )
    return None


_VIEWCODE_BACK = re.compile(r'(<a class="viewcode-back" href=")([^"#]*)#([^"]*)(")')


def _fix_viewcode_backlinks(app, pagename, templatename, context, doctree):
    """Point every "[docs]" link of a ``_modules/`` page at an anchor that exists.

    viewcode links each object of a source module to ``<page>#<prefix>.<name>`` with one
    ``<prefix>`` for the whole module. Objects of one module documented under two names
    (``attention.causal_mask``, ``attention.masks.to_torch_attn_mask``) then get links to
    anchors that do not exist; each link is redirected to the page that documents the object,
    the top-level name first.
    """
    if not pagename.startswith("_modules/") or "body" not in context:
        return
    modname = pagename[len("_modules/") :].replace("/", ".")
    entry = getattr(app.env, "_viewcode_modules", {}).get(modname)
    if not entry:
        return
    refname = entry[3]
    objects = app.env.domains["py"].objects
    package = modname.partition(".")[0]

    def relink(match):
        fragment = match.group(3)
        obj = objects.get(fragment)
        if obj is None:
            name = fragment.removeprefix(refname + ".")
            keys = [f"{package}.{name}", f"{modname}.{name}"]
            obj = next((objects[key] for key in keys if key in objects), None)
        if obj is None:
            return match.group(0)
        uri = app.builder.get_relative_uri(pagename, obj.docname)
        return f"{match.group(1)}{uri}#{obj.node_id}{match.group(4)}"

    context["body"] = _VIEWCODE_BACK.sub(relink, context["body"])


# sphinx-gallery writes a figure's title into its alt text unescaped, so a title with a double
# quote ends the attribute early: the image is read as 'Query ' instead of its whole title.
_GALLERY_IMG_ALT = re.compile(
    r'(<img src="[^"]*" srcset="[^"]*" alt=")(.*?)("(?: class = "[^"]*")?/>)', flags=re.DOTALL
)


def escape_figure_alt(body: str) -> str:
    """Return ``body`` with the alt text of sphinx-gallery's figures escaped for HTML.

    >>> escape_figure_alt('<img src="a.png" srcset="a.png" alt="Query "cat"" class = "x"/>')
    '<img src="a.png" srcset="a.png" alt="Query &quot;cat&quot;" class = "x"/>'
    """

    def escape(match):
        alt = html.escape(html.unescape(match.group(2)), quote=True)
        return f"{match.group(1)}{alt}{match.group(3)}"

    return _GALLERY_IMG_ALT.sub(escape, body)


def _escape_figure_alt(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = escape_figure_alt(context["body"])


def setup(app):
    app.connect("source-read", _on_source_read)
    app.connect("missing-reference", _resolve_reexported)
    app.connect("html-page-context", _fix_viewcode_backlinks)
    app.connect("html-page-context", _escape_figure_alt)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
