// The distribution the next token is drawn from: temperature, then top-k, then top-p.
// The same rule as attention.sampling_distribution (attention/language_model.py), in the
// float64 of JavaScript's numbers; the site's browser tests hold the two to 1e-6.

/**
 * @param {ArrayLike<number>} logits the scores of each next token (V of them)
 * @param {{temperature?: number, topK?: number|null, topP?: number|null}} options
 * @returns {Float64Array} V probabilities summing to 1, 0 for the tokens not kept
 */
export function samplingDistribution(logits, { temperature = 1, topK = null, topP = null } = {}) {
  const V = logits.length;
  if (V === 0) throw new RangeError("logits must hold at least one token");
  if (!(temperature > 0)) throw new RangeError(`temperature must be above 0; got ${temperature}`);
  if (topK !== null && !(Number.isInteger(topK) && topK >= 1)) {
    throw new RangeError(`topK must be an integer of at least 1; got ${topK}`);
  }
  if (topP !== null && !(topP > 0 && topP <= 1)) {
    throw new RangeError(`topP must be in (0, 1]; got ${topP}`);
  }
  // From the largest logit down, so that a tiny temperature gives the greedy choice, not 0 / 0.
  let max = -Infinity;
  for (const z of logits) max = Math.max(max, z);
  const p = new Float64Array(V);
  let sum = 0;
  for (let i = 0; i < V; i++) {
    p[i] = Math.exp((logits[i] - max) / temperature);
    sum += p[i];
  }
  for (let i = 0; i < V; i++) p[i] /= sum;
  const keep = new Array(V).fill(true);
  if (topK !== null && topK < V) {
    const kth = Array.from(p).sort((a, b) => b - a)[topK - 1];
    for (let i = 0; i < V; i++) keep[i] = p[i] >= kth;
  }
  if (topP !== null && topP < 1) {
    const order = Array.from(p.keys()).sort((a, b) => p[b] - p[a]);
    let total = 0;
    for (let i = 0; i < V; i++) if (keep[i]) total += p[i];
    let before = 0; // the kept probability of the more likely tokens
    const nucleus = new Array(V).fill(false);
    for (const i of order) {
      const kept = keep[i] ? p[i] : 0;
      nucleus[i] = before < topP * total; // the most likely token is always kept
      before += kept;
    }
    for (let i = 0; i < V; i++) keep[i] = keep[i] && nucleus[i];
  }
  let kept = 0;
  for (let i = 0; i < V; i++) {
    if (!keep[i]) p[i] = 0;
    kept += p[i];
  }
  for (let i = 0; i < V; i++) p[i] /= kept;
  return p;
}

/**
 * Draw one index from the probabilities p, with a uniform number u in [0, 1).
 * @param {ArrayLike<number>} p
 * @param {number} u
 */
export function draw(p, u) {
  let cumulative = 0;
  let last = 0;
  for (let i = 0; i < p.length; i++) {
    if (p[i] > 0) last = i;
    cumulative += p[i];
    if (u < cumulative) return i;
  }
  return last; // rounding left the sum just below 1
}
