/* Every figure that a tutorial's code drew opens at full size.

   A page shows a figure in its text column; on a phone (390 px) a figure drawn for a desktop
   column is shrunk to about half its size. Each figure is made a link to its sharpest file
   (the 2x source of its srcset, else its src), so a tap opens it alone, where it can be zoomed.
   The image stays the link's only content: its alt text names the link. */
(function () {
  "use strict";

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

  function link() {
    const figures = document.querySelectorAll(
      "img.sphx-glr-single-img, img.sphx-glr-multi-img");
    for (const img of figures) {
      if (img.closest("a")) continue;
      const a = document.createElement("a");
      a.href = sharpest(img);
      a.className = "figure-full-size";
      img.replaceWith(a);
      a.appendChild(img);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", link);
  else link();
})();
