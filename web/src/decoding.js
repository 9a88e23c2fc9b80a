// What the date widget computes outside the model, with no page around it (node's tests import
// it): the source's ids from the reader's text, the greedy choice of the next token, the
// characters written, and one layer's and head's cross-attention as rows of a grid.

/**
 * The source ids of ``text``: one per character of ``vocab`` (its index), at most ``maxLen``.
 * Characters outside ``vocab`` (and ``vocab[pad]``, which is no character) are left out and
 * listed, once each, in ``unknown``; then the spaces at either end, which no format writes;
 * ``cut`` says whether what is left was longer than ``maxLen``.
 */
export function encodeSource(text, vocab, maxLen, pad = 0) {
  const ids = new Map(vocab.map((char, i) => [char, i]));
  ids.delete(vocab[pad]);
  const chars = [...[...text].filter((char) => ids.has(char)).join("").trim()];
  const unknown = [...new Set([...text].filter((char) => !ids.has(char)))];
  const cut = chars.length > maxLen;
  const kept = chars.slice(0, maxLen);
  return { chars: kept, ids: kept.map((char) => ids.get(char)), unknown, cut };
}

/**
 * The greedy choice: the index of the largest of ``logits``, the first one on a tie (as
 * ``torch.argmax``), never ``exclude`` (the padding, which generation never writes).
 */
export function greedyNext(logits, exclude = null) {
  let best = -1;
  for (let i = 0; i < logits.length; i++) {
    if (i === exclude) continue;
    if (best < 0 || logits[i] > logits[best]) best = i;
  }
  if (best < 0) throw new Error("logits must hold a token other than the excluded one");
  return best;
}

/** The characters that target ``ids`` spell: BOS and padding dropped, stopped at EOS. */
export function decodeTarget(ids, vocab, eos) {
  const chars = [];
  for (const i of ids) {
    if (i === eos) break;
    if (i > eos) chars.push(vocab[i]);
  }
  return chars.join("");
}

/**
 * Rows of the cross-attention grid: ``weights`` holds (layers, H, T, S) numbers flat, row-major;
 * the result is T rows of S weights, those of ``layer`` and ``head``, or with ``head`` "mean"
 * the mean of the layer's heads (what the page draws for a layer).
 */
export function crossGrid(weights, { layers, heads, T, S }, layer, head) {
  if (weights.length !== layers * heads * T * S) {
    throw new Error(`weights must hold layers * H * T * S = ${layers * heads * T * S} numbers; got ${weights.length}`);
  }
  if (!(layer >= 0 && layer < layers)) throw new Error(`layer must be in [0, ${layers}); got ${layer}`);
  const chosen = head === "mean" ? [...Array(heads).keys()] : [head];
  if (!chosen.every((h) => h >= 0 && h < heads)) throw new Error(`head must be in [0, ${heads}) or "mean"; got ${head}`);
  const rows = [];
  for (let t = 0; t < T; t++) {
    const row = new Array(S).fill(0);
    for (const h of chosen) {
      const start = ((layer * heads + h) * T + t) * S; // (layers, H, T, S)
      for (let s = 0; s < S; s++) row[s] += weights[start + s] / chosen.length;
    }
    rows.push(row);
  }
  return rows;
}
