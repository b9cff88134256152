// Runs an ONNX model on onnxruntime-node (CPU, one thread) as the reference for npu:
//   node ort_run.js MODEL.onnx INPUT.npy OUTPUT.npy ITERATIONS
// Prints one JSON line: {"p50_ms":..., "mean_ms":..., "iterations":...}. Writes the first
// output as float32 .npy.
"use strict";
const fs = require("fs");
const ort = require("onnxruntime-node");

function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${path}: not a .npy file`);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + headerLen);
  if (!header.includes("'<f4'")) throw new Error(`${path}: expected float32`);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(",").filter((s) => s.trim()).map(Number);
  const start = 10 + headerLen;
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return { shape, data };
}

function writeNpy(path, data, shape) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(", ")}${shape.length === 1 ? "," : ""}), }`;
  const total = 10 + header.length + 1;
  header += " ".repeat((64 - (total % 64)) % 64) + "\n";
  const head = Buffer.alloc(10);
  head.write("\x93NUMPY", 0, "latin1");
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, "latin1"), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

async function main() {
  const [model, input, output, iterations] = process.argv.slice(2);
  const n = Number(iterations || 20);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: "sequential",
    // ORT_GRAPH_OPTIMIZATION=basic evaluates a QDQ model as written: onnxruntime's extended
    // QDQ fusions ignore a QuantizeLinear that saturates inside the data's range.
    graphOptimizationLevel: process.env.ORT_GRAPH_OPTIMIZATION || "all",
  });
  const x = readNpy(input);
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", x.data, x.shape) };
  let result = await session.run(feeds);  // warm-up
  const times = [];
  for (let i = 0; i < n; ++i) {
    const t0 = process.hrtime.bigint();
    result = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const out = result[session.outputNames[0]];
  writeNpy(output, out.data, out.dims);
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / n;
  console.log(JSON.stringify({ p50_ms: times[Math.floor(n / 2)], mean_ms: mean, iterations: n }));
}

module.exports = { readNpy, writeNpy };

if (require.main === module) {
  main().catch((e) => {
    console.error(`ort_run: ${e.message}`);
    process.exit(1);
  });
}
