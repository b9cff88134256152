#!/usr/bin/python3
"""Turns a float ONNX model into a QDQ model the way onnxruntime.quantization.quantize_static
(QuantFormat.QDQ, MinMax) does, without onnxruntime's Python package:

- every float activation (the graph input and every node output, except a Conv output read
  only by a Relu, which the quantiser fuses, and Flatten/Reshape outputs, which keep their
  input's parameters) gets QuantizeLinear -> DequantizeLinear with uint8 asymmetric
  parameters from its min/max over the calibration samples (range widened to include 0);
- Conv weights become int8 codes read through DequantizeLinear: symmetric per output channel
  (scale = max|w|/127) for regular convolutions, per tensor for depthwise ones (both forms
  onnxruntime produces, so that both are exercised); biases become int32 codes with
  scale = activation scale * weight scale.

Gemm/MatMul weights are int8 per output channel (axis 1 of a [K, N] operand, axis 0 of a
Gemm transB one), Gemm biases int32. A Conv/Gemm/MatMul output read only by a Relu or Clip, and a
MatMul output read only by an Add of a constant (its bias), get no pair: the quantiser (and
the NPU) fuse them.

Ranges come from a small numpy interpreter for the operators of the test models (Conv,
Gemm, MatMul, Relu, Clip, HardSwish, HardSigmoid, GlobalAveragePool, Mul, Add, Flatten).

    /usr/bin/python3 scripts/make_qdq.py FLOAT.onnx CALIB_DIR OUT.onnx [--unfused] [--qoperator]
--unfused also quantises a Conv/Gemm/MatMul output read by a Relu or Clip (a second rounding
point, with its own parameters, before the activation).
--qoperator then writes every DequantizeLinear -> Conv/MatMul -> QuantizeLinear as one
QLinearConv/QLinearMatMul (onnxruntime's QOperator format); other operators keep their pairs.
CALIB_DIR holds one subfolder per sample with input_0.npy (scripts/make_mobilenet.py --calib).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def conv(x, w, b, node):
    strides = attr(node, "strides", [1, 1])
    pads = attr(node, "pads", [0, 0, 0, 0])
    group = attr(node, "group", 1)
    n, c, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - kw) // strides[1] + 1
    out = np.zeros((n, cout, oh, ow), np.float64)
    cout_g = cout // group
    for g in range(group):
        xs = xp[:, g * cin_g:(g + 1) * cin_g]
        ws = w[g * cout_g:(g + 1) * cout_g]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky:ky + strides[0] * oh:strides[0], kx:kx + strides[1] * ow:strides[1]]
                out[:, g * cout_g:(g + 1) * cout_g] += np.einsum("nchw,oc->nohw", patch, ws[:, :, ky, kx])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def float_node(nd, a):
    """The output of float node `nd` for its inputs `a` (float64 arrays, None for an empty name)."""
    op = nd.op_type
    if op == "Conv":
        return conv(a[0], a[1], a[2] if len(a) > 2 else None, nd)
    if op == "Relu":
        return np.maximum(a[0], 0)
    if op == "HardSwish":
        return a[0] * np.clip(a[0] / 6 + 0.5, 0, 1)
    if op == "HardSigmoid":
        return np.clip(attr(nd, "alpha", 0.2) * a[0] + attr(nd, "beta", 0.5), 0, 1)
    if op == "GlobalAveragePool":
        return a[0].mean(axis=(2, 3), keepdims=True)
    if op == "Mul":
        return a[0] * a[1]
    if op == "Add":
        return a[0] + a[1]
    if op == "Clip":
        lo = a[1] if len(a) > 1 and a[1] is not None else -np.inf
        hi = a[2] if len(a) > 2 and a[2] is not None else np.inf
        return np.clip(a[0], lo, hi)
    if op == "MatMul":
        return a[0] @ a[1]
    if op == "Gemm":
        x = a[0].T if attr(nd, "transA", 0) else a[0]
        w = a[1].T if attr(nd, "transB", 0) else a[1]
        y = attr(nd, "alpha", 1.0) * (x @ w)
        if len(a) > 2 and a[2] is not None:
            y = y + attr(nd, "beta", 1.0) * a[2]
        return y
    if op == "Flatten":
        return a[0].reshape(a[0].shape[0], -1)
    raise SystemExit(f"make_qdq.py: no numpy kernel for {op} (node {nd.name})")


def run_float(model, x):
    """Every value of the float model for input x (float64)."""
    env = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    env[model.graph.input[0].name] = x.astype(np.float64)
    for nd in model.graph.node:
        env[nd.output[0]] = float_node(nd, [env[i] if i else None for i in nd.input])
    return env


def uint8_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32(max(hi - lo, 1e-6) / 255.0)
    zp = int(np.clip(np.round(-lo / scale), 0, 255))
    return scale, zp


def to_qoperator(nodes):
    """DQ(x), DQ(w)[, DQ(b)] -> Conv/MatMul -> Q  becomes  QLinearConv/QLinearMatMul."""
    producer = {o: nd for nd in nodes for o in nd.output}
    readers = {}
    for nd in nodes:
        for i in nd.input:
            readers.setdefault(i, []).append(nd)
    drop, out = set(), []
    for nd in nodes:
        if nd.op_type not in ("Conv", "MatMul"):
            continue
        dqs = [producer.get(i) for i in nd.input]
        q = readers.get(nd.output[0], [])
        if not all(d is not None and d.op_type == "DequantizeLinear" for d in dqs) or len(q) != 1 or \
                q[0].op_type != "QuantizeLinear" or any(len(readers[i]) != 1 for i in nd.input):
            continue
        x, w = dqs[0], dqs[1]
        ins = list(x.input) + list(w.input) + list(q[0].input[1:])
        if nd.op_type == "Conv" and len(dqs) > 2:
            ins.append(dqs[2].input[0])  # int32 bias codes at scale x_scale * w_scale
        new = helper.make_node("QLinear" + nd.op_type, ins, list(q[0].output), name=nd.name)
        if nd.op_type == "Conv":
            new.attribute.extend(nd.attribute)
        drop.update(id(n) for n in [nd, q[0]] + dqs[1:])  # the activation DQ may serve others
        if len(readers[x.output[0]]) == 1:
            drop.add(id(x))
        out.append((id(q[0]), new))
    replacement = dict(out)
    result = []
    for nd in nodes:
        if id(nd) in replacement:
            result.append(replacement[id(nd)])
        elif id(nd) not in drop:
            result.append(nd)
    return result


def main():
    unfused = "--unfused" in sys.argv[4:]
    qoperator = "--qoperator" in sys.argv[4:]
    if len(sys.argv) < 4 or any(a not in ("--unfused", "--qoperator") for a in sys.argv[4:]):
        raise SystemExit(__doc__)
    src, calib, dst = sys.argv[1:4]
    model = onnx.load(src)
    g = model.graph
    samples = sorted(os.path.join(calib, d) for d in os.listdir(calib))
    ranges = {}
    for s in samples:
        env = run_float(model, np.load(os.path.join(s, "input_0.npy")))
        for k, v in env.items():
            lo, hi = float(v.min()), float(v.max())
            old = ranges.get(k, (lo, hi))
            ranges[k] = (min(lo, old[0]), max(hi, old[1]))

    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    readers = {}
    for nd in g.node:
        for i in nd.input:
            readers.setdefault(i, []).append(nd)
    new_inits, nodes = [], []
    act_scale = {}

    graph_outputs = {o.name for o in g.output}

    def qdq(name, source=None):
        """Q -> DQ after activation `name` (read from `source` when its producer was renamed);
        returns the DequantizeLinear output: `name` itself for a graph output."""
        scale, zp = uint8_params(*ranges[name])
        act_scale[name] = scale
        new_inits.append(numpy_helper.from_array(np.array(scale, np.float32), name + "_scale"))
        new_inits.append(numpy_helper.from_array(np.array(zp, np.uint8), name + "_zero_point"))
        nodes.append(helper.make_node("QuantizeLinear", [source or name, name + "_scale", name + "_zero_point"],
                                      [name + "_QuantizeLinear_Output"], name=name + "_QuantizeLinear"))
        nodes.append(helper.make_node("DequantizeLinear",
                                      [name + "_QuantizeLinear_Output", name + "_scale", name + "_zero_point"],
                                      [name if source else name + "_DequantizeLinear_Output"],
                                      name=name + "_DequantizeLinear"))
        return name if source else name + "_DequantizeLinear_Output"

    def dequantized(name, codes, scale, zero_point, axis=None):
        """Constant codes behind a DequantizeLinear; returns its output."""
        new_inits.append(numpy_helper.from_array(codes, name + "_quantized"))
        new_inits.append(numpy_helper.from_array(scale, name + "_scale"))
        new_inits.append(numpy_helper.from_array(zero_point, name + "_zero_point"))
        kwargs = {} if axis is None else {"axis": axis}
        nodes.append(helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale", name + "_zero_point"],
                                      [name + "_DequantizeLinear_Output"], name=name + "_DequantizeLinear", **kwargs))
        return name + "_DequantizeLinear_Output"

    rename = {}
    inp = g.input[0].name
    rename[inp] = qdq(inp)
    for nd in g.node:
        ins = [rename.get(i, i) for i in nd.input]
        if nd.op_type == "Conv" or (nd.op_type in ("Gemm", "MatMul") and nd.input[1] in inits):
            w = inits[nd.input[1]].astype(np.float64)
            # Output channels: axis 0 of Conv W and of a Gemm transB operand, else axis 1.
            axis = 0 if nd.op_type == "Conv" or attr(nd, "transB", 0) else 1
            per_tensor = nd.op_type == "Conv" and attr(nd, "group", 1) > 1  # depthwise: per tensor
            ws = np.abs(w).max(axis=tuple(d for d in range(w.ndim) if d != axis)) / 127.0
            if per_tensor:
                ws = np.full_like(ws, np.abs(w).max() / 127.0)
            ws = ws.astype(np.float32)
            shape = [1] * w.ndim
            shape[axis] = -1
            wq = np.clip(np.round(w / ws.reshape(shape)), -127, 127).astype(np.int8)
            if per_tensor:
                ins[1] = dequantized(nd.input[1], wq, np.array(ws[0], np.float32), np.array(0, np.int8))
            else:
                ins[1] = dequantized(nd.input[1], wq, ws, np.zeros(len(ws), np.int8), axis)
            bias_ok = nd.op_type == "Conv" or (attr(nd, "beta", 1.0) == 1.0 and attr(nd, "alpha", 1.0) == 1.0)
            if len(nd.input) > 2 and nd.input[2] and bias_ok:
                # int32 codes at scale x_scale * w_scale, per output channel.
                bs = (act_scale[nd.input[0]] * ws).astype(np.float32)
                bq = np.round(inits[nd.input[2]].astype(np.float64) / bs).astype(np.int32)
                ins[2] = dequantized(nd.input[2], bq, bs, np.zeros(len(bs), np.int32), 0)
        out = nd.output[0]
        only = [r for r in readers.get(out, [])]
        only_relu = not unfused and nd.op_type in ("Conv", "Gemm", "MatMul", "Add") and \
            [r.op_type for r in only] in (["Relu"], ["Clip"])
        only_bias = nd.op_type == "MatMul" and len(only) == 1 and only[0].op_type == "Add" and \
            any(i in inits for i in only[0].input)
        quantised = nd.op_type not in ("Flatten", "Reshape") and not (only_relu or only_bias)
        # A quantised graph output keeps its name on the DequantizeLinear (as onnxruntime does).
        renamed = out + "_QuantizeLinear_Input" if quantised and out in graph_outputs else None
        new = helper.make_node(nd.op_type, ins, [renamed or out] + list(nd.output[1:]), name=nd.name)
        new.attribute.extend(nd.attribute)
        nodes.append(new)
        if quantised:
            # The Q -> DQ pair's output replaces the value for every reader (Flatten/Reshape
            # outputs keep their input's already quantised values).
            rename[out] = qdq(out, renamed)
    # The quantised weights replace the float ones.
    if qoperator:
        nodes = to_qoperator(nodes)
    used = {i for nd in nodes for i in nd.input}
    keep = [i for i in list(g.initializer) + new_inits if i.name in used]
    graph = helper.make_graph(nodes, g.name + "_qdq", list(g.input), list(g.output), keep)
    out_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                                  producer_name="npu make_qdq.py")
    onnx.checker.check_model(out_model)
    onnx.save(out_model, dst)
    q = sum(1 for n in nodes if n.op_type == "QuantizeLinear")
    print(f"wrote {dst}: {q} activation Q/DQ pairs, {len(nodes)} nodes")


if __name__ == "__main__":
    main()
