"""The figures' checks, run on every figure the gallery draws (sphinx-gallery's scraper).

A figure is saved at its own size and shown in the page's text column; a figure wider than the
column is shrunk to fit, and its text with it. :func:`scraper` refuses (fails the build) any
figure whose text would show under :data:`MIN_PT` points at desktop width, that draws lines,
bars or markers in a red and a green of about the same lightness (a pair that most colour-blind
readers cannot tell apart), whose colour bars repeat one scale or stand taller than the plots
they explain, or that leaves an empty band above its title, before handing the figures to
sphinx-gallery's own matplotlib scraper.

The scraper also keeps a cell's output in the order it ran: sphinx-gallery shows a cell's
figures first and everything it printed after them, so a line printed to introduce a figure
would sit under it. What the cell printed before its first ``plt.show()`` is shown above its
figures, what it printed after below them, as in the downloaded notebook (:func:`scraper`,
:func:`record_show`).

The same functions serve the tests (``tests/docs``) and a script run outside the build::

    small = small_text(fig, display_px=COLUMN_PX)   # [(text, points as shown), ...]
    pairs = red_green_pairs(fig)                    # [(red colour, green colour), ...]
    bars = colour_bar_problems(fig)                 # [sentence, ...]
    gap = top_gap_px(fig, display_px=COLUMN_PX)     # CSS pixels of nothing above the title
"""

from __future__ import annotations

import colorsys
import sys

#: The smallest text, in points as the reader sees it.
MIN_PT = 8.0
#: The width of furo's text column in CSS pixels at desktop width (46em, 16 px to the em, as
#: measured at 1280 px); an image wider than this is scaled down to it.
COLUMN_PX = 736
#: sphinx-gallery shows the figures of a cell that draws several side by side, each at most
#: this share of the column (``.sphx-glr-multi-img { max-width: 42% }``).
MULTI_SHARE = 0.42


def _visible_texts(artist, inherited: bool = True):
    """Every :class:`matplotlib.text.Text` under ``artist`` that is drawn: visible itself and
    in every artist above it, with some non-blank text."""
    from matplotlib.text import Text

    visible = inherited and artist.get_visible()
    if not visible:
        return
    if isinstance(artist, Text) and artist.get_text().strip():
        yield artist
    for child in artist.get_children():
        yield from _visible_texts(child, visible)


def _saved_dpi(fig) -> float:
    import matplotlib

    dpi = matplotlib.rcParams["savefig.dpi"]
    return float(fig.dpi if dpi == "figure" else dpi)


def shown_scale(fig, *, display_px: float = COLUMN_PX) -> float:
    """The factor by which the page shrinks ``fig`` (1.0 when it fits the column)."""
    width_px = fig.get_figwidth() * _saved_dpi(fig)
    return min(1.0, display_px / width_px)


def small_text(fig, *, display_px: float = COLUMN_PX, min_pt: float = MIN_PT, drawn: bool = False):
    """The texts of ``fig`` smaller than ``min_pt`` points once shown ``display_px`` wide
    (``drawn``: the figure was drawn since its last change, so it is not drawn again).

    Returns:
        list[tuple[str, float]]: each text and its size in points as shown, smallest first.
    """
    if not drawn:
        fig.canvas.draw()  # tick labels exist only once the ticks have been located
    scale = shown_scale(fig, display_px=display_px)
    figure_box = fig.bbox
    small = {}
    for text in _visible_texts(fig):
        extent = text.get_window_extent()
        if extent.width == 0 or not extent.overlaps(figure_box):
            continue  # a tick label of a tick outside the axes' limits: not drawn
        shown = text.get_fontsize() * scale
        if shown < min_pt - 1e-6:
            small.setdefault(text.get_text(), round(shown, 2))
    return sorted(small.items(), key=lambda item: item[1])


def _hue_class(rgba) -> str | None:
    """ "red", "green" or None for a colour that is neither (or too grey or pale to matter)."""
    r, g, b, alpha = rgba
    if alpha < 0.2:
        return None
    hue, lightness, saturation = colorsys.rgb_to_hls(r, g, b)
    if saturation < 0.35 or not 0.15 < lightness < 0.85:
        return None
    degrees = 360 * hue
    if degrees < 20 or degrees >= 340:
        return "red"
    if 75 <= degrees < 165:
        return "green"
    return None


def _mark_colours(fig):
    """The colours of the lines, bars and markers of ``fig`` (not of its images: colour maps
    are chosen separately)."""
    from matplotlib.collections import Collection
    from matplotlib.colors import to_rgba
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for artist in ax.get_children():
            if not artist.get_visible() or artist is ax.patch:
                continue
            if isinstance(artist, Line2D):
                yield to_rgba(artist.get_color())
                if artist.get_marker() not in (None, "None", "", " "):
                    yield to_rgba(artist.get_markerfacecolor())
            elif isinstance(artist, Patch) and artist.get_fill():
                yield artist.get_facecolor()
            elif isinstance(artist, Collection):
                yield from (tuple(c) for c in artist.get_facecolors())
                yield from (tuple(c) for c in artist.get_edgecolors())


#: A red and a green this far apart in lightness (HLS, 0 to 1) are told apart without hue.
LIGHTNESS_APART = 0.2


def red_green_pairs(fig):
    """The (red, green) pairs of colours among ``fig``'s lines, bars and markers, as hex,
    that differ in hue only (their lightness within :data:`LIGHTNESS_APART`)."""
    from matplotlib.colors import to_hex, to_rgb

    seen = {"red": set(), "green": set()}
    for rgba in _mark_colours(fig):
        kind = _hue_class(rgba)
        if kind is not None:
            seen[kind].add(to_hex(rgba))

    def lightness(colour):
        return colorsys.rgb_to_hls(*to_rgb(colour))[1]

    return [
        (r, g)
        for r in sorted(seen["red"])
        for g in sorted(seen["green"])
        if abs(lightness(r) - lightness(g)) < LIGHTNESS_APART
    ]


#: A colour bar this much longer than the plots beside it looks like the scale of something else.
COLOUR_BAR_STRETCH = 1.4
#: The most empty space above a figure's first text or axes, in CSS pixels as shown.
MAX_TOP_GAP_PX = 30.0


def _colour_bars(fig):
    """The colour bars drawn in ``fig``."""
    return [
        ax._colorbar
        for ax in fig.axes
        if ax.get_visible() and getattr(ax, "_colorbar", None) is not None
    ]


def colour_bar_problems(fig, *, drawn: bool = False) -> list[str]:
    """What is wrong with the colour bars of ``fig``, in sentences: panels side by side that
    share one colour scale with a bar each (one bar serves them all, and leaves the panels
    wider), or a bar much longer than the plots it stands beside
    (:data:`COLOUR_BAR_STRETCH`), which reads as the scale of something else. ``drawn``: as
    for :func:`small_text`."""
    if not drawn:
        fig.canvas.draw()  # the axes' final places (an image's aspect shrinks its axes)
    bars = _colour_bars(fig)
    if not bars:
        return []
    problems = []
    scales: dict[tuple, list] = {}
    for bar in bars:
        norm, cmap = bar.mappable.norm, bar.mappable.get_cmap()
        key = (cmap.name, type(norm).__name__, norm.vmin, norm.vmax)
        scales.setdefault(key, []).append(bar.ax.get_window_extent())
    for extents in scales.values():
        # Bars of one scale side by side: their heights overlap.
        in_a_row = [
            (a, b)
            for i, a in enumerate(extents)
            for b in extents[i + 1 :]
            if min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5 * min(a.height, b.height)
        ]
        if in_a_row:
            problems.append(
                f"{len(extents)} colour bars of one colour scale for panels side by side: draw "
                "one bar for the panels that share it (fig.colorbar(image, ax=axes))."
            )
            break
    bar_axes = {id(bar.ax) for bar in bars}
    plots = [
        ax.get_window_extent()
        for ax in fig.axes
        if ax.get_visible() and id(ax) not in bar_axes and ax.axison
    ]
    if not plots:
        return problems
    for bar in bars:
        extent = bar.ax.get_window_extent()
        vertical = bar.orientation == "vertical"
        length = extent.height if vertical else extent.width
        low = min(p.y0 if vertical else p.x0 for p in plots)
        high = max(p.y1 if vertical else p.x1 for p in plots)
        span = high - low
        if span > 0 and length > COLOUR_BAR_STRETCH * span:
            side = "tall" if vertical else "wide"
            problems.append(
                f"a colour bar {length / span:.1f} times as {side} as the plots beside it: "
                "give it their size (fig.colorbar(image, ax=axes, shrink=...)) or use "
                "layout='compressed'."
            )
            break
    return problems


def top_gap_px(fig, *, display_px: float = COLUMN_PX, drawn: bool = False) -> float:
    """The empty band above the first text or axes of ``fig`` (its title, as a rule), in CSS
    pixels as the page shows the figure. ``drawn``: as for :func:`small_text`."""
    if not drawn:
        fig.canvas.draw()
    top = fig.get_tightbbox(fig.canvas.get_renderer()).y1  # inches
    gap_in = max(0.0, fig.get_figheight() - top)
    return gap_in * _saved_dpi(fig) * shown_scale(fig, display_px=display_px)


def figure_problems(fig, *, display_px: float = COLUMN_PX) -> list[str]:
    """What is wrong with ``fig`` as the page shows it, in sentences (empty when nothing)."""
    # One drawing serves every check: a drawing costs about as much as saving the figure.
    fig.canvas.draw()
    problems = []
    small = small_text(fig, display_px=display_px, drawn=True)
    if small:
        scale = shown_scale(fig, display_px=display_px)
        listed = ", ".join(f"{text!r} at {pt:g} pt" for text, pt in small[:6])
        more = f" and {len(small) - 6} more" if len(small) > 6 else ""
        problems.append(
            f"text under {MIN_PT:g} pt as shown ({fig.get_figwidth():g} in wide, shown at "
            f"{scale:.2f} of its size in a {display_px:g} px column): {listed}{more}. "
            "Make the figure narrower (stack its panels) or its text larger."
        )
    pairs = red_green_pairs(fig)
    if pairs:
        listed = ", ".join(f"{r} with {g}" for r, g in pairs[:4])
        problems.append(
            f"red and green marks in one figure ({listed}): choose colour-blind-safe colours "
            "(e.g. blue #0072b2 and orange #e69f00)."
        )
    problems += colour_bar_problems(fig, drawn=True)
    gap = top_gap_px(fig, display_px=display_px, drawn=True)
    if gap > MAX_TOP_GAP_PX:
        problems.append(
            f"{gap:.0f} px of empty space above the title as shown (at most "
            f"{MAX_TOP_GAP_PX:g}): use layout='constrained' or a figure height that fits "
            "the plot (an image keeps its aspect and leaves the rest of the height empty)."
        )
    return problems


# -- The order of a cell's output --------------------------------------------------------------

#: While a cell runs: the buffer of what it printed (sphinx-gallery's capture of stdout) and
#: how much of it was there at its first ``plt.show()``.
_shown_at: dict = {}


def record_show() -> None:
    """Make ``plt.show()`` note how much the running cell has printed so far, the first time
    it is called in the cell (the build's Agg backend shows nothing). Installed once."""
    import matplotlib.pyplot as plt

    if getattr(plt.show, "_attention_records", False):
        return
    original = plt.show

    def show(*args, **kwargs):
        output = getattr(sys.stdout, "output", None)  # sphinx-gallery's _LoggingTee
        if output is not None and hasattr(output, "getvalue"):
            if _shown_at.get("output") is not output:
                _shown_at.update(output=output, offset=len(output.getvalue()))
        return original(*args, **kwargs)

    show._attention_records = True
    plt.show = show


def printed_before_show() -> str:
    """What the cell that just ran printed before its first ``plt.show()``, taken out of its
    captured output (which keeps what it printed after); empty when it showed nothing."""
    output, offset = _shown_at.get("output"), _shown_at.get("offset", 0)
    _shown_at.clear()
    if output is None:
        return ""
    text = output.getvalue()
    before, after = text[:offset], text[offset:]
    if not before.strip():
        return ""
    output.seek(0)
    output.truncate()
    output.write(after)
    return before


def output_rst(text: str) -> str:
    """A cell's printed text as sphinx-gallery writes it."""
    from textwrap import indent

    from sphinx_gallery.gen_rst import CODE_OUTPUT

    return CODE_OUTPUT.format(indent(text.expandtabs(), " " * 4))


def scraper(block, block_vars, gallery_conf, **kwargs):
    """sphinx-gallery's matplotlib scraper, after :func:`figure_problems` found nothing; what
    the cell printed before showing its figures goes above them (:func:`record_show`)."""
    import matplotlib.pyplot as plt
    from sphinx_gallery.scrapers import matplotlib_scraper

    record_show()  # for the next cells: this one ran before the scraper was first called

    numbers = plt.get_fignums()
    display_px = COLUMN_PX if len(numbers) <= 1 else MULTI_SHARE * COLUMN_PX
    report = []
    for number in numbers:
        fig = plt.figure(number)
        title = fig._suptitle.get_text() if fig._suptitle is not None else ""
        if not title and fig.axes:
            title = fig.axes[0].get_title()
        for problem in figure_problems(fig, display_px=display_px):
            report.append(f"figure {title or number!r}: {problem}")
    if report:
        plt.close("all")
        _shown_at.clear()
        raise ValueError("unreadable figure\n" + "\n".join(report))
    images = matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)
    if not images.strip():
        _shown_at.clear()
        return images
    before = printed_before_show()
    return f"{output_rst(before)}\n{images}" if before else images


def setup(app):
    record_show()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
