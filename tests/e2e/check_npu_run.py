#!/usr/bin/python3
"""End-to-end acceptance of the walking skeleton, against numpy.

check_npu_run.py NPU_RUN MODEL.onnx WORKDIR [--rtl]

Runs npu-run on MODEL.onnx (compiled on the fly) with --device sim and checks the output
against a numpy evaluation of the same ONNX graph (SQNR >= 30 dB). Every graph input gets
normal(0, 1) data (seed 7), weights fed as inputs included; scalar inputs (Clip bounds) -1
and 1.5. With --rtl it also runs
--device rtl and requires outputs bit-identical to sim. Prints both sides on failure.
"""
import itertools
import math
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def conv(x, w, b, attrs):
    """Convolution of N-D spatial inputs (NCHW, NCDHW) with groups, strides, dilations and
    explicit or SAME/VALID pads, in float64."""
    r = x.ndim - 2
    st = list(attrs.get("strides", [1] * r))
    dil = list(attrs.get("dilations", [1] * r))
    pads = list(attrs.get("pads", [0] * (2 * r)))
    group = attrs.get("group", 1)
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    ins, ks = x.shape[2:], w.shape[2:]
    if auto_pad == "VALID":
        pads = [0] * (2 * r)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for i in range(r):
            total = max(0, (-(-ins[i] // st[i]) - 1) * st[i] + (ks[i] - 1) * dil[i] + 1 - ins[i])
            small = total // 2
            pads[i], pads[r + i] = (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple((pads[i], pads[r + i]) for i in range(r)))
    outs = [(ins[i] + pads[i] + pads[r + i] - (ks[i] - 1) * dil[i] - 1) // st[i] + 1 for i in range(r)]
    n, co, cig = x.shape[0], w.shape[0], w.shape[1]
    y = np.zeros((n, co) + tuple(outs))
    cog = co // group
    for g in range(group):
        xs = xp[:, g * cig:(g + 1) * cig]
        ws = w[g * cog:(g + 1) * cog].astype(np.float64)
        for k in itertools.product(*(range(kk) for kk in ks)):
            where = tuple(slice(k[i] * dil[i], k[i] * dil[i] + st[i] * outs[i], st[i]) for i in range(r))
            patch = xs[(slice(None), slice(None)) + where]
            y[:, g * cog:(g + 1) * cog] += np.einsum("nc...,oc->no...", patch, ws[(slice(None), slice(None)) + k])
    return y + (b.reshape((1, -1) + (1,) * r) if b is not None else 0)


def conv_transpose(x, w, b, attrs):
    """ConvTranspose of N-D spatial inputs (NCL, NCHW, NCDHW), group 1, explicit pads,
    strides, dilations and output_padding, in float64."""
    r = x.ndim - 2
    st = list(attrs.get("strides", [1] * r))
    dil = list(attrs.get("dilations", [1] * r))
    pads = list(attrs.get("pads", [0] * (2 * r)))
    op = list(attrs.get("output_padding", [0] * r))
    n, c = x.shape[:2]
    co, ks = w.shape[1], w.shape[2:]
    ins = x.shape[2:]
    full = np.zeros((n, co) + tuple((ins[i] - 1) * st[i] + (ks[i] - 1) * dil[i] + 1 + op[i] for i in range(r)))
    for k in itertools.product(*(range(kk) for kk in ks)):
        where = tuple(slice(k[i] * dil[i], k[i] * dil[i] + st[i] * ins[i], st[i]) for i in range(r))
        full[(slice(None), slice(None)) + where] += np.einsum("nc...,co->no...", x.astype(np.float64),
                                                             w[(slice(None), slice(None)) + k].astype(np.float64))
    crop = tuple(slice(pads[i], full.shape[2 + i] - pads[r + i]) for i in range(r))
    y = full[(slice(None), slice(None)) + crop]
    return y + (b.reshape((1, -1) + (1,) * r) if b is not None else 0)


def pool(x, attrs, kind):
    """MaxPool / AveragePool of N-D spatial inputs with explicit pads, strides, dilations,
    ceil_mode and count_include_pad (taps inside the padded extent), in float64."""
    r = x.ndim - 2
    ks = attrs["kernel_shape"]
    st = list(attrs.get("strides", [1] * r))
    dil = list(attrs.get("dilations", [1] * r))
    pads = list(attrs.get("pads", [0] * (2 * r)))
    ceil = attrs.get("ceil_mode", 0) == 1
    include_pad = attrs.get("count_include_pad", 0) == 1
    ins = x.shape[2:]

    def out_size(i):
        span = ins[i] + pads[i] + pads[r + i] - (ks[i] - 1) * dil[i] - 1
        return (-(-span // st[i]) if ceil else span // st[i]) + 1

    outs = [out_size(i) for i in range(r)]
    y = np.zeros(x.shape[:2] + tuple(outs))
    for o in itertools.product(*(range(v) for v in outs)):
        taps = [[o[i] * st[i] - pads[i] + k * dil[i] for k in range(ks[i])] for i in range(r)]
        valid = [[t for t in taps[i] if 0 <= t < ins[i]] for i in range(r)]
        win = x.astype(np.float64)[np.ix_(range(x.shape[0]), range(x.shape[1]), *valid)]
        if kind == "max":
            y[(slice(None), slice(None)) + o] = win.max(axis=tuple(range(2, 2 + r)))
        else:
            count = np.prod([len([t for t in taps[i] if -pads[i] <= t < ins[i] + pads[r + i]]) if include_pad
                             else len(valid[i]) for i in range(r)])
            y[(slice(None), slice(None)) + o] = win.sum(axis=tuple(range(2, 2 + r))) / count
    return y


def numpy_reference(model_path, inputs):
    model = onnx.load(model_path)
    env = {i.name: numpy_helper.to_array(i).astype(np.float32) for i in model.graph.initializer}
    env.update(inputs)
    for node in model.graph.node:
        ins = [env[n] for n in node.input if n]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Gemm":
            a, b = ins[0], ins[1]
            if attrs.get("transA", 0): a = a.T
            if attrs.get("transB", 0): b = b.T
            y = attrs.get("alpha", 1.0) * (a @ b)
            if len(ins) > 2: y = y + attrs.get("beta", 1.0) * ins[2]
        elif node.op_type == "MatMul":
            y = ins[0] @ ins[1]
        elif node.op_type == "ConvTranspose":
            y = conv_transpose(ins[0], ins[1], ins[2] if len(ins) > 2 else None, attrs)
        elif node.op_type in ("MaxPool", "AveragePool"):
            y = pool(ins[0], attrs, "max" if node.op_type == "MaxPool" else "avg")
        elif node.op_type == "Resize":  # nearest, integer scales, asymmetric-equivalent
            s = [int(v) for v in ins[-1]]
            y = ins[0].repeat(s[2], axis=2).repeat(s[3], axis=3)
        elif node.op_type == "Sigmoid":
            y = 1 / (1 + np.exp(-ins[0]))
        elif node.op_type == "Div":
            y = ins[0] / ins[1]
        elif node.op_type == "PRelu":
            y = np.where(ins[0] >= 0, ins[0], ins[0] * ins[1])
        elif node.op_type == "Flatten":
            y = ins[0].reshape(ins[0].shape[0], -1)
        elif node.op_type == "Transpose":
            y = np.transpose(ins[0], attrs.get("perm"))
        elif node.op_type == "Concat":
            y = np.concatenate(ins, axis=attrs["axis"])
        elif node.op_type == "Add":
            y = ins[0] + ins[1]
        elif node.op_type == "Relu":
            y = np.maximum(ins[0], 0)
        elif node.op_type == "Clip":
            y = np.clip(ins[0], ins[1] if len(ins) > 1 else -np.inf, ins[2] if len(ins) > 2 else np.inf)
        elif node.op_type == "Conv":
            y = conv(ins[0], ins[1], ins[2] if len(ins) > 2 else None, attrs)
        elif node.op_type == "Mul":
            y = ins[0] * ins[1]
        elif node.op_type == "GlobalAveragePool":
            y = ins[0].mean(axis=(2, 3), keepdims=True)
        elif node.op_type == "HardSigmoid":
            y = np.clip(attrs.get("alpha", 0.2) * ins[0] + attrs.get("beta", 0.5), 0, 1)
        elif node.op_type == "BatchNormalization":
            scale, bias, mean, var = (v.reshape(1, -1, 1, 1) for v in ins[1:5])
            y = (ins[0] - mean) / np.sqrt(var + attrs.get("epsilon", 1e-5)) * scale + bias
        elif node.op_type == "Erf":
            y = np.vectorize(math.erf)(ins[0].astype(np.float64))
        elif node.op_type == "Sub":
            y = ins[0] - ins[1]
        elif node.op_type == "Pow":
            y = ins[0].astype(np.float64) ** ins[1]
        elif node.op_type == "Sqrt":
            y = np.sqrt(ins[0].astype(np.float64))
        elif node.op_type == "ReduceMean":
            y = ins[0].astype(np.float64).mean(axis=tuple(attrs["axes"]), keepdims=bool(attrs.get("keepdims", 1)))
        elif node.op_type == "Shape":  # shapes ride in float32 like every value here
            y = np.array(ins[0].shape)
        elif node.op_type == "Slice":  # constant starts/ends/axes/steps (shapes and indices ride in float32)
            idx = [slice(None)] * ins[0].ndim
            for k, a in enumerate(ins[3] if len(ins) > 3 else range(len(ins[1]))):
                step = int(ins[4][k]) if len(ins) > 4 else 1
                idx[int(a)] = slice(int(ins[1][k]), int(min(ins[2][k], 2**62)), step)
            y = ins[0][tuple(idx)]
        elif node.op_type == "Reshape":
            y = ins[0].reshape([int(d) for d in ins[1]])
        elif node.op_type == "Squeeze":  # axes as an input (opset 13)
            y = np.squeeze(ins[0], axis=tuple(int(a) for a in ins[1]))
        elif node.op_type == "Softmax":  # opset 13: one axis
            z = ins[0].astype(np.float64)
            z = np.exp(z - z.max(axis=attrs.get("axis", -1), keepdims=True))
            y = z / z.sum(axis=attrs.get("axis", -1), keepdims=True)
        else:
            raise SystemExit(f"reference does not know {node.op_type}")
        env[node.output[0]] = y.astype(np.float32)
    return env[model.graph.output[0].name]


def run(npu_run, model, device, inputs, out_dir):
    cmd = [npu_run, model, "--device", device, "--output-dir", out_dir, "--json"]
    for inp in inputs:
        cmd += ["--input", inp]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("outputs", "latency_us", "device_cycles", "mac_utilization"):
        if key not in report:
            raise SystemExit(f"--json output lacks '{key}': {report}")
    return np.load(os.path.join(out_dir, "output_0.npy")), report


def main():
    npu_run, model, work = sys.argv[1:4]
    with_rtl = "--rtl" in sys.argv
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    # Every graph input (weights fed as inputs too) gets normal(0, 1) data; scalars are Clip
    # bounds and get -1, then 1.5 (random bounds may leave x's int8 grid only a few codes
    # inside [lo, hi], which no int8 pipeline resolves to 30 dB).
    graph = onnx.load(model).graph
    initializers = {i.name for i in graph.initializer}
    values, inp, scalars = {}, [], [-1.0, 1.5]
    for k, gi in enumerate(i for i in graph.input if i.name not in initializers):
        dims = [d.dim_value for d in gi.type.tensor_type.shape.dim]
        values[gi.name] = (np.array(scalars.pop(0)) if not dims else rng.normal(0, 1, dims)).astype(np.float32)
        inp.append(os.path.join(work, f"input_{k}.npy"))
        np.save(inp[-1], values[gi.name])
    ref = numpy_reference(model, values)
    sim, report = run(npu_run, model, "sim", inp, os.path.join(work, "sim"))
    noise = np.sum((ref - sim) ** 2)
    sqnr = 10 * np.log10(np.sum(ref ** 2) / noise) if noise > 0 else float("inf")
    print(f"sim: SQNR {sqnr:.2f} dB vs numpy, device_cycles {report['device_cycles']}, "
          f"mac_utilization {report['mac_utilization']:.4f}, p50 {report['latency_us']['p50']} us")
    if not sqnr >= 30.0:
        print("numpy:", ref[0, :8], "\nsim:  ", sim[0, :8])
        raise SystemExit(f"FAIL: SQNR {sqnr:.2f} dB < 30 dB")
    if with_rtl:
        rtl, rreport = run(npu_run, model, "rtl", inp, os.path.join(work, "rtl"))
        if sim.dtype != rtl.dtype or sim.shape != rtl.shape or not np.array_equal(sim, rtl):
            print("sim:", sim[0, :8], "\nrtl:", rtl[0, :8])
            raise SystemExit("FAIL: rtl output differs from sim")
        print(f"rtl: bit-identical to sim ({sim.size} values), device_cycles {rreport['device_cycles']}")
    print("PASS")


if __name__ == "__main__":
    main()
