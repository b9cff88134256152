'use strict';
// onnxruntime-npu: the onnxruntime-common Backend 'npu'.
//
//   const ort = require('onnxruntime-node');   // or any onnxruntime-common front end
//   require('onnxruntime-npu');                // registers 'npu'
//   const session = await ort.InferenceSession.create('model.onnx', {executionProviders: ['npu']});
//
// onnxruntime-common is a peer dependency: this file requires the application's single copy
// (two copies would break registerBackend and `instanceof Tensor`). Models are ONNX (compiled
// on the fly for the device) or model images, as a path or bytes. The execution provider
// {name: 'npu', device: 'rtl'} selects the device ('sim' by default, or $NPU_DEVICE), and
// {name: 'npu', calibration: [sample, ...]} calibrates an ONNX model on those samples.
const fs = require('node:fs');
const path = require('node:path');

// The application's copy first (the main module's resolution paths), then ours.
function loadCommon() {
  const paths = [];
  if (require.main && require.main.paths) paths.push(...require.main.paths);
  paths.push(process.cwd());
  try {
    return require(require.resolve('onnxruntime-common', {paths}));
  } catch {
    return require('onnxruntime-common');
  }
}
const ort = loadCommon();
const {Tensor, registerBackend} = ort;

const native = require(process.env.NPU_NODE_ADDON || path.join(__dirname, 'npu_node.node'));

const DTYPE_NAME = Object.fromEntries(Object.entries(native.dtypes).map(([k, v]) => [v, k]));
const ARRAY_TYPE = {
  float32: Float32Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int32: Int32Array,
  int64: BigInt64Array,
};

function npuOptions(options) {
  const eps = (options && options.executionProviders) || [];
  for (const ep of eps) {
    if (ep === 'npu') return {};
    if (ep && typeof ep === 'object' && ep.name === 'npu') return ep;
  }
  return {};
}

function profileFileName(prefix) {
  // onnxruntime's convention: <prefix>_<YYYY-MM-DD_HH-MM-SS>.json
  const d = new Date();
  const p = (n) => String(n).padStart(2, '0');
  const stamp = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}_` +
      `${p(d.getHours())}-${p(d.getMinutes())}-${p(d.getSeconds())}`;
  return `${prefix}_${stamp}.json`;
}

class NpuSessionHandler {
  constructor(session, options) {
    this._session = session;
    this._inputs = session.inputs();
    this._outputs = session.outputs();
    this.inputNames = this._inputs.map((d) => d.name);
    this.outputNames = this._outputs.map((d) => d.name);
    const meta = (d) => ({name: d.name, isTensor: true, type: DTYPE_NAME[d.dtype], shape: d.shape.slice()});
    this.inputMetadata = this._inputs.map(meta);
    this.outputMetadata = this._outputs.map(meta);
    this._disposed = false;
    this._profilePrefix = (options && options.profileFilePrefix) || 'onnxruntime_profile_';
    this._profiling = false;
    this.profileFile = null;
    if (options && options.enableProfiling) this.startProfiling();
  }

  get device() {
    return this._session.device();
  }

  summary() {
    return this._session.summary();
  }

  _checkOpen(what) {
    if (this._disposed) throw new Error(`onnxruntime-npu: ${what}() on a disposed session`);
  }

  async run(feeds, fetches, options) {
    void options;
    this._checkOpen('run');
    const inputs = this._inputs.map((desc) => {
      const t = feeds[desc.name];
      if (t === undefined || t === null) throw new Error(`onnxruntime-npu: missing input '${desc.name}'`);
      if (!(t.type in ARRAY_TYPE)) {
        throw new Error(`onnxruntime-npu: input '${desc.name}': unsupported dtype ${t.type}` +
                        ' (float32, int8, uint8, int32, int64)');
      }
      const want = DTYPE_NAME[desc.dtype];
      if (t.type !== want) throw new Error(`onnxruntime-npu: input '${desc.name}': dtype ${t.type}, model wants ${want}`);
      const dims = Array.from(t.dims);
      if (dims.length !== desc.shape.length || dims.some((v, i) => v !== desc.shape[i])) {
        throw new Error(`onnxruntime-npu: input '${desc.name}': dims [${dims}], model wants [${desc.shape}]`);
      }
      if (t.location && t.location !== 'cpu') throw new Error(`onnxruntime-npu: input '${desc.name}': location ${t.location} (cpu only)`);
      return {dtype: desc.dtype, dims, data: t.data};
    });
    for (const name of Object.keys(feeds)) {
      if (!this.inputNames.includes(name)) throw new Error(`onnxruntime-npu: unknown input '${name}'`);
    }
    const result = await this._session.run(inputs);
    const out = {};
    this._outputs.forEach((desc, i) => {
      if (!(desc.name in fetches)) return;
      const o = result.outputs[i];
      const Ctor = ARRAY_TYPE[DTYPE_NAME[o.dtype]];
      const data = new Ctor(o.data);
      const pre = fetches[desc.name];
      if (pre) {  // pre-allocated: written in place and returned
        if (pre.type !== DTYPE_NAME[o.dtype] || pre.data.length !== data.length) {
          throw new Error(`onnxruntime-npu: pre-allocated output '${desc.name}' is ${pre.type}[${pre.data.length}],` +
                          ` the output is ${DTYPE_NAME[o.dtype]}[${data.length}]`);
        }
        pre.data.set(data);
        out[desc.name] = pre;
      } else {
        out[desc.name] = new Tensor(DTYPE_NAME[o.dtype], data, o.dims);
      }
    });
    return out;
  }

  startProfiling() {
    this._checkOpen('startProfiling');
    this._session.startProfiling();
    this._profiling = true;
  }

  // Writes the Chrome trace to <profileFilePrefix>_<time>.json (onnxruntime's convention) and
  // returns its name (also in this.profileFile).
  endProfiling() {
    this._checkOpen('endProfiling');
    if (!this._profiling) return null;
    this._profiling = false;
    const file = profileFileName(this._profilePrefix);
    this._session.endProfiling(file);
    this.profileFile = file;
    return file;
  }

  async dispose() {
    if (this._disposed) return;
    if (this._profiling) this.endProfiling();
    this._disposed = true;
    // Requests in flight still settle; the C session goes with the last of them.
    this._session.dispose();
  }
}

const backend = {
  async init() {},
  async createInferenceSessionHandler(pathOrBuffer, options) {
    let bytes;
    let origin;
    if (typeof pathOrBuffer === 'string') {
      bytes = new Uint8Array(await fs.promises.readFile(pathOrBuffer));
      origin = pathOrBuffer;
    } else if (pathOrBuffer instanceof Uint8Array) {
      bytes = pathOrBuffer;
      origin = '<bytes>';
    } else {
      throw new TypeError('onnxruntime-npu: the model must be a path or a Uint8Array');
    }
    const ep = npuOptions(options);
    const device = ep.device || process.env.NPU_DEVICE || 'sim';
    // calibration (ONNX models): samples, each a Tensor (one-input models) or an array of
    // Tensors in the model's input order; without them the compiler calibrates on random data.
    const calibration = (ep.calibration || []).map((sample, i) => (Array.isArray(sample) ? sample : [sample]).map((t, k) => {
      if (!t || !(t.type in ARRAY_TYPE)) throw new TypeError(`onnxruntime-npu: calibration sample ${i} input ${k}: not a supported Tensor`);
      return {dtype: native.dtypes[t.type], dims: Array.from(t.dims), data: t.data};
    }));
    const session = await native.createSession(bytes, device, origin, calibration);
    return new NpuSessionHandler(session, options);
  },
};

registerBackend('npu', backend, 10);

module.exports = {backend, native, ort};
