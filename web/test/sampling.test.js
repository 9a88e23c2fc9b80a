import assert from "node:assert/strict";
import { test } from "node:test";

import { draw, samplingDistribution } from "../src/sampling.js";

const close = (got, expected, tol = 1e-12) =>
  got.forEach((x, i) => assert.ok(Math.abs(x - expected[i]) <= tol, `${i}: ${x} vs ${expected[i]}`));

test("temperature 1 is the softmax", () => {
  const p = samplingDistribution([2, 1, 0, -1]);
  const e = [2, 1, 0, -1].map(Math.exp);
  const s = e.reduce((a, b) => a + b);
  close(p, e.map((x) => x / s));
});

test("top-p keeps the fewest likely tokens reaching p, renormalised", () => {
  // the docstring's example of attention.sampling_distribution: the two most likely hold 0.88
  close(samplingDistribution([2, 1, 0, -1], { topP: 0.8 }), [0.7310585786300049, 0.2689414213699951, 0, 0]);
  close(samplingDistribution([2, 1, 0, -1], { topP: 1 }), samplingDistribution([2, 1, 0, -1]));
});

test("top-k keeps k tokens, and ties with the k-th", () => {
  const p = samplingDistribution([3, 1, 1, 0], { topK: 2 });
  assert.deepEqual(Array.from(p, (x) => x > 0), [true, true, true, false]);
  assert.ok(Math.abs(p.reduce((a, b) => a + b) - 1) < 1e-15);
});

test("a tiny temperature is the greedy choice, never NaN", () => {
  assert.deepEqual(Array.from(samplingDistribution([0.5, 2, 1], { temperature: 1e-300 })), [0, 1, 0]);
});

test("bad settings are refused by name", () => {
  assert.throws(() => samplingDistribution([1], { temperature: 0 }), /temperature must be above 0/);
  assert.throws(() => samplingDistribution([1], { topK: 0 }), /topK must be an integer/);
  assert.throws(() => samplingDistribution([1], { topP: 1.5 }), /topP must be in \(0, 1\]/);
  assert.throws(() => samplingDistribution([]), /at least one token/);
});

test("draw picks by cumulative probability and never a token of probability 0", () => {
  const p = [0.25, 0, 0.75];
  assert.equal(draw(p, 0), 0);
  assert.equal(draw(p, 0.3), 2);
  assert.equal(draw(p, 0.9999999999), 2);
  assert.equal(draw([0.5, 0.5 - 1e-17, 0], 1 - 1e-18), 1);
});
