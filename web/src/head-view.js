// The head view of a page's own example (docs/_ext/attention_headviews.py): the weights the
// build saved for the example the figure above draws, in every layer and head, read from a
// small JSON. No model and no runtime: pick a layer and a head, focus or hover a query token,
// and the bars under the keys are the weights it gives them. Where the keys are another
// sequence (cross-attention), they stand in a row of their own under the queries.

import { element, HeadView, strings } from "./widget.js";

const OWN = {
  en: {
    title: "Every layer and head of this example",
    intro: "The trained model's weights on the example drawn above, in every layer and head: choose a layer and a head, then focus or hover a token.",
    queries: "Queries: focus or hover one (arrow keys move along)",
    keys: "Keys: the bars are the weights the chosen query gives them",
    failed: "The head view could not load: ",
  },
  "zh-CN": {
    title: "这个例子的每一层、每一个头",
    intro: "训练好的模型在上图所画例子上的权重，每一层、每一个头都有：选一层和一个头，再聚焦或悬停在一个词元上。",
    queries: "查询：聚焦或悬停在其中一个上（方向键可左右移动）",
    keys: "键：条形是所选查询给它们的权重",
    failed: "头视图无法加载：",
  },
};

/** A HeadView over saved weights (``data.weights[layer][head][query]``, rows without their
 * trailing zeros), with the keys in a row of their own when they are not the queries. */
export class SavedHeadView extends HeadView {
  constructor(s, data, status) {
    super(s, data, status);
    this.data = data;
    const same = data.keys.length === data.queries.length && data.keys.every((k, j) => k === data.queries[j]);
    this.keys = same ? this.tokens : element("div", { class: "attention-widget-tokens", "aria-label": s.keys });
    if (!same) {
      this.tokens.setAttribute("aria-label", s.queries);
      this.tokens.previousElementSibling.textContent = s.queries; // in place of s.attention
      this.node.append(element("p", { text: s.keys }), this.keys);
    }
    this.current = data.queries.length - 1; // shown before the reader picks one
  }

  draw() {
    super.draw();
    if (this.keys !== this.tokens) {
      this.keys.replaceChildren(
        ...this.data.keys.map((label) =>
          element(
            "span",
            { class: "attention-widget-token" },
            element("span", { text: label }),
            element("span", { class: "attention-widget-weight", "aria-hidden": "true" }),
          ),
        ),
      );
    }
    this.look(this.current, false);
  }

  /** The weights of query ``i`` over the keys, in the chosen layer and head. */
  row(i) {
    const saved = this.data.weights[Number(this.layer.value)][Number(this.head.value)][i];
    return this.data.keys.map((_, j) => saved[j] ?? 0);
  }

  /** Bars for query ``i`` (each key's weight also in its ``data-weight``); said when asked. */
  look(i, announce = true) {
    this.current = i;
    const row = this.row(i);
    let best = 0;
    [...this.keys.children].forEach((token, j) => {
      token.querySelector(".attention-widget-weight").style.height = `${(1.2 * row[j]).toFixed(2)}rem`;
      token.dataset.weight = row[j].toFixed(4);
      if (row[j] > row[best]) best = j;
    });
    [...this.tokens.children].forEach((token, j) => token.classList.toggle("attention-widget-query", j === i));
    if (announce) {
      const words = this.s.looks(this.labels[i], i, this.data.keys[best], best, row[best].toFixed(2));
      this.status.textContent = words;
    }
  }
}

async function open(root) {
  const s = strings(OWN);
  const status = element("p", { role: "status", "aria-live": "polite", class: "attention-widget-status" });
  root.classList.add("attention-widget");
  root.append(element("p", { class: "attention-widget-title" }, element("strong", { text: s.title })), element("p", { text: s.intro }));
  try {
    const url = new URL(`../head-views/${root.dataset.view}.json`, import.meta.url); // _static/
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${response.status} ${url.pathname}`);
    const data = await response.json();
    const view = new SavedHeadView(s, data, status);
    root.append(view.node, status);
    view.show(data.queries, data);
    root.attentionHeadView = view; // the site's browser tests read it from here
  } catch (error) {
    status.textContent = s.failed + error.message;
    root.append(status);
  }
}

for (const root of document.querySelectorAll(".attention-head-view[data-view]")) open(root);
