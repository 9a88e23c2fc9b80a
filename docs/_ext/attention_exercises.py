"""Solutions to a page's exercises, folded away until the reader opens them. Loaded by
``conf.py`` as a Sphinx extension, after ``sphinx_design``.

A gallery page ends with an ``Exercises`` section; each solution starts with the reST comment
``.. solution N`` on a line of its own in a text block (the first one at the end of the
exercises' block, the next ones opening a ``# %%`` block), followed by the code cell that
computes and asserts the answer::

    # 1. **Title.** The question.
    #
    # .. solution 1
    #
    # What to notice in the solution (optional).

    print(answer)

    # %%
    # .. solution 2

In the reST that sphinx-gallery writes, every block starts after a
``.. GENERATED FROM PYTHON SOURCE LINES a-b`` comment. :func:`fold_solutions` (a
``source-read`` handler on the gallery's documents) indents everything from a marker to the
next text block under a collapsed sphinx-design ``.. dropdown::`` titled "Solution to
exercise N": the solution's prose, its code, the code's printed output and its figures. The
marker is a comment, so without this extension a page builds as well, with the solution
shown open; the notebook downloads turn it into a bold line (``attention_downloads``).
"""

from __future__ import annotations

import re

#: A solution marker: a text block's first line ``.. solution N``.
SOLUTION_MARKER = re.compile(r"^[ \t]*\.\.[ \t]+solution[ \t]+(?P<number>\d+)[ \t]*$")
#: The heading of a solution's dropdown.
SOLUTION_TITLE = "Solution to exercise {number}"
#: The class on every solution's dropdown, for the site's stylesheet.
SOLUTION_CLASS = "attention-solution"

# sphinx-gallery's comment before each block, and the footer after the last block.
_BLOCK_START = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES \d+-\d+$")
_FOOTER = re.compile(r"^\.\. (rst-class:: sphx-glr-timing|_sphx_glr_download_)")
_CODE_START = re.compile(r"^\.\. code-block:: ", flags=re.IGNORECASE)
_INDENT = "   "


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """``(start, end)`` line ranges of the generated blocks, each from its GENERATED comment
    to the next one (the last up to the footer)."""
    starts = [i for i, line in enumerate(lines) if _BLOCK_START.match(line)]
    if not starts:
        return []
    footer = next(
        (i for i, line in enumerate(lines) if i > starts[-1] and _FOOTER.match(line)),
        len(lines),
    )
    return list(zip(starts, [*starts[1:], footer], strict=True))


def _is_code(lines: list[str], start: int, end: int) -> bool:
    """Whether the block ``lines[start:end]`` is a code cell (its first line a code block)."""
    first = next((line for line in lines[start + 1 : end] if line.strip()), "")
    return bool(_CODE_START.match(first))


def _marker(lines: list[str], start: int, end: int) -> tuple[int, int] | None:
    """``(line index, N)`` of the first ``.. solution N`` marker of a text block, if any."""
    for i in range(start + 1, end):
        match = SOLUTION_MARKER.match(lines[i])
        if match and not lines[i][:1].isspace():
            return i, int(match.group("number"))
    return None


def fold_solutions(text: str) -> str:
    """The reST of a generated gallery page with each solution folded into a dropdown.

    From each ``.. solution N`` marker to the end of its text block, with the code blocks that
    follow it up to the next text block, goes into a collapsed ``.. dropdown:: Solution to
    exercise N``. A page without markers is returned unchanged. A second marker in the same
    text block, or an indented one, raises ``ValueError``: it would otherwise vanish from the
    page silently.
    """
    lines = text.split("\n")
    blocks = _blocks(lines)
    out: list[str] = []
    done = 0  # lines[:done] are in out
    b = 0
    while b < len(blocks):
        start, end = blocks[b]
        marker = None if _is_code(lines, start, end) else _marker(lines, start, end)
        if marker is None:
            b += 1
            continue
        line, number = marker
        last = b + 1
        while last < len(blocks) and _is_code(lines, *blocks[last]):
            last += 1
        stop = blocks[last - 1][1]
        out += lines[done:line]
        out += [
            f".. dropdown:: {SOLUTION_TITLE.format(number=number)}",
            f"{_INDENT}:class-container: {SOLUTION_CLASS}",
            "",
        ]
        body = lines[line + 1 : stop]
        while body and not body[0].strip():
            body.pop(0)
        out += [_INDENT + x if x.strip() else "" for x in body]
        done = stop
        b = last
    out += lines[done:]
    folded = "\n".join(out)
    stray = [x for x in folded.split("\n") if SOLUTION_MARKER.match(x)]
    if stray:
        raise ValueError(
            f"{stray[0].strip()!r} must start a line of a text block, after the previous "
            "solution's code: each solution is its text and the code cell after it"
        )
    return folded


def _gallery_dirs(app) -> list[str]:
    dirs = app.config.sphinx_gallery_conf.get("gallery_dirs") or []
    return [dirs] if isinstance(dirs, str) else list(dirs)


def _on_source_read(app, docname, source):
    if not any(docname.startswith(d.rstrip("/") + "/") for d in _gallery_dirs(app)):
        return
    from sphinx.errors import ExtensionError

    try:
        source[0] = fold_solutions(source[0])
    except ValueError as exc:
        raise ExtensionError(f"{docname}: {exc}") from exc


def setup(app):
    app.setup_extension("sphinx_design")
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = ["SOLUTION_CLASS", "SOLUTION_MARKER", "SOLUTION_TITLE", "fold_solutions"]
