"""Take the README's screenshot of a tutorial page from the built site.

    .venv/bin/python tests/site/screenshot.py              # after `make html`
    .venv/bin/python tests/site/screenshot.py --tutorial 04_multi_head --theme dark

Serves build/html on 127.0.0.1, opens the tutorial in Debian's Chromium (offline, like the
tests), scrolls one of its figures into the middle of the window so the
code above it and the heatmap both show, and writes docs/_static/readme-screenshot.png.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import sitecheck

DEFAULT_TUTORIAL = "11_visualising_attention"
#: The trained classifier's first layer: code, a grid of heads and the printed prediction.
DEFAULT_FIGURE = 2
DEFAULT_OUT = sitecheck.REPO_ROOT / "docs" / "_static" / "readme-screenshot.png"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tutorial", default=DEFAULT_TUTORIAL, help="page name, e.g. 04_multi_head"
    )
    parser.add_argument(
        "--figure",
        type=int,
        default=DEFAULT_FIGURE,
        help=f"which figure of the page to centre (1 = first; default {DEFAULT_FIGURE})",
    )
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--site", type=Path, default=sitecheck.SITE_DIR)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    rel = sitecheck.tutorial(args.tutorial)
    if not (args.site / rel).is_file():
        print(f"{args.site / rel} does not exist: run `make html` first.", file=sys.stderr)
        return 1
    figures = sitecheck.parse_page(args.site / rel).figures
    if not 1 <= args.figure <= len(figures):
        print(
            f"{rel} has {len(figures)} figures; --figure {args.figure} is not one.", file=sys.stderr
        )
        return 1

    with sitecheck.serve(args.site) as url, sitecheck.chromium() as browser:
        context = browser.new_context(
            viewport={"width": args.width, "height": args.height}, color_scheme=args.theme
        )
        context.add_init_script(f"localStorage.setItem('theme', '{args.theme}')")
        context.route(sitecheck.NOT_LOCAL_URL, lambda route: route.abort("blockedbyclient"))
        page = context.new_page()
        page.goto(url + rel, wait_until="load")
        page.wait_for_function("() => !window.MathJax || MathJax.startup?.promise")
        page.evaluate("() => window.MathJax ? MathJax.startup.promise.then(() => 1) : 1")
        page.evaluate("() => document.fonts.ready.then(() => 1)")
        figure = page.locator("img.sphx-glr-single-img, img.sphx-glr-multi-img").nth(
            args.figure - 1
        )
        figure.evaluate("el => el.scrollIntoView({block: 'center', behavior: 'instant'})")
        png = page.screenshot()
        context.close()

    from PIL import Image

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(io.BytesIO(png)) as image:
        image.save(args.out, optimize=True)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB) from {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
