#!/usr/bin/python3
"""Tap folding of small-input-channel convolutions (compiler/src/lower_conv_folded.cc) through
npu-compile and npu-run: stride 1 and 2, padding, zero and non-zero input zero points (a
QuantizeLinear/DequantizeLinear pair on the input declares them), on the 16x16 devices
npu-run opens (8/32 arrays: compiler_tests ConvFold, on the functional model).

For every model: the report must show the folded MAC count (KH taps instead of
KH*KW), the NPU output must be within SQNR >= 30 dB of the float conv of the quantised
input, and with --rtl the RTL output must equal the functional model's bit for bit.

check_conv_fold.py NPU_COMPILE NPU_RUN WORKDIR [--rtl]   (--rtl: the 16x16 RTL build)
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def sh(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


# name, Cin, kernel, stride, pads (t, l, b, r), input zero point (uint8 code; None: no QDQ)
CASES = [
    ("s1_zp", 3, 3, 1, (1, 1, 1, 1), 160),
    ("s2_zp", 3, 3, 2, (1, 1, 1, 1), 60),
    ("s2_plain", 3, 3, 2, (1, 1, 1, 1), None),
    ("k5_s2_zp", 2, 5, 2, (2, 2, 1, 2), 200),
    ("k3_asym_zp", 1, 3, 1, (0, 2, 1, 0), 90),
]


def conv_ref(x, w, b, stride, pads):
    t, l, bt, r = pads
    xp = np.pad(x, ((0, 0), (0, 0), (t, bt), (l, r)))
    n, c, h, wd = xp.shape
    co, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, co, oh, ow), np.float64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (ow - 1) + 1:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    return np.maximum(y + b[None, :, None, None], 0)


def main():
    npu_compile, npu_run, work = sys.argv[1:4]
    rtl = "--rtl" in sys.argv[4:]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(3)
    failures = []
    for name, cin, k, stride, pads, zp in CASES:
        shape = (2, cin, 19, 17)
        w = rng.normal(0, 0.3, (20, cin, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, (20,)).astype(np.float32)
        x = rng.normal(0.3, 1.0, shape).astype(np.float32)
        nodes, inits, conv_in = [], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")], "x"
        scale = 0.03
        if zp is not None:
            inits += [numpy_helper.from_array(np.array(scale, np.float32), "xs"),
                      numpy_helper.from_array(np.array(zp, np.uint8), "xz")]
            nodes += [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
                      helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xdq"])]
            conv_in = "xdq"
            # The reference sees the input on the declared grid.
            x_ref = (np.clip(np.round(x / scale) + zp, 0, 255) - zp) * scale
        else:
            x_ref = x
        nodes += [helper.make_node("Conv", [conv_in, "w", "b"], ["c"], name="conv_fold", pads=[pads[0], pads[1], pads[2], pads[3]],
                                   strides=[stride, stride]),
                  helper.make_node("Relu", ["c"], ["y"])]
        y_ref = conv_ref(x_ref.astype(np.float64), w.astype(np.float64), b.astype(np.float64), stride, pads)
        graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_ref.shape))], inits)
        model = os.path.join(work, f"{name}.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
        inp = os.path.join(work, f"{name}_input.npy")
        np.save(inp, x)
        calib = os.path.join(work, f"{name}_calib", "0")
        os.makedirs(calib, exist_ok=True)
        np.save(os.path.join(calib, "input_0.npy"), x)
        for n in (16,):
            image = os.path.join(work, f"{name}_{n}.npuimg")
            report = sh([npu_compile, model, "-o", image, "--array", str(n), "--calib", os.path.dirname(calib), "--report"])
            line = next(l for l in report.splitlines() if l.startswith("conv_fold"))
            macs = int(line.split()[2])
            oh, ow = y_ref.shape[2], y_ref.shape[3]
            blocks = -(-20 // n)
            folded = cin * k <= n
            want = shape[0] * oh * ow * k * blocks * n * n * (1 if folded else k * (-(-cin // n)))
            outs = {}
            for dev in (("sim", "rtl") if rtl else ("sim",)):
                sh([npu_run, image, "--device", dev, "--input", inp, "--output-dir", os.path.join(work, f"{name}_{n}_{dev}"),
                    "--json"])
                outs[dev] = np.load(os.path.join(work, f"{name}_{n}_{dev}", "output_0.npy"))
            y = outs["sim"]
            sqnr = 10 * np.log10(np.sum(y_ref ** 2) / max(np.sum((y - y_ref) ** 2), 1e-30))
            same = "" if not rtl else (", rtl == sim" if np.array_equal(outs["sim"], outs["rtl"]) else ", RTL DIFFERS")
            print(f"{name} on {n}x{n}: {'folded' if folded else 'not folded'}, {macs} MACs (expected {want}), "
                  f"SQNR {sqnr:.2f} dB{same}")
            if macs != want:
                failures.append(f"{name}/{n}: {macs} MACs, expected {want}")
            if sqnr < 30:
                failures.append(f"{name}/{n}: SQNR {sqnr:.2f} dB < 30 dB")
            if rtl and not np.array_equal(outs["sim"], outs["rtl"]):
                failures.append(f"{name}/{n}: rtl output differs from sim")
    if failures:
        raise SystemExit("FAIL: " + "; ".join(failures))
    print("PASS")


if __name__ == "__main__":
    main()
