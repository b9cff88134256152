'use strict';
// run() never blocks the event loop: 64 runs in flight while a timer ticks; dispose while
// requests are in flight settles each exactly once; a Worker terminated mid-run; a process
// whose work is done exits by itself (no thread-safe function keeps it alive).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const {spawnSync} = require('node:child_process');
const {Worker} = require('node:worker_threads');
const {DATA, readNpy, randomFloats, loadOrt} = require('./helpers');

const {ort, reason} = loadOrt();
if (reason) console.log(`skipped: ${reason}`);
if (ort) require('onnxruntime-npu');
const opt = {skip: reason || false};
const MOBILENET = path.join(DATA, 'mobilenet_v3ish.onnx');

function mobilenetFeeds() {
  const x = readNpy(path.join(DATA, 'mobilenet_input.npy'));
  return {input: new ort.Tensor('float32', x.data, x.shape)};
}

test('64 concurrent runs while a timer keeps ticking', opt, async () => {
  const s = await ort.InferenceSession.create(MOBILENET, {executionProviders: ['npu']});
  const feeds = mobilenetFeeds();
  const first = await s.run(feeds);
  let ticks = 0;
  let maxGap = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
    ++ticks;
  }, 5);
  const t0 = performance.now();
  let settled = 0;
  const runs = Array.from({length: 64}, () => s.run(feeds).then((r) => (++settled, r)));
  // Submitting 64 runs returns at once: none has settled yet.
  const submitMs = performance.now() - t0;
  assert.equal(settled, 0);
  const results = await Promise.all(runs);
  const totalMs = performance.now() - t0;
  clearInterval(timer);
  console.log(`64 runs: submit ${submitMs.toFixed(1)} ms, all settled in ${totalMs.toFixed(1)} ms, ` +
              `${ticks} timer ticks (5 ms), largest gap ${maxGap.toFixed(1)} ms`);
  for (const r of results) assert.deepEqual(Array.from(r.logits.data), Array.from(first.logits.data));
  assert.ok(ticks >= Math.floor(totalMs / 5 / 4), `only ${ticks} ticks in ${totalMs.toFixed(0)} ms`);
  assert.ok(maxGap < 250, `event loop blocked for ${maxGap.toFixed(0)} ms`);
  await s.release();
});

test('dispose while requests are in flight: each settles exactly once, later calls reject', opt, async () => {
  const s = await ort.InferenceSession.create(MOBILENET, {executionProviders: ['npu']});
  const feeds = mobilenetFeeds();
  const outcomes = new Array(16).fill(0);
  const runs = outcomes.map((_, i) => s.run(feeds).then(
      (r) => { ++outcomes[i]; return r; },
      (e) => { ++outcomes[i]; return e; }));
  await s.release();  // returns without waiting for the device
  const results = await Promise.all(runs);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(outcomes, new Array(16).fill(1));
  for (const r of results) assert.ok(r instanceof Error || r.logits instanceof ort.Tensor);
  await assert.rejects(s.run(feeds), /disposed session/);
});

test('a Worker terminated mid-run; another Worker runs on its own state', opt, async () => {
  const code = `
    const {parentPort, workerData} = require('node:worker_threads');
    // onnxruntime-common, not onnxruntime-node: the latter's addon aborts the process when its
    // Worker is terminated while it loads (std::terminate from Napi::Error::ThrowAsJavaScriptException
    // in its napi_register_module_v1; seen under gdb).
    const ort = require('onnxruntime-common');
    require('onnxruntime-npu');
    (async () => {
      const s = await ort.InferenceSession.create(workerData.model, {executionProviders: ['npu']});
      const x = new ort.Tensor('float32', new Float32Array(3 * 128 * 128).fill(0.5), [1, 3, 128, 128]);
      const first = await s.run({input: x});
      parentPort.postMessage({kind: 'first', n: first.logits.data.length});
      for (let i = 0; i < 8; ++i) s.run({input: x});  // in flight when terminated
      parentPort.postMessage({kind: 'busy'});
      await new Promise(() => {});
    })().catch((e) => parentPort.postMessage({kind: 'error', message: e.message}));`;
  const spawn = () => new Worker(code, {eval: true, workerData: {model: MOBILENET}});
  const w = spawn();
  const seen = [];
  await new Promise((resolve, reject) => {
    w.on('message', (m) => {
      seen.push(m.kind);
      if (m.kind === 'error') reject(new Error(m.message));
      if (m.kind === 'busy') resolve();
    });
    w.on('error', reject);
  });
  const exitCode = await w.terminate();
  assert.equal(exitCode, 1);
  assert.deepEqual(seen, ['first', 'busy']);
  // Two more at once, each with its own addon state, and the main thread's session still works.
  const both = [spawn(), spawn()].map((wk) => new Promise((resolve, reject) => {
    wk.on('message', (m) => {
      if (m.kind === 'error') reject(new Error(m.message));
      if (m.kind === 'busy') wk.terminate().then(resolve);
    });
    wk.on('error', reject);
  }));
  await Promise.all(both);
  const s = await ort.InferenceSession.create(path.join(DATA, 'mlp.onnx'), {executionProviders: ['npu']});
  const r = await s.run({x: new ort.Tensor('float32', randomFloats(256), [4, 64])});
  assert.equal(r.logits.data.length > 0, true);
  await s.release();
});

test('30 Workers terminated at spread-out points (creating, submitting, settling)', opt, async () => {
  const code = `
    const {workerData} = require('node:worker_threads');
    // onnxruntime-common, not onnxruntime-node: the latter's addon aborts the process when its
    // Worker is terminated while it loads (std::terminate from Napi::Error::ThrowAsJavaScriptException
    // in its napi_register_module_v1; seen under gdb).
    const ort = require('onnxruntime-common');
    require('onnxruntime-npu');
    (async () => {
      const s = await ort.InferenceSession.create(workerData, {executionProviders: ['npu']});
      const x = new ort.Tensor('float32', new Float32Array(256).fill(0.5), [4, 64]);
      for (;;) await Promise.all(Array.from({length: 8}, () => s.run({x})));
    })();`;
  for (let i = 0; i < 30; ++i) {
    const w = new Worker(code, {eval: true, workerData: path.join(DATA, 'mlp.onnx')});
    await new Promise((r) => setTimeout(r, (i * 37) % 150));
    const exitCode = await w.terminate();  // 0 when terminated before it started
    assert.ok(exitCode === 0 || exitCode === 1, `exit code ${exitCode}`);
  }
});

test('a process exits by itself when its runs are done (and waits for them)', opt, () => {
  const script = `
    const ort = require('onnxruntime-node');
    require('onnxruntime-npu');
    ort.InferenceSession.create(${JSON.stringify(path.join(DATA, 'mlp.onnx'))}, {executionProviders: ['npu']})
      .then((s) => s.run({x: new ort.Tensor('float32', new Float32Array(256).fill(0.25), [4, 64])}))
      .then((r) => console.log('done', r.logits.data.length));`;
  const r = spawnSync(process.execPath, ['-e', script], {encoding: 'utf8', timeout: 60000, env: process.env});
  assert.equal(r.error, undefined, 'did not exit by itself within 60 s');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^done \d+/);
});
