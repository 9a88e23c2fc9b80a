/* Every figure that a tutorial's code drew opens at full size, and never shows smaller than
   in a desktop column.

   Each figure is made a link to its sharpest file (the 2x source of its srcset, else its src),
   so a tap opens it alone, where it can be zoomed. The image stays the link's only content:
   its alt text names the link.

   On a screen narrower than the desktop column a figure keeps its desktop width (custom.css)
   and its link scrolls sideways: the link is the scrolling region, so it takes the focus
   (Tab), is named by the figure's alt text, and the arrow keys scroll it (scroll-regions.js
   keeps them from turning the page). While a figure is wider than its link, a line under it
   says so; the line is hidden again when the whole figure fits. */
(function () {
  "use strict";

  const HINT = "Swipe sideways to see the whole figure, or tap it to open it full size.";

  function sharpest(img) {
    let best = img.getAttribute("src"), density = 1;
    for (const part of (img.getAttribute("srcset") || "").split(",")) {
      const [url, descriptor] = part.trim().split(/\s+/);
      const d = parseFloat(descriptor || "1x");
      if (url && descriptor && descriptor.endsWith("x") && d > density) {
        best = url;
        density = d;
      }
    }
    return best;
  }

  // Show the hint under a link exactly while its figure overflows it.
  function showHint(a) {
    const hint = a.nextElementSibling;
    if (!hint || !hint.classList.contains("figure-scroll-hint")) return;
    hint.hidden = !(a.scrollWidth > a.clientWidth + 1);
  }

  function link() {
    const figures = document.querySelectorAll(
      "img.sphx-glr-single-img, img.sphx-glr-multi-img");
    const observer = "ResizeObserver" in window
      ? new ResizeObserver(entries => entries.forEach(entry => showHint(entry.target)))
      : null;
    for (const img of figures) {
      if (img.closest("a")) continue;
      const a = document.createElement("a");
      a.href = sharpest(img);
      a.className = "figure-full-size";
      img.replaceWith(a);
      a.appendChild(img);
      const hint = document.createElement("p");
      hint.className = "figure-scroll-hint";
      hint.textContent = HINT;
      hint.hidden = true;
      a.after(hint);
      if (observer) observer.observe(a);
      img.addEventListener("load", () => showHint(a));
      showHint(a);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", link);
  else link();
})();
