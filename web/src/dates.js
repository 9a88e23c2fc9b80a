// The date encoder-decoder of the course, in the reader's browser: write a date in one of the
// task's formats, and the model writes it in ISO 8601 one character at a time (greedy decoding:
// the graph runs once per character, on the source and the target so far); the grid shows the
// cross-attention of the chosen layer and head, a row per character written and a column per
// character read, as the page draws it.

import { crossGrid, decodeTarget, encodeSource, greedyNext } from "./decoding.js";
import { element, field, idsTensor, ModelWidget } from "./widget.js";

const OWN = {
  en: {
    intro: "The encoder-decoder this page trained runs in your browser: write a date, and it writes the day in ISO 8601, one character at a time, always the most likely one (greedy decoding). The grid shows where each character it wrote looked in your date.",
    formats: (first, last) => `It knows the days from ${first} to ${last}, written in these ten formats (3 March 2021 in each):`,
    date: "Date",
    translate: "Write in ISO 8601",
    answer: (text) => `Answer: ${text}.`,
    noEnd: (n) => `It wrote ${n} characters without ending.`,
    unknown: (chars) => `Characters it does not know, left out: ${chars}.`,
    cut: (n) => `Only the first ${n} characters are read.`,
    empty: "No character it knows: write a date in one of the formats above.",
    mean: "mean of the heads",
    grid: "Cross-attention: a row for each character written, a column for each character of your date; focus or hover a row (arrow keys move up and down)",
    caption: (layer, head) => `Cross-attention of layer ${layer}, ${head}`,
    headName: (h) => `head ${h}`,
    reads: (c, i, d, j, w) => `“${c}”, written at position ${i}, looks most at “${d}”, source position ${j}, weight ${w}.`,
  },
  "zh-CN": {
    intro: "本页训练的编码器-解码器在你的浏览器中运行：写一个日期，它就按 ISO 8601 写出这一天，一次一个字符，每次取最可能的字符（贪心解码）。网格显示它写下的每个字符在你的日期中看向哪里。",
    formats: (first, last) => `它认识从 ${first} 到 ${last} 的日子，写成下面十种格式（每种都写 2021 年 3 月 3 日）：`,
    date: "日期",
    translate: "写成 ISO 8601",
    answer: (text) => `答案：${text}。`,
    noEnd: (n) => `它写了 ${n} 个字符，没有结束。`,
    unknown: (chars) => `它不认识、已略去的字符：${chars}。`,
    cut: (n) => `只读入前 ${n} 个字符。`,
    empty: "没有它认识的字符：请用上面的一种格式写日期。",
    mean: "各头的平均",
    grid: "交叉注意力：每行是写下的一个字符，每列是你的日期中的一个字符；聚焦或悬停在一行上（方向键可上下移动）",
    caption: (layer, head) => `第 ${layer} 层的交叉注意力，${head}`,
    headName: (h) => `头 ${h}`,
    reads: (c, i, d, j, w) => `写在位置 ${i} 的“${c}”最多看向“${d}”（源位置 ${j}），权重 ${w}。`,
  },
};

/** A character as the grid labels it: a space shown as ␣. */
function shown(char) {
  return char === " " ? "␣" : char;
}

export class DatesWidget extends ModelWidget {
  constructor(root) {
    super(root, OWN);
  }

  async ready(ort, session, card) {
    Object.assign(this, { ort, session, card });
    const s = this.s;
    this.date = element("input", { type: "text", size: "32", spellcheck: "false", class: "attention-widget-date" });
    this.date.value = card.prompt;
    this.translateButton = element("button", { type: "button", text: s.translate });
    this.answer = element("output", { class: "attention-widget-prediction" });
    this.layer = element("select", {});
    this.head = element("select", {});
    for (let i = 0; i < card.layers; i++) this.layer.append(element("option", { value: i, text: `${i + 1}` }));
    this.layer.value = `${card.layers - 1}`; // the last layer, which the page reads most
    for (let h = 0; h < card.heads; h++) this.head.append(element("option", { value: h, text: `${h}` })); // from 0, as the page
    this.head.append(element("option", { value: "mean", text: s.mean }));
    this.grid = element("div", { class: "attention-widget-grid" });
    this.root.append(
      element("p", { text: s.formats(card.first_day, card.last_day) }),
      element(
        "ul",
        { class: "attention-widget-formats" },
        ...card.formats.map(([, example]) => element("li", {}, element("code", { text: example }))),
      ),
      field(s.date, this.date),
      element("div", { class: "attention-widget-row" }, this.translateButton),
      element("p", {}, this.answer),
      element("div", { class: "attention-widget-row" }, field(s.layer, this.layer), field(s.head, this.head)),
      element("p", { text: s.grid }),
      this.grid,
    );
    this.translateButton.addEventListener("click", () => this.translate());
    this.date.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.translate();
    });
    for (const control of [this.layer, this.head]) control.addEventListener("change", () => this.draw());
    await this.translate();
  }

  /** Write the date in ISO 8601 greedily: run the graph on the source and the target so far
   * until it writes <eos> or max_new_tokens tokens. */
  async translate() {
    if (this.busy) return;
    const { card, s } = this;
    const { chars, ids, unknown, cut } = encodeSource(this.date.value, card.src_vocab, card.max_len, card.pad);
    const notes = [...(unknown.length ? [s.unknown(unknown.map(shown).join(" "))] : []), ...(cut ? [s.cut(card.max_len)] : [])];
    if (ids.length === 0) {
      this.status.textContent = [s.empty, ...notes].join(" ");
      return;
    }
    this.busy = true;
    this.translateButton.disabled = true;
    try {
      const V = card.tgt_vocab.length;
      const tgt = [card.bos];
      const steps = [];
      let out;
      while (tgt.length <= card.max_new_tokens && tgt.at(-1) !== card.eos) {
        out = await this.session.run({ src: idsTensor(this.ort, ids), tgt: idsTensor(this.ort, tgt) });
        const next = out.logits.data.slice((tgt.length - 1) * V, tgt.length * V); // the newest position's
        steps.push(...next);
        tgt.push(greedyNext(next, card.pad === card.eos ? null : card.pad));
      }
      // The last run read every token but the last written: its cross-attention has a row for
      // each character written, <eos> included.
      this.last = { src: ids, tgt, logits: steps, cross: out.cross.data };
      this.chars = chars;
      const text = decodeTarget(tgt, card.tgt_vocab, card.eos);
      this.answer.textContent = s.answer(text);
      if (tgt.at(-1) !== card.eos) notes.push(s.noEnd(tgt.length - 1));
      this.draw();
      this.status.textContent = [this.answer.textContent, ...notes].join(" ");
    } finally {
      this.busy = false;
      this.translateButton.disabled = false;
    }
  }

  /** The alignment grid of the chosen layer and head. */
  draw() {
    if (!this.last) return;
    const { card, s } = this;
    const head = this.head.value === "mean" ? "mean" : Number(this.head.value);
    const T = this.last.tgt.length - 1;
    const S = this.last.src.length;
    this.rows = crossGrid(this.last.cross, { layers: card.layers, heads: card.heads, T, S }, Number(this.layer.value), head);
    this.written = this.last.tgt.slice(1).map((i) => card.tgt_vocab[i]);
    const headName = head === "mean" ? s.mean : s.headName(head);
    const table = element(
      "table",
      {},
      element("caption", { text: s.caption(Number(this.layer.value) + 1, headName) }),
      element(
        "thead",
        {},
        element("tr", {}, element("td", {}), ...this.chars.map((char) => element("th", { scope: "col", text: shown(char) }))),
      ),
      element(
        "tbody",
        {},
        ...this.rows.map((row, t) => {
          const label = element("th", {
            scope: "row",
            tabindex: "0",
            class: "attention-widget-written",
            "data-position": t,
            text: this.written[t],
          });
          label.addEventListener("focus", () => this.look(t));
          label.addEventListener("keydown", (event) => {
            const step = { ArrowDown: 1, ArrowUp: -1 }[event.key];
            if (step) {
              this.grid.querySelectorAll(".attention-widget-written")[Math.min(Math.max(t + step, 0), T - 1)].focus();
              event.preventDefault();
            }
          });
          const tr = element(
            "tr",
            {},
            label,
            ...row.map((w) => {
              const cell = element("span", { class: "attention-widget-cell-weight" });
              cell.style.opacity = w.toFixed(3);
              return element("td", { title: w.toFixed(2) }, cell);
            }),
          );
          tr.addEventListener("mouseenter", () => this.look(t));
          return tr;
        }),
      ),
    );
    this.grid.replaceChildren(table);
  }

  /** Announce where written character ``t`` looks most in the chosen layer and head. */
  look(t) {
    const row = this.rows[t];
    const best = row.indexOf(Math.max(...row));
    this.grid.querySelectorAll("tbody tr").forEach((tr, i) => tr.classList.toggle("attention-widget-query", i === t));
    this.status.textContent = this.s.reads(this.written[t], t, shown(this.chars[best]), best, row[best].toFixed(2));
  }
}

for (const root of document.querySelectorAll('.attention-widget[data-widget="dates"]')) {
  new DatesWidget(root);
}
