'use strict';
// Shared by the node tests: the data directory, .npy reading, SQNR, and the onnxruntime-node
// reference (skipped with its reason when scripts/install-deps has not installed it).
const path = require('node:path');

const DATA = process.env.NPU_TEST_DATA || path.join(__dirname, '..', '..', '..', 'tests', 'data');

// scripts/ort/ort_run.js reads the .npy inputs of the onnxruntime-node reference runs too (it
// requires onnxruntime-node, hence loaded on first use, after loadOrt() said it is there).
function readNpy(file) {
  return require(path.join(__dirname, '..', '..', '..', 'scripts', 'ort', 'ort_run.js')).readNpy(file);
}

// Signal-to-quantisation-noise ratio of `test` against `ref`, in dB.
function sqnr(ref, test) {
  if (ref.length !== test.length) throw new Error(`length ${test.length} != ${ref.length}`);
  let s = 0;
  let n = 0;
  for (let i = 0; i < ref.length; ++i) {
    s += ref[i] * ref[i];
    n += (ref[i] - test[i]) * (ref[i] - test[i]);
  }
  return n === 0 ? Infinity : 10 * Math.log10(s / n);
}

// Deterministic pseudo-random float32 data in [-1, 1).
function randomFloats(count, seed = 1) {
  const out = new Float32Array(count);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < count; ++i) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out[i] = (x / 4294967296) * 2 - 1;
  }
  return out;
}

function loadOrt() {
  try {
    return {ort: require('onnxruntime-node'), reason: null};
  } catch (e) {
    return {ort: null, reason: `onnxruntime-node not installed (scripts/install-deps): ${e.message}`};
  }
}

module.exports = {DATA, readNpy, sqnr, randomFloats, loadOrt};
