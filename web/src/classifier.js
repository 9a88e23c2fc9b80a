// The sentiment classifier of the course, in the reader's browser: type a sentence in the
// task's words, see the prediction, and read every head of every layer (a head view: focus a
// word to see where its query looks).

import { element, field, HeadView, ModelWidget, run } from "./widget.js";

const OWN = {
  en: {
    intro: "The classifier this page trained runs in your browser: type a sentence in its words, see its prediction and where each head looks.",
    sentence: "Sentence",
    classify: "Classify",
    knows: (words) => `The words it knows: ${words}.`,
    unknown: (words) => `Words it does not know, left out: ${words}.`,
    cut: (n) => `Only the first ${n} words are read.`,
    prediction: (name, p) => `Prediction: ${name} (probability ${p}).`,
  },
  "zh-CN": {
    intro: "本页训练的分类器在你的浏览器中运行：用它认识的词输入一个句子，看它的预测，以及每个头在看哪里。",
    sentence: "句子",
    classify: "分类",
    knows: (words) => `它认识的词：${words}。`,
    unknown: (words) => `它不认识、已略去的词：${words}。`,
    cut: (n) => `只读入前 ${n} 个词。`,
    prediction: (name, p) => `预测：${name}（概率 ${p}）。`,
  },
};

export class ClassifierWidget extends ModelWidget {
  constructor(root) {
    super(root, OWN);
  }

  async ready(ort, session, card) {
    Object.assign(this, { ort, session, card });
    this.ids = new Map(card.vocab.map((word, i) => [word, i]));
    const s = this.s;
    this.sentence = element("input", { type: "text", size: "50", spellcheck: "false" });
    this.sentence.value = card.prompt;
    const classify = element("button", { type: "button", text: s.classify });
    this.prediction = element("output", { class: "attention-widget-prediction" });
    this.view = new HeadView(s, card, this.status);
    this.root.append(
      element("p", { text: s.knows(card.vocab.filter((word) => word !== card.pad).join(" ")) }),
      field(s.sentence, this.sentence),
      element("div", { class: "attention-widget-row" }, classify),
      element("p", {}, this.prediction),
      this.view.node,
    );
    classify.addEventListener("click", () => this.classify());
    this.sentence.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.classify();
    });
    await this.classify();
  }

  async classify() {
    const words = this.sentence.value.toLowerCase().split(/\s+/).filter(Boolean);
    const unknown = [...new Set(words.filter((word) => !this.ids.has(word) || word === this.card.pad))];
    let known = words.filter((word) => this.ids.has(word) && word !== this.card.pad);
    const notes = unknown.length ? [this.s.unknown(unknown.join(" "))] : [];
    if (known.length > this.card.max_len) {
      known = known.slice(0, this.card.max_len);
      notes.push(this.s.cut(this.card.max_len));
    }
    if (known.length === 0) {
      this.status.textContent = notes.join(" ");
      return;
    }
    this.last = await run(this.ort, this.session, known.map((word) => this.ids.get(word)));
    const logits = Array.from(this.last.logits);
    const max = Math.max(...logits);
    const e = logits.map((z) => Math.exp(z - max));
    const total = e.reduce((a, b) => a + b);
    const best = logits.indexOf(max);
    this.prediction.textContent = this.s.prediction(this.card.classes[best], (e[best] / total).toFixed(3));
    this.view.show(known, this.last);
    this.status.textContent = [this.prediction.textContent, ...notes].join(" ");
  }
}

for (const root of document.querySelectorAll('.attention-widget[data-widget="classifier"]')) {
  new ClassifierWidget(root);
}
