#!/usr/bin/env python3
"""What wider activations or another weight rounding would give PP-OCRv4 det or rec, before
anyone builds them: the float model on onnxruntime-node with the NPU's roundings emulated
(fake quantisation), scored as the OCR test scores the NPU (docs/architecture.md 3.1).

  emulate_precision.py det|rec REPORT [--bits 8] [--wide REGEX=BITS]... [--pre BITS]
                       [--weights nearest|kernel-sum|float]

REPORT is the output of `npu-compile ... --accuracy-report` for that model: its rows name the
values the device materialises. Each is rounded onto a uniform grid over its min/max on the
calibration set (2^bits levels, integer zero point, as the compiler's min/max method); a
value whose "VALUE LAYER(OP)" matches a --wide REGEX gets that many bits instead. --pre
also rounds the inputs of activation functions (Relu, Clip, HardSigmoid, Sigmoid, LeakyRelu,
hard-swish's x), which the device evaluates through a lookup table of that input's codes
inside a fused layer; without it they stay float. Constant Conv/ConvTranspose/MatMul/Gemm
weights are rounded onto int8 per output channel (max|w|/127): nearest, kernel-sum (each
depthwise kernel's sum in codes kept within half a code of its unrounded sum) or float.

Not emulated: the lookup tables' own rounding, requantisation arithmetic, softmax grids and
the compiler's consumer-aware range rules; with --bits 8 --pre 8 it lands near the NPU's own
figures (rec 36 of 40 lines / 23.5 dB against the NPU's 37 / 24.2 dB).
Needs python3-onnx, numpy and onnxruntime-node (NODE_PATH=scripts/ort/node_modules).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "npu-ocr")]
import check_ocr  # noqa: E402
import npu_ocr  # noqa: E402

# Per output: min and max over every element, for the calibration ranges.
_RANGES_JS = r"""
const ort = require('onnxruntime-node'); const fs = require('fs');
(async () => {
  const [model, job] = process.argv.slice(1); const j = JSON.parse(fs.readFileSync(job));
  const s = await ort.InferenceSession.create(model, {intraOpNumThreads: 1});
  for (const it of j.items) {
    const x = new Float32Array(fs.readFileSync(it.input).buffer.slice(0));
    const out = await s.run({[s.inputNames[0]]: new ort.Tensor('float32', x, it.shape)});
    const r = {};
    for (const k of s.outputNames) {
      let lo = Infinity, hi = -Infinity;
      for (const v of out[k].data) { if (v < lo) lo = v; if (v > hi) hi = v; }
      r[k] = [lo, hi];
    }
    fs.writeFileSync(it.output, JSON.stringify(r));
  }
})().catch(e => { console.error(e.message); process.exit(1); });
"""


def report_values(path):
    """(value, layer, op) of each row of an accuracy report."""
    rows = []
    with open(path) as f:
        for line in f:
            # the op column is cut at its width ("(Chain(Mul,Sigmoid,... npu")
            m = re.match(r"^(\d+)\s+(\S+)\s+(\S+) \((.*?)\)?\s+npu\s", line)
            if m:
                rows.append((m.group(2), m.group(3), m.group(4)))
    if not rows:
        raise SystemExit(f"{path}: no value rows; give the output of npu-compile --accuracy-report")
    return rows


def activation_inputs(model):
    """{value: function} of the inputs of the model's activation functions."""
    producer = {o: n for n in model.graph.node for o in n.output}
    constants = ({n.output[0] for n in model.graph.node if n.op_type == "Constant"}
                 | {i.name for i in model.graph.initializer})
    found = {}
    for n in model.graph.node:
        if n.op_type in ("Relu", "HardSigmoid", "Sigmoid", "LeakyRelu"):
            found[n.input[0]] = n.op_type
        elif n.op_type == "Clip":
            p = producer.get(n.input[0])
            if p is not None and p.op_type == "Add" and any(i in constants for i in p.input):
                found[next(i for i in p.input if i not in constants)] = "HardSwish"  # x·Clip(x+3)
            else:
                found[n.input[0]] = "Clip"
    return {v: f for v, f in found.items() if v in producer}


def calibration_ranges(src, names, kind):
    """{value: (min, max)} over the calibration samples."""
    probe = onnx.load(src)
    for v in names:
        probe.graph.output.append(helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
    ranges = {v: (np.inf, -np.inf) for v in names}
    samples = [x for x, _ in check_ocr.inputs(kind, "calib")]
    with tempfile.TemporaryDirectory(prefix="npu-emulate-") as tmp:
        onnx.save(probe, os.path.join(tmp, "probe.onnx"))
        items = []
        for i, x in enumerate(samples):
            p = os.path.join(tmp, f"in{i}.f32")
            np.ascontiguousarray(x, np.float32).tofile(p)
            items.append({"input": p, "shape": list(x.shape), "output": os.path.join(tmp, f"r{i}.json")})
        with open(os.path.join(tmp, "job.json"), "w") as f:
            json.dump({"items": items}, f)
        subprocess.run(["node", "-e", _RANGES_JS, os.path.join(tmp, "probe.onnx"),
                        os.path.join(tmp, "job.json")], check=True)
        for it in items:
            with open(it["output"]) as f:
                for k, (lo, hi) in json.load(f).items():
                    if k in ranges:
                        ranges[k] = (min(ranges[k][0], lo), max(ranges[k][1], hi))
    return ranges


def kernel_sum_codes(r):
    """Nearest codes per row of r (unrounded codes), then each row's sum within half a code of
    its unrounded sum: the taps rounded furthest in the excess's direction move back."""
    q = np.clip(np.round(r), -127, 127)
    for c in range(r.shape[0]):
        qc, rc = q[c].reshape(-1), r[c].reshape(-1)
        excess = (qc - rc).sum()
        while abs(excess) > 0.5:
            d = np.sign(excess)
            cost = np.where(np.abs(qc) < 127, (qc - rc) * d, -np.inf)
            k = int(np.argmax(cost))
            if not np.isfinite(cost[k]):
                break
            qc[k] -= d
            excess -= d
        q[c] = qc.reshape(q[c].shape)
    return q


def round_weights(model, how):
    constants = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    inits = {i.name: i for i in model.graph.initializer}
    for n in model.graph.node:
        if how == "float" or n.op_type not in ("Conv", "ConvTranspose", "MatMul", "Gemm"):
            continue
        name = n.input[1]
        t = constants[name].attribute[0].t if name in constants else inits.get(name)
        if t is None:
            continue  # a run-time operand
        w = numpy_helper.to_array(t).astype(np.float32)
        group = next((a.i for a in n.attribute if a.name == "group"), 1)
        depthwise = n.op_type == "Conv" and group > 1 and w.shape[1] == 1
        axes = {"Conv": tuple(range(1, w.ndim)), "ConvTranspose": (0,) + tuple(range(2, w.ndim))}.get(n.op_type, (0,))
        s = np.abs(w).max(axis=axes, keepdims=True) / 127
        s[s == 0] = 1
        q = kernel_sum_codes(w / s) if how == "kernel-sum" and depthwise else np.clip(np.round(w / s), -127, 127)
        t.CopyFrom(numpy_helper.from_array((q * s).astype(np.float32), t.name))


def fake_quantise(model, grids):
    """Inserts round-onto-grid nodes after each value of grids {value: (lo, hi, bits)}."""
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    after = {}
    for v, (lo, hi, bits) in grids.items():
        levels = float(2 ** bits - 1)
        step = (hi - lo) / levels
        zp = float(np.round(-lo / step))
        p = v + "__fq"

        def const(name, val):
            return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(val, np.float32), name))
        if opset < 11:  # Clip's bounds are attributes before opset 11, inputs after
            clip = [helper.make_node("Clip", [p + "3"], [p + "4"], min=0.0, max=levels)]
        else:
            clip = [const(p + "lo", 0.0), const(p + "hi", levels),
                    helper.make_node("Clip", [p + "3", p + "lo", p + "hi"], [p + "4"])]
        after[v] = [const(p + "s", step), const(p + "z", zp + 0.5), const(p + "zz", zp),
                    helper.make_node("Div", [v, p + "s"], [p + "1"]),
                    helper.make_node("Add", [p + "1", p + "z"], [p + "2"]),
                    helper.make_node("Floor", [p + "2"], [p + "3"]), *clip,
                    helper.make_node("Sub", [p + "4", p + "zz"], [p + "5"]),
                    helper.make_node("Mul", [p + "5", p + "s"], [p])]
    renamed = {v: nodes[-1].output[0] for v, nodes in after.items()}
    nodes = []
    for n in list(model.graph.node):
        for i, x in enumerate(n.input):
            n.input[i] = renamed.get(x, x)  # readers take the rounded value
        nodes.append(n)
        for o in n.output:
            nodes.extend(after.get(o, []))
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=("det", "rec"))
    ap.add_argument("report")
    ap.add_argument("--bits", type=int, default=8, help="bits of the values the report lists (default 8)")
    ap.add_argument("--wide", action="append", default=[], metavar="REGEX=BITS",
                    help="values whose 'VALUE LAYER(OP)' matches REGEX get BITS bits, e.g. '\\((Conv|DepthwiseConv)\\)=16'")
    ap.add_argument("--pre", type=int, default=0, help="bits of activation-function inputs (0: float)")
    ap.add_argument("--weights", choices=("nearest", "kernel-sum", "float"), default="nearest")
    a = ap.parse_args()
    wide = []
    for spec in a.wide:
        regex, _, bits = spec.rpartition("=")
        if not regex or not bits.isdigit():
            raise SystemExit(f"--wide {spec}: expected REGEX=BITS")
        wide.append((re.compile(regex), int(bits)))
    src = os.path.join(check_ocr.MODELS, check_ocr.FILES[a.kind])
    model = onnx.load(src)
    produced = {o for n in model.graph.node for o in n.output}
    values = [r for r in report_values(a.report) if r[0] in produced]
    listed = {v for v, _, _ in values}
    pre = {v: f for v, f in activation_inputs(model).items() if v not in listed} if a.pre else {}
    ranges = calibration_ranges(src, list(listed) + list(pre), a.kind)
    grids = {}
    for v, layer, op in values:
        bits = next((b for r, b in wide if r.search(f"{v} {layer}({op})")), a.bits)
        grids[v] = (min(ranges[v][0], 0.0), max(ranges[v][1], 0.0), bits)
    for v, f in pre.items():
        lo = max(ranges[v][0], -3.0) if f == "HardSwish" else ranges[v][0]  # flat below -3
        grids[v] = (min(lo, 0.0), max(ranges[v][1], 0.0), a.pre)
    grids = {v: g for v, g in grids.items() if g[1] > g[0]}
    round_weights(model, a.weights)
    fake_quantise(model, grids)
    data = check_ocr.inputs(a.kind, "eval")
    xs = [x for x, _ in data]
    with tempfile.TemporaryDirectory(prefix="npu-emulate-") as tmp:
        path = os.path.join(tmp, "emulated.onnx")
        onnx.save(model, path)
        ref, got = npu_ocr.ort_run(src, xs), npu_ocr.ort_run(path, xs)
    dbs = [check_ocr.sqnr(r, g) for r, g in zip(ref, got)]
    what = (f"{a.kind}: {len(values)} values at {a.bits} bits"
            + "".join(f", /{r.pattern}/ at {b}" for r, b in wide)
            + (f", {len(pre)} activation inputs at {a.pre}" if pre else "") + f", weights {a.weights}")
    if a.kind == "rec":
        chars = npu_ocr.load_keys(os.path.join(check_ocr.MODELS, npu_ocr.KEYS_FILE))
        same = sum(npu_ocr.ctc_greedy(r, chars) == npu_ocr.ctc_greedy(g, chars) for r, g in zip(ref, got))
        print(f"{what}: text identical on {same} of {len(xs)} lines, SQNR mean {np.mean(dbs):.2f} dB, "
              f"min {np.min(dbs):.2f} dB")
    else:
        ious = [check_ocr.map_iou(r, g) for r, g in zip(ref, got)]
        print(f"{what}: IoU mean {np.mean(ious):.4f} over {len(xs)} pages, SQNR mean {np.mean(dbs):.2f} dB, "
              f"min {np.min(dbs):.2f} dB")


if __name__ == "__main__":
    main()
