// The search page shows, under each result, a snippet of the page's text. Formulas are in that
// text as the LaTeX that MathJax typesets, \((N, L, E)\) or \[\sqrt{D}\]: this reads them as
// plain text instead, (N, L, E) and √D, before the snippet is made.
(() => {
  const WORDS = {
    times: "×", cdot: "·", sqrt: "√", infty: "∞", le: "≤", leq: "≤", ge: "≥", geq: "≥",
    ne: "≠", neq: "≠", approx: "≈", sum: "Σ", in: "∈", to: "→", ldots: "…", dots: "…",
    alpha: "α", beta: "β", theta: "θ", lambda: "λ", mu: "μ", sigma: "σ", pi: "π",
  };
  const plain = (text) =>
    text
      .replace(/\\[()[\]]/g, "")
      .replace(/\\(?:mathbf|mathrm|operatorname|text|mathit|boldsymbol)\b/g, "")
      .replace(/\\(?:left|right|big|Big|quad|qquad)\b|\\[,;!]/g, "")
      .replace(/\\([A-Za-z]+)/g, (match, word) => WORDS[word] ?? word)
      .replace(/[{}]/g, "");
  const install = () => {
    if (typeof Search === "undefined" || Search.htmlToText.plainMaths) return;
    const original = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => plain(original(htmlString, anchor));
    Search.htmlToText.plainMaths = true;
  };
  install();
  document.addEventListener("DOMContentLoaded", install);
})();
