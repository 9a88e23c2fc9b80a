// What every widget shares: its words in the page's language, the start button that loads
// ONNX Runtime Web and the model only when the reader asks, and the head view (focus or hover a
// token: the bars under the tokens are the weights its query gives them, in the chosen layer
// and head).

const COMMON = {
  en: {
    title: "Try the model",
    start: "Start the model (downloads about 15 MB)",
    loading: "Loading the model…",
    failed: "The model could not start here: ",
    layer: "Layer",
    head: "Head",
    attention: "Where each token looks: focus or hover a token (arrow keys move along)",
    looks: (c, i, d, j, w) => `“${c}” (position ${i}) looks most at “${d}” (position ${j}), weight ${w}.`,
  },
  "zh-CN": {
    title: "试一试这个模型",
    start: "启动模型（约下载 15 MB）",
    loading: "正在加载模型……",
    failed: "模型无法在这里启动：",
    layer: "层",
    head: "头",
    attention: "每个词元看向哪里：聚焦或悬停在一个词元上（方向键可左右移动）",
    looks: (c, i, d, j, w) => `“${c}”（位置 ${i}）最多看向“${d}”（位置 ${j}），权重 ${w}。`,
  },
};

/** The words of a widget in the page's language: COMMON's and the widget's own. */
export function strings(own) {
  const lang = (document.documentElement.lang || "en").toLowerCase().startsWith("zh") ? "zh-CN" : "en";
  return { ...COMMON[lang], ...own[lang] };
}

export function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  node.append(...children);
  return node;
}

export function field(label, input) {
  return element("label", {}, `${label} `, input);
}

/**
 * Put a widget's title, introduction, start button and live region in ``root``; on start,
 * load ONNX Runtime Web (single-threaded wasm) and the model ``root.dataset.model`` from the
 * site's ``_static``, then call ``ready(ort, session, card)``.
 */
export function startable(root, s, intro, ready) {
  const start = element("button", { type: "button", class: "attention-widget-start", text: s.start });
  const status = element("p", { role: "status", "aria-live": "polite", class: "attention-widget-status" });
  root.append(
    element("p", { class: "attention-widget-title" }, element("strong", { text: s.title })),
    element("p", { text: intro }),
    start,
    status,
  );
  start.addEventListener(
    "click",
    async () => {
      start.disabled = true;
      status.textContent = s.loading;
      try {
        const base = new URL("../", import.meta.url); // _static/
        const ort = await import(new URL("ort/ort.wasm.min.mjs", base).href);
        ort.env.wasm.wasmPaths = new URL("ort/", base).href;
        ort.env.wasm.numThreads = 1; // no cross-origin isolation needed
        const name = root.dataset.model;
        const card = await (await fetch(new URL(`models/${name}.json`, base))).json();
        const session = await ort.InferenceSession.create(new URL(`models/${name}.onnx`, base).href);
        start.remove();
        await ready(ort, session, card);
      } catch (error) {
        start.disabled = false;
        status.textContent = s.failed + error.message;
      }
    },
    { once: true },
  );
  return status;
}

/** One sequence of token ids as the graph's input: an int64 tensor (1, L). */
/**
 * What every model widget starts as: its words in the page's language (COMMON's and ``own``),
 * ``root.attentionWidget`` (the site's browser tests read ``last`` from it) and the start button,
 * which calls the subclass's ``ready(ort, session, card)`` once the model has loaded.
 */
export class ModelWidget {
  constructor(root, own) {
    this.root = root;
    this.s = strings(own);
    this.last = null;
    root.attentionWidget = this;
    this.status = startable(root, this.s, this.s.intro, (ort, session, card) => this.ready(ort, session, card));
  }
}

export function idsTensor(ort, ids) {
  return new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]);
}

/** Run a model that reads token ids: its logits and weights (layers, H, L, L), flat. */
export async function run(ort, session, ids) {
  const out = await session.run({ tokens: idsTensor(ort, ids) });
  return { ids, logits: out.logits.data, weights: out.weights.data };
}

/** The head view: tokens in a row, a layer and a head to choose, bars for the weights. */
export class HeadView {
  constructor(s, card, status) {
    this.s = s;
    this.card = card;
    this.status = status;
    this.layer = element("select", {});
    this.head = element("select", {});
    for (let i = 0; i < card.layers; i++) this.layer.append(element("option", { value: i, text: `${i + 1}` }));
    for (let h = 0; h < card.heads; h++) this.head.append(element("option", { value: h, text: `${h + 1}` }));
    this.tokens = element("div", { class: "attention-widget-tokens", role: "group", "aria-label": s.attention });
    this.node = element(
      "div",
      {},
      element("div", { class: "attention-widget-row" }, field(s.layer, this.layer), field(s.head, this.head)),
      element("p", { text: s.attention }),
      this.tokens,
    );
    for (const control of [this.layer, this.head]) control.addEventListener("change", () => this.draw());
  }

  /** Show ``labels`` (one per position) with the weights of ``result``. */
  show(labels, result) {
    this.labels = labels;
    this.result = result;
    this.draw();
  }

  draw() {
    if (!this.result) return;
    this.tokens.replaceChildren(
      ...this.labels.map((label, i) => {
        const token = element(
          "span",
          { tabindex: "0", class: "attention-widget-token", "data-position": i, "aria-label": `${label} ${i}` },
          element("span", { text: label }),
          element("span", { class: "attention-widget-weight", "aria-hidden": "true" }),
        );
        token.addEventListener("focus", () => this.look(i));
        token.addEventListener("mouseenter", () => this.look(i));
        token.addEventListener("keydown", (event) => {
          const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
          if (step) {
            this.tokens.children[Math.min(Math.max(i + step, 0), this.labels.length - 1)].focus();
            event.preventDefault();
            event.stopPropagation(); // the arrows move along the text, not to another page
          }
        });
        return token;
      }),
    );
  }

  /** The weights of query ``i`` over the keys, in the chosen layer and head. */
  row(i) {
    const L = this.result.ids.length;
    const start = ((Number(this.layer.value) * this.card.heads + Number(this.head.value)) * L + i) * L;
    return this.result.weights.slice(start, start + L);
  }

  look(i) {
    const row = this.row(i);
    let best = 0;
    [...this.tokens.children].forEach((token, j) => {
      token.querySelector(".attention-widget-weight").style.height = `${(1.2 * row[j]).toFixed(2)}rem`;
      token.classList.toggle("attention-widget-query", j === i);
      if (row[j] > row[best]) best = j;
    });
    this.status.textContent = this.s.looks(this.labels[i], i, this.labels[best], best, row[best].toFixed(2));
  }
}
