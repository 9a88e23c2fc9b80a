// The search page: snippets that read as text, and each API entry once.
//
// - Under each result the search shows a snippet of the page's text. Formulas are in that text
//   as the LaTeX that MathJax typesets, \((N, L, E)\) or \[\sqrt{D}\]: they are read as plain
//   text instead, (N, L, E) and √D. A tutorial's text starts with sphinx-gallery's note "Go to
//   the end to download the full example code": the note, the prerequisites line and the
//   download buttons are left out, so a snippet starts with what the page says.
// - An API page is found both as an object (attention.KVCache, with its anchor) and by its
//   title and text: the object result is kept, the others for the same page are dropped.
(() => {
  const WORDS = {
    times: "×", cdot: "·", sqrt: "√", infty: "∞", le: "≤", leq: "≤", ge: "≥", geq: "≥",
    ne: "≠", neq: "≠", approx: "≈", sum: "Σ", in: "∈", to: "→", ldots: "…", dots: "…",
    cdots: "…", alpha: "α", beta: "β", theta: "θ", lambda: "λ", mu: "μ", sigma: "σ", pi: "π",
    lvert: "|", rvert: "|", vert: "|", mid: "|", top: "ᵀ", odot: "⊙", otimes: "⊗",
    exp: "exp", log: "log", max: "max", min: "min", lfloor: "⌊", rfloor: "⌋",
  };
  const FRAC = /\\d?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g;
  const plain = (text) => {
    let out = text
      .replace(/\\[()[\]]/g, "")
      .replace(/\\(?:mathbf|mathrm|mathbb|operatorname|text|mathit|boldsymbol)\b/g, "")
      .replace(/\\(?:left|right|big|Big|bigg|Bigg|quad|qquad)\b|\\[,;:!]/g, "")
      .replace(/\\sqrt\s*\{([^{}]*)\}/g, (m, x) => (x.length === 1 ? `√${x}` : `√(${x})`));
    // \frac{a}{b} as (a)/(b), the innermost first.
    for (let previous = ""; previous !== out; ) {
      previous = out;
      out = out.replace(FRAC, "($1)/($2)");
    }
    return out
      .replace(/\\([A-Za-z]+)/g, (match, word) => WORDS[word] ?? word)
      .replace(/[{}]/g, "")
      .replace(/[ \t]{2,}/g, " ");
  };
  // What a snippet leaves out: sphinx-gallery's note and buttons (at the end and at the top), the
  // prerequisites line.
  const SKIPPED = [
    ".sphx-glr-download-link-note",
    ".attention-downloads",
    ".sphx-glr-footer",
    ".sphx-glr-signature",
    "p.attention-prerequisites",
    ".sphx-glr-timing",
  ];
  const withoutNotes = (htmlString) => {
    if (typeof DOMParser === "undefined") return htmlString;
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    let removed = false;
    for (const selector of SKIPPED) {
      doc.querySelectorAll(selector).forEach((el) => {
        el.remove();
        removed = true;
      });
    }
    return removed ? doc.documentElement.outerHTML : htmlString;
  };
  const onePerApiPage = (results) => {
    const withObject = new Set(
      results.filter((r) => r[6] === "object").map((r) => r[0]),
    );
    return results.filter(
      (r) => r[6] === "object" || !r[0].startsWith("generated/") || !withObject.has(r[0]),
    );
  };
  const install = () => {
    if (typeof Search === "undefined" || Search.htmlToText.plainMaths) return;
    const original = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => plain(original(withoutNotes(htmlString), anchor));
    Search.htmlToText.plainMaths = true;
    const perform = Search._performSearch;
    Search._performSearch = (...args) => onePerApiPage(perform(...args));
  };
  install();
  document.addEventListener("DOMContentLoaded", install);
})();
