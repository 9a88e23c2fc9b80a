/* Scrolling regions that a keyboard can reach.

   A code block, an output, a formula or a table wider than the page scrolls sideways; a mouse
   or a finger can scroll it, a keyboard cannot unless the region can take the focus. This
   script finds, in the page's content, every element that scrolls (its content overflows and
   its CSS lets it scroll) and gives it tabindex="0", so Tab reaches it and the arrow keys
   scroll it, with role="group" and a name saying what it holds. It runs when the page has
   loaded, again when the window changes size (a region may start or stop scrolling) and once
   the formulas are typeset. Regions it marked that no longer scroll lose the marks again, so a
   wide screen has no extra Tab stops. In a marked region, and in any focused element that
   scrolls sideways (a figure's link on a phone), the left and right arrow keys scroll it
   rather than turn the page. The outline of a focused region is in custom.css. */
(function () {
  "use strict";

  const MARK = "data-scroll-region";
  // Inline elements never scroll; MathJax's inner elements are many and never scroll either.
  const SKIP = new Set(["A", "SPAN", "CODE", "EM", "STRONG", "IMG", "BR", "SVG", "PATH"]);

  function scrolls(el) {
    const style = getComputedStyle(el);
    const x = /auto|scroll/.test(style.overflowX) && el.scrollWidth > el.clientWidth + 1;
    const y = /auto|scroll/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1;
    return x || y ? { x, y } : null;
  }

  function describe(el, how) {
    let what = "Scrolling region";
    if (el.closest(".sphx-glr-script-out")) what = "Output of the code above";
    else if (el.matches("pre") || el.closest("div[class*='highlight']")) what = "Code";
    else if (el.closest(".math-wrapper, mjx-container, div.math")) what = "Formula";
    else if (el.querySelector("table") || el.closest("table")) what = "Table";
    const where = how.x && how.y ? "scrolls" : how.x ? "scrolls sideways" : "scrolls down";
    return `${what}, ${where}`;
  }

  function mark(el, how) {
    if (el.hasAttribute(MARK)) {
      el.setAttribute("aria-label", describe(el, how));
      return;
    }
    // A region the page itself made focusable, or already named, is left as it is.
    if (el.hasAttribute("tabindex") || el.hasAttribute("aria-label")) return;
    el.setAttribute(MARK, "");
    el.setAttribute("tabindex", "0");
    if (!el.hasAttribute("role")) el.setAttribute("role", "group");
    el.setAttribute("aria-label", describe(el, how));
  }

  function unmark(el) {
    el.removeAttribute(MARK);
    el.removeAttribute("tabindex");
    if (el.getAttribute("role") === "group") el.removeAttribute("role");
    el.removeAttribute("aria-label");
  }

  function update() {
    const content = document.querySelector("article") || document.body;
    for (const el of content.querySelectorAll("*")) {
      const tag = el.tagName.toUpperCase();
      if (SKIP.has(tag) || (tag.startsWith("MJX-") && tag !== "MJX-CONTAINER")) continue;
      const how = scrolls(el);
      if (how) mark(el, how);
      else if (el.hasAttribute(MARK)) unmark(el);
    }
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      update();
    });
  }

  // Sphinx's keyboard navigation (navigation_with_keys) turns the page on ArrowLeft and
  // ArrowRight; inside a scrolling region those keys scroll it instead. A focused element
  // that scrolls sideways itself (a figure's link on a phone, figure-links.js) is one too.
  function keepArrows(event) {
    if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
    const focused = document.activeElement;
    if (!focused || !focused.closest) return;
    const how = focused === document.body ? null : scrolls(focused);
    if (focused.closest(`[${MARK}]`) || (how && how.x)) event.stopPropagation();
  }

  function start() {
    update();
    window.addEventListener("keydown", keepArrows, true);
    window.addEventListener("resize", schedule);
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(schedule);
    }
  }

  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();
