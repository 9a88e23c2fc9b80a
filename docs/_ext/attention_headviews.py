"""Head views: a page's own example, every layer and head of its trained model, under its figure.

A page that draws a trained model's weights saves the example it draws, in a hidden line, with
:func:`attention.head_view.save_head_view` (``"16-methods"``: the tokens and the weights of every
layer and head), and puts ``.. head-view:: 16-methods`` under the figure. The directive writes an
empty ``<div class="attention-head-view" data-view="16-methods">``, so that without JavaScript
the page reads as it would without it; ``web/src/head-view.js`` (copied to ``_static/widgets/``
with the other widgets' scripts by attention_widgets) fills it from
``_static/head-views/16-methods.json``: no model and no runtime, only the numbers.

The pages run in the builder's process before any document is read, so the examples they saved
are in :data:`attention.head_view.HEAD_VIEWS` when the documents are read. This extension keeps
each one in ``docs/tutorials/_head_views/<name>.json``, beside the pages sphinx-gallery wrote,
so that a build in which the page did not run (an unchanged page, the Chinese edition, which
runs none) still has it, and copies the views of the site's pages into ``_static/head-views/``
at the end of the build. A directive whose view no page saved fails the build, except in a
partial build (``ATTENTION_GALLERY_PATTERN``), where the page may not have run: the view is then
left out.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Where the examples are kept between builds, under the source directory (git-ignored, as the
#: pages sphinx-gallery writes there are).
CACHE = Path("tutorials") / "_head_views"
MARKER = 'class="attention-head-view"'


def _cache(app) -> Path:
    return Path(app.srcdir) / CACHE


class HeadViewDirective(Directive):
    """``.. head-view:: name``: the empty element the script fills with the saved example."""

    required_arguments = 1

    def run(self):
        from attention.head_view import NAME

        env = self.state.document.settings.env
        name = self.arguments[0]
        if NAME.fullmatch(name) is None:
            raise self.error(f"a head view's name is lower-case words joined by '-'; got {name!r}")
        if env.app.builder.format == "html" and not (_cache(env.app) / f"{name}.json").is_file():
            if os.environ.get("ATTENTION_GALLERY_PATTERN"):  # the page may not have run: no view
                logger.info("head view %r has no example in this partial build; left out", name)
                return []
            raise self.error(
                f"head view {name!r} has no example: the page must call "
                f"attention.head_view.save_head_view({name!r}, ...) and run in this build "
                "(ATTENTION_RUN_STALE=1 runs an unchanged page again)"
            )
        if not hasattr(env, "attention_head_views"):
            env.attention_head_views = {}
        env.attention_head_views.setdefault(env.docname, set()).add(name)
        html = f'<div class="attention-head-view" data-view="{name}"></div>'
        return [nodes.raw("", html, format="html")]


def _keep_examples(app, env, docnames) -> None:
    """Write the examples the pages saved in this process (none where no page ran)."""
    from attention.head_view import HEAD_VIEWS

    for name, data in HEAD_VIEWS.items():
        path = _cache(app) / f"{name}.json"
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def _purge(app, env, docname) -> None:
    getattr(env, "attention_head_views", {}).pop(docname, None)


def _merge(app, env, docnames, other) -> None:
    if not hasattr(env, "attention_head_views"):
        env.attention_head_views = {}
    env.attention_head_views.update(getattr(other, "attention_head_views", {}))


def _add_script(app, pagename, templatename, context, doctree) -> None:
    if MARKER in context.get("body", ""):
        app.add_js_file("widgets/head-view.js", type="module")


def _copy_examples(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "head-views"
    target.mkdir(parents=True, exist_ok=True)
    for names in getattr(app.env, "attention_head_views", {}).values():
        for name in sorted(names):
            shutil.copy2(_cache(app) / f"{name}.json", target / f"{name}.json")


def setup(app):
    app.add_directive("head-view", HeadViewDirective)
    app.connect("env-before-read-docs", _keep_examples)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("html-page-context", _add_script)
    app.connect("build-finished", _copy_examples)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
