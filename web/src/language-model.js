// The character-level language model of the course, in the reader's browser: type a prompt,
// see the next character's distribution, sample a continuation with temperature, top-k and
// top-p, and see where every head of every layer looks.

import { draw, samplingDistribution } from "./sampling.js";
import { element, field, HeadView, ModelWidget, run } from "./widget.js";

const OWN = {
  en: {
    intro: "The model this page trained runs in your browser: type a prompt, see what it predicts next and where each head looks.",
    prompt: "Prompt",
    predict: "Predict",
    next: "Most likely next characters",
    temperature: "Temperature",
    topK: "Top-k (0: all)",
    topP: "Top-p",
    sample: "Sample 40 characters",
    sampled: "Continuation",
    unknown: (chars) => `Not in the model's vocabulary, read as \ufffd: ${chars}`,
    cut: (n) => `Only the last ${n} characters are read (the model's context).`,
    ready: (n) => `Read ${n} characters.`,
  },
  "zh-CN": {
    intro: "本页训练的模型在你的浏览器中运行：输入提示，看它预测的下一个字符，以及每个头在看哪里。",
    prompt: "提示",
    predict: "预测",
    next: "最可能的下一个字符",
    temperature: "温度",
    topK: "Top-k（0 表示全部）",
    topP: "Top-p",
    sample: "采样 40 个字符",
    sampled: "续写",
    unknown: (chars) => `不在模型词表中、按 \ufffd 读入的字符：${chars}`,
    cut: (n) => `只读入最后 ${n} 个字符（模型的上下文）。`,
    ready: (n) => `已读入 ${n} 个字符。`,
  },
};

/** A character as the reader sees it: the invisible ones named. */
function shown(char) {
  return { "\n": "↵", " ": "␣", "\t": "⇥" }[char] ?? char;
}

export class LanguageModelWidget extends ModelWidget {
  constructor(root) {
    super(root, OWN);
  }

  async ready(ort, session, card) {
    Object.assign(this, { ort, session, card });
    this.ids = new Map(card.vocab.map((char, i) => [char, i]));
    const s = this.s;
    this.prompt = element("textarea", { rows: "3", cols: "60", spellcheck: "false" });
    this.prompt.value = card.prompt;
    const predict = element("button", { type: "button", text: s.predict });
    this.temperature = element("input", { type: "number", min: "0.05", max: "5", step: "0.05", value: "1" });
    this.topK = element("input", { type: "number", min: "0", step: "1", value: "0" });
    this.topP = element("input", { type: "number", min: "0.05", max: "1", step: "0.05", value: "1" });
    const sample = element("button", { type: "button", text: s.sample });
    this.bars = element("ol", { class: "attention-widget-bars", "aria-label": s.next });
    this.sampled = element("output", { class: "attention-widget-sampled", "aria-label": s.sampled });
    this.view = new HeadView(s, card, this.status);
    this.root.append(
      field(s.prompt, this.prompt),
      element("div", { class: "attention-widget-row" }, predict),
      element("p", { text: s.next }),
      this.bars,
      element(
        "div",
        { class: "attention-widget-row" },
        field(s.temperature, this.temperature),
        field(s.topK, this.topK),
        field(s.topP, this.topP),
        sample,
      ),
      element("p", {}, `${s.sampled}: `, this.sampled),
      this.view.node,
    );
    predict.addEventListener("click", () => this.predict());
    sample.addEventListener("click", () => this.sample(40));
    for (const control of [this.temperature, this.topK, this.topP]) {
      control.addEventListener("change", () => this.drawBars());
    }
    await this.predict();
  }

  /** The ids of ``text``: its last max_len characters, unknown ones as id 0. */
  encode(text) {
    const notes = [];
    const unknown = [...new Set([...text].filter((char) => !this.ids.has(char)))];
    if (unknown.length) notes.push(this.s.unknown(unknown.map(shown).join(" ")));
    let chars = [...text];
    if (chars.length > this.card.max_len) {
      chars = chars.slice(-this.card.max_len);
      notes.push(this.s.cut(this.card.max_len));
    }
    if (chars.length === 0) chars = [this.card.vocab[0]];
    return { chars, ids: chars.map((char) => this.ids.get(char) ?? 0), notes };
  }

  options() {
    const k = Number.parseInt(this.topK.value, 10);
    const p = Number.parseFloat(this.topP.value);
    return {
      temperature: Math.max(Number.parseFloat(this.temperature.value) || 1, 1e-6),
      topK: k > 0 ? k : null,
      topP: p > 0 && p < 1 ? p : null,
    };
  }

  lastLogits(result) {
    const V = this.card.vocab.length;
    const L = result.ids.length;
    return result.logits.slice((L - 1) * V, L * V);
  }

  async predict() {
    const { chars, ids, notes } = this.encode(this.prompt.value);
    this.last = await run(this.ort, this.session, ids);
    this.drawBars();
    this.view.show(chars.map(shown), this.last);
    this.status.textContent = [this.s.ready(ids.length), ...notes].join(" ");
  }

  drawBars() {
    if (!this.last) return;
    const p = samplingDistribution(this.lastLogits(this.last), this.options());
    const top = Array.from(p.keys())
      .sort((a, b) => p[b] - p[a])
      .slice(0, 10)
      .filter((i) => p[i] > 0);
    this.bars.replaceChildren(
      ...top.map((i) => {
        const bar = element("span", { class: "attention-widget-bar", "aria-hidden": "true" });
        bar.style.width = `${(100 * p[i]).toFixed(1)}%`;
        return element("li", {}, element("code", { text: shown(this.card.vocab[i]) }), ` ${p[i].toFixed(3)} `, bar);
      }),
    );
  }

  async sample(n) {
    let text = this.prompt.value;
    let generated = "";
    for (let step = 0; step < n; step++) {
      const result = await run(this.ort, this.session, this.encode(text).ids);
      const i = draw(samplingDistribution(this.lastLogits(result), this.options()), Math.random());
      generated += this.card.vocab[i];
      text += this.card.vocab[i];
    }
    this.sampled.textContent = generated;
  }
}

for (const root of document.querySelectorAll('.attention-widget[data-widget="language-model"]')) {
  new LanguageModelWidget(root);
}
