"""The landing page's figure, drawn with Matplotlib at build time, in a light and a dark version.
Loaded by ``conf.py`` as a Sphinx extension.

The figure shows attention at work on one short sentence: the weights one query gives every key
(left) and the weights of every query at once (right). The weights are computed by
:func:`attention.scaled_dot_product_attention` from made-up query and key vectors, in which a
verb looks for the noun before it, an article for the noun after it and a noun for its
article; the caption on the landing page says so.

Each panel is an SVG of its own (a narrow screen stacks them, each as large as the column
allows), in two versions whose ground is the colour of furo's page in each scheme, with text
of the page's colour, so it reads the same in both; the landing page shows the one of the scheme in
use (furo's ``only-light`` and ``only-dark`` classes). They are written to
``docs/generated/landing/`` (generated, git-ignored) before the pages are read, and again when
this file changes.

    python docs/_ext/attention_landing.py OUT_DIR      draws both into OUT_DIR
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

#: The words of the sentence, and the kind of each.
TOKENS = ("the", "cat", "sat", "on", "the", "mat")
KINDS = ("article", "noun", "verb", "preposition", "article", "noun")
#: Which kind of key each kind of query looks for, and in which direction (+1: after it).
LOOKS_FOR = {
    "article": ("noun", +1),
    "noun": ("article", -1),
    "verb": ("noun", -1),
    "preposition": ("noun", +1),
}
#: The query whose weights the left panel shows.
QUERY = 2  # "sat"
#: furo's page colours, and the site's accent colour, in each scheme.
THEMES = {
    "light": {"ground": "#ffffff", "text": "#1a1c1e", "muted": "#5a5c63", "accent": "#b3401a"},
    "dark": {"ground": "#131416", "text": "#e0e0e0", "muted": "#a0a3a8", "accent": "#ff9a6b"},
}
#: Where the figures go, relative to the source directory.
OUT_DIR = "generated/landing"
#: The picture of a link to the site when it is shared (Open Graph): a PNG, which every
#: previewer reads, of the first panel in the light scheme. Served as ``_static/<name>``.
PREVIEW = "attention-preview.png"


def name(panel: str, theme: str) -> str:
    """The file name of a panel in a theme."""
    return f"attention-{panel}-{theme}.svg"


def weights():
    """The attention weights of the sentence, (L, L): row i is what query i gives each key.

    A word's key says what kind of word it is and where it stands; its query says which kind
    it looks for, and on which side of it (nearer is better): an article looks for the noun
    after it, a verb for the noun before it. Scaled dot products, then a softmax, by the
    package's own function.
    """
    import torch

    from attention import scaled_dot_product_attention

    kinds = sorted(set(KINDS))
    L = len(TOKENS)
    D = len(kinds) + L  # a slot per kind of word, then a slot per position
    keys = torch.zeros(L, D)  # (L, D)
    queries = torch.zeros(L, D)  # (L, D)
    for i, kind in enumerate(KINDS):
        keys[i, kinds.index(kind)] = 1.0  # what it is
        keys[i, len(kinds) + i] = 1.0  # where it is
        wanted, direction = LOOKS_FOR[kind]
        queries[i, kinds.index(wanted)] = 4.0  # what it looks for
        for j in range(L):
            steps = (j - i) * direction
            if steps >= 1:  # and where: the nearer, on its side, the better
                queries[i, len(kinds) + j] = 1.5 * 0.5 ** (steps - 1)
    _, w = scaled_dot_product_attention(queries, keys, keys, scale=1.0)  # weights (L, L)
    return w


#: The two panels: one query's weights, and every query's.
PANELS = ("query", "matrix")


def draw(path: Path, theme: str, panel: str) -> Path:
    """Draw ``panel`` ("query" or "matrix") in ``theme`` ("light" or "dark") to ``path``, an
    SVG (or a PNG at 200 dpi, for a path ending in ``.png``). Each panel is a figure of its
    own, so that a narrow screen stacks them and each keeps its text large."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap

    colours = THEMES[theme]
    w = weights().numpy()
    L = len(TOKENS)
    positions = list(range(L))
    style = {
        "font.size": 13,
        "text.color": colours["text"],
        "axes.labelcolor": colours["text"],
        "xtick.color": colours["text"],
        "ytick.color": colours["text"],
        "axes.edgecolor": colours["muted"],
        "svg.fonttype": "path",
        "svg.hashsalt": "attention-landing",  # the same file on every build
    }
    with plt.rc_context(style):
        fig, ax = plt.subplots(figsize=(5.6, 4.4))
        fig.patch.set_facecolor(colours["ground"])
        ax.set_facecolor(colours["ground"])
        if panel == "query":
            labels = [f"{t}\n{i}" for i, t in enumerate(TOKENS)]
            bars = ax.bar(positions, w[QUERY], color=colours["accent"], width=0.65)
            for bar, value in zip(bars, w[QUERY], strict=True):
                x = bar.get_x() + bar.get_width() / 2
                ax.text(x, bar.get_height() + 0.02, f"{value:.2f}", ha="center", va="bottom")
            ax.set_xticks(positions, labels)
            ax.set_ylim(0, 1.0)
            ax.set_ylabel("weight (they sum to 1)")
            ax.set_xlabel("keys: every word of the sentence")
            ax.set_title(f'One query, "{TOKENS[QUERY]}": a weight per key', pad=12)
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
        else:
            cmap = LinearSegmentedColormap.from_list(
                "accent", [colours["ground"], colours["accent"]]
            )
            image = ax.imshow(w, cmap=cmap, vmin=0, vmax=1)
            ax.set_xticks(positions, TOKENS)
            ax.set_yticks(positions, TOKENS)
            ax.set_xlabel("key")
            ax.set_ylabel("query")
            ax.set_title("Every query at once: the weights", pad=12)
            for i in range(L):
                for j in range(L):
                    strong = w[i, j] > 0.5
                    ax.text(
                        j,
                        i,
                        f"{w[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=11,
                        color=colours["ground"] if strong else colours["text"],
                    )
            bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
            bar.outline.set_edgecolor(colours["muted"])
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".png":
            fig.savefig(path, format="png", dpi=200, facecolor=colours["ground"])
        else:
            metadata = {"Date": None}  # the same file on every build
            fig.savefig(path, format="svg", facecolor=colours["ground"], metadata=metadata)
        plt.close(fig)
    return path


def _stamp() -> str:
    """What the figures depend on: this file (the package's kernel is tested elsewhere)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def draw_all(out_dir: Path) -> list[Path]:
    """Draw every panel in both themes into ``out_dir`` unless they are there from this
    version of the script; return their paths."""
    stamp = out_dir / "stamp.txt"
    paths = {(p, t): out_dir / name(p, t) for p in PANELS for t in THEMES}
    paths["preview"] = out_dir / PREVIEW
    fresh = stamp.is_file() and stamp.read_text() == _stamp()
    if fresh and all(p.is_file() for p in paths.values()):
        return list(paths.values())
    for key, path in paths.items():
        panel, theme = ("query", "light") if key == "preview" else key
        draw(path, theme, panel)
    stamp.write_text(_stamp())
    return list(paths.values())


def _on_builder_inited(app) -> None:
    draw_all(Path(app.srcdir) / OUT_DIR)


def _copy_preview(app, exception) -> None:
    """Serve the preview from ``_static/`` (the landing page's SVGs are its images)."""
    if exception is not None or app.builder.format != "html":
        return
    import shutil

    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(app.srcdir) / OUT_DIR / PREVIEW, static / PREVIEW)


def setup(app):
    app.connect("build-finished", _copy_preview)
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    for written in draw_all(Path(sys.argv[1])):
        print(written)
