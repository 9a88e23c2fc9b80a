"""The figures' checks, run on every figure the gallery draws (sphinx-gallery's scraper).

A figure is saved at its own size and shown in the page's text column; a figure wider than the
column is shrunk to fit, and its text with it. :func:`scraper` refuses (fails the build) any
figure whose text would show under :data:`MIN_PT` points at desktop width, or that draws lines,
bars or markers in a red and a green of about the same lightness (a pair that most colour-blind
readers cannot tell apart), before handing the figures to sphinx-gallery's own matplotlib scraper.

The same functions serve the tests (``tests/docs``) and a script run outside the build::

    small = small_text(fig, display_px=COLUMN_PX)   # [(text, points as shown), ...]
    pairs = red_green_pairs(fig)                    # [(red colour, green colour), ...]
"""

from __future__ import annotations

import colorsys

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


def small_text(fig, *, display_px: float = COLUMN_PX, min_pt: float = MIN_PT):
    """The texts of ``fig`` smaller than ``min_pt`` points once shown ``display_px`` wide.

    Returns:
        list[tuple[str, float]]: each text and its size in points as shown, smallest first.
    """
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


def figure_problems(fig, *, display_px: float = COLUMN_PX) -> list[str]:
    """What is wrong with ``fig`` as the page shows it, in sentences (empty when nothing)."""
    problems = []
    small = small_text(fig, display_px=display_px)
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
    return problems


def scraper(block, block_vars, gallery_conf, **kwargs):
    """sphinx-gallery's matplotlib scraper, after :func:`figure_problems` found nothing."""
    import matplotlib.pyplot as plt
    from sphinx_gallery.scrapers import matplotlib_scraper

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
        raise ValueError("unreadable figure\n" + "\n".join(report))
    return matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
