// onnxruntime-node (CPU, one thread) as a long-lived reference process for npu-bench model
// --compare-ort, so that the two runtimes can alternate rounds on the same model and inputs:
//   node ort_serve.js MODEL.onnx INPUT0.npy [INPUT1.npy ...]
// Reads commands on stdin, one per line, and answers each with one JSON line on stdout:
//   run N [OUTPUT.npy]  -> {"latency_ms":[...N values...]}  (writes the first output, float32)
//   quit                -> exits
// The first line it prints is {"ready":true,"inputs":[names]} once the session is created and
// warmed up; any error is {"error":"..."} and exit status 1.
"use strict";
const readline = require("readline");
const ort = require("onnxruntime-node");
const { readNpy, writeNpy } = require("./ort_run.js");

async function main() {
  const [model, ...inputs] = process.argv.slice(2);
  if (!model || inputs.length === 0) throw new Error("usage: ort_serve.js MODEL.onnx INPUT.npy...");
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: "sequential", graphOptimizationLevel: "all",
  });
  if (inputs.length !== session.inputNames.length)
    throw new Error(`${model} takes ${session.inputNames.length} input(s), got ${inputs.length}`);
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const x = readNpy(inputs[i]);
    feeds[name] = new ort.Tensor("float32", x.data, x.shape);
  });
  let result = await session.run(feeds);  // warm-up
  console.log(JSON.stringify({ ready: true, inputs: session.inputNames }));
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const [cmd, count, output] = line.trim().split(/\s+/);
    if (cmd === "quit") break;
    if (cmd !== "run") throw new Error(`unknown command '${line}'`);
    const n = Number(count);
    const times = [];
    for (let i = 0; i < n; ++i) {
      const t0 = process.hrtime.bigint();
      result = await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    if (output) {
      const out = result[session.outputNames[0]];
      writeNpy(output, Float32Array.from(out.data), out.dims);
    }
    console.log(JSON.stringify({ latency_ms: times }));
  }
}

main().catch((e) => {
  console.log(JSON.stringify({ error: e.message }));
  process.exit(1);
});
