import assert from "node:assert/strict";
import { test } from "node:test";

import { crossGrid, decodeTarget, encodeSource, greedyNext } from "../src/decoding.js";

// The date task's vocabularies (attention.dates.SOURCE_VOCAB and TARGET_VOCAB).
const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const SOURCE = ["<pad>", ..." ,-./0123456789", ...letters];
const TARGET = ["<pad>", "<bos>", "<eos>", "-", ..."0123456789"];

test("the source's ids are its characters' indices", () => {
  const { chars, ids, unknown, cut } = encodeSource("3 Mar 21", SOURCE, 32);
  assert.deepEqual(chars, [..."3 Mar 21"]);
  // attention.dates.encode_sources(["3 Mar 21"])[0].tolist()
  assert.deepEqual(ids, [9, 1, 54, 16, 33, 1, 8, 7]);
  assert.deepEqual(unknown, []);
  assert.equal(cut, false);
});

test("unknown characters are left out and named once; the pad token is no character", () => {
  const { chars, unknown } = encodeSource("3 März! 2021 <pad>!", SOURCE, 32);
  assert.equal(chars.join(""), "3 Mrz 2021 pad");
  assert.deepEqual(unknown, ["ä", "!", "<", ">"]);
});

test("the spaces at either end are dropped, also those that a left-out character leaves", () => {
  assert.deepEqual(encodeSource("  Wed 03/03/2021 ♥ ", SOURCE, 32).chars.join(""), "Wed 03/03/2021");
  assert.deepEqual(encodeSource(" ♥ ", SOURCE, 32).ids, []);
});

test("a source longer than max_len is cut to its first max_len characters", () => {
  const { chars, cut } = encodeSource("Wednesday, March 3, 2021", SOURCE, 9);
  assert.equal(chars.join(""), "Wednesday");
  assert.equal(cut, true);
});

test("the greedy choice is the first largest logit, never the excluded token", () => {
  assert.equal(greedyNext([0.1, 2, 0.5, 2]), 1); // the first of a tie, as torch.argmax
  assert.equal(greedyNext([9, 2, 0.5], 0), 1); // the padding never written
  assert.equal(greedyNext(Float32Array.from([-3, -1, -2])), 1);
  assert.throws(() => greedyNext([1], 0), /a token other than the excluded one/);
});

test("the target's characters: BOS and padding dropped, stopped at EOS", () => {
  // attention.dates.decode_target([1, 6, 4, 6, 5, 3, 4, 7, 3, 4, 7, 2, 0])
  assert.equal(decodeTarget([1, 6, 4, 6, 5, 3, 4, 7, 3, 4, 7, 2, 0], TARGET, 2), "2021-03-03");
  assert.equal(decodeTarget([1, 6, 4], TARGET, 2), "20"); // no EOS yet
});

test("a grid row is one layer's and head's weights of one output over the source", () => {
  const shape = { layers: 2, heads: 3, T: 2, S: 4 };
  const weights = Array.from({ length: 2 * 3 * 2 * 4 }, (_, i) => i); // (layers, H, T, S)
  const grid = crossGrid(weights, shape, 1, 2);
  assert.deepEqual(grid, [
    [40, 41, 42, 43],
    [44, 45, 46, 47],
  ]);
  const mean = crossGrid(weights, shape, 0, "mean"); // heads 0, 1, 2 of layer 0: rows 0, 8, 16 on
  assert.deepEqual(mean[1], [12, 13, 14, 15]);
  assert.throws(() => crossGrid(weights.slice(1), shape, 0, 0), /must hold layers \* H \* T \* S = 48/);
  assert.throws(() => crossGrid(weights, shape, 2, 0), /layer must be in \[0, 2\)/);
  assert.throws(() => crossGrid(weights, shape, 0, 3), /head must be in \[0, 3\) or "mean"/);
});
