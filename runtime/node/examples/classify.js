'use strict';
// An onnxruntime-node program that runs on the NPU: the only changes from a CPU program are
// require('onnxruntime-npu') and executionProviders: ['npu'].
//   NODE_PATH=build/node:scripts/ort/node_modules node runtime/node/examples/classify.js \
//       tests/data/mobilenet_v3ish.onnx
const ort = require('onnxruntime-node');
require('onnxruntime-npu');  // registers the 'npu' backend with onnxruntime-common

async function main() {
  const model = process.argv[2] || 'tests/data/mobilenet_v3ish.onnx';
  const session = await ort.InferenceSession.create(model, {executionProviders: ['npu', 'cpu']});
  const [name] = session.inputNames;
  const {shape} = session.inputMetadata[0];
  const size = shape.reduce((a, b) => a * b, 1);
  const pixels = Float32Array.from({length: size}, (_, i) => Math.sin(i) * 0.5);
  const {[session.outputNames[0]]: logits} = await session.run({[name]: new ort.Tensor('float32', pixels, shape)});
  let best = 0;
  for (let i = 1; i < logits.data.length; ++i) if (logits.data[i] > logits.data[best]) best = i;
  console.log(`${model}: ${logits.dims.join('x')} logits, class ${best} (${logits.data[best].toFixed(3)})`);
  await session.release();
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
