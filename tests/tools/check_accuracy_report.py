#!/usr/bin/python3
"""npu-compile --accuracy-report finds the layer that loses accuracy, and its figures are right.

check_accuracy_report.py NPU_COMPILE NPU_RUN DATA_DIR WORKDIR

1. A model whose Add is calibrated on inputs that cancel (s = -x + small noise, so the sum's
   range is tiny) and reported on independent inputs (the sum spans the whole range): the Add
   must be the worst layer, marked, with clipping as the cause; the model inputs are not
   clipped. The same model calibrated on the report's own distribution marks nothing.
2. The report's model-output SQNR equals the one computed here from npu-run's output of the
   normal image and numpy's float result (within 0.1 dB: the table prints one decimal), and the exposing image reproduces
   the image's outputs bit for bit.
3. MobileNet-style (tests/data): every row has a measured SQNR, and the output's SQNR matches.
4. A conv whose output channels span ranges 64x apart, read by a depthwise conv: the report
   names the spread (on the conv's value, or as the depthwise conv's input) with the median
   channel's SQNR on the per-tensor grid, which numpy reproduces; the probe of 1. (channels
   alike) names none.
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def sh(cmd, expect=0):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != expect:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {proc.returncode} (expected {expect}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def sqnr(ref, act):
    ref = ref.astype(np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - act) ** 2))


def make_model(path, w1, w2):
    """y = Conv(W2, Add(Conv(W1, x), s)): two 1x1 convs around an Add of a second input."""
    c = w1.shape[0]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv_a"),
        helper.make_node("Add", ["c1", "s"], ["sum"], name="add_s"),
        helper.make_node("Conv", ["sum", "w2"], ["y"], name="conv_b"),
    ]
    shape = [1, c, 8, 8]
    graph = helper.make_graph(
        nodes, "accuracy_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def write_samples(root, pairs):
    for k, (x, s) in enumerate(pairs):
        d = os.path.join(root, f"s{k:02d}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input_0.npy"), x)
        np.save(os.path.join(d, "input_1.npy"), s)


def rows(report):
    """value -> (layer, sqnr, drop, clip, marked) from the report's table."""
    out = {}
    for line in report.splitlines():
        m = re.match(r"^(\d+|in|out)\s+(\S+)\s+(.*?)\s+(npu|host)?\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\[", line)
        if m:
            out[m.group(2)] = dict(layer=m.group(3), sqnr=m.group(5), drop=m.group(6), clip=m.group(8),
                                   marked=line.rstrip().endswith("<<"))
    return out


def main():
    npu_compile, npu_run, data, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    c = 16
    w1 = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)  # conv_a: the identity, so c1 = x
    w2 = (rng.standard_normal((c, c, 1, 1)) / 4).astype(np.float32)
    model = os.path.join(work, "probe.onnx")
    make_model(model, w1, w2)
    shape = (1, c, 8, 8)
    normal = lambda: rng.standard_normal(shape).astype(np.float32)

    def cancelling():
        x = normal()
        return x, (-x + 0.02 * normal()).astype(np.float32)

    calib_bad, calib_good, evals = (os.path.join(work, d) for d in ("calib_bad", "calib_good", "eval"))
    write_samples(calib_bad, [cancelling() for _ in range(6)])
    write_samples(calib_good, [(normal(), normal()) for _ in range(6)])
    eval_pairs = [(normal(), normal()) for _ in range(3)]
    write_samples(evals, eval_pairs)

    # 1. The badly calibrated Add is found.
    image = os.path.join(work, "probe_bad.npuimg")
    report = sh([npu_compile, model, "-o", image, "--calib", calib_bad, "--accuracy-report", "--accuracy-inputs", evals])
    print(report)
    r = rows(report)
    for v in ("x", "s", "sum", "y"):
        if v not in r:
            raise SystemExit(f"FAIL: no row for '{v}' in the report")
    if not r["sum"]["marked"] or r["x"]["marked"] or r["s"]["marked"]:
        raise SystemExit("FAIL: the Add 'sum' must be the only marked row before the output")
    worst = report.split("worst layers")[1].splitlines()[1]
    if "add_s" not in worst or "clips" not in worst:
        raise SystemExit(f"FAIL: the worst layer must be add_s, clipping: {worst!r}")
    if float(r["x"]["clip"]) > 0.5 or float(r["s"]["clip"]) > 0.5:
        raise SystemExit("FAIL: the model inputs are calibrated on their own distribution and must not clip")
    if "bit for bit" not in report:
        raise SystemExit("FAIL: the exposing image must reproduce the image's outputs")
    if "channel ranges" in report:
        raise SystemExit("FAIL: the probe's channels have alike ranges; no spread may be named")

    # 2. The output's SQNR is the one npu-run and numpy give.
    ref, act = [], []
    for k, (x, s) in enumerate(eval_pairs):
        out = os.path.join(work, f"run{k}")
        sh([npu_run, image, "--input", os.path.join(evals, f"s{k:02d}", "input_0.npy"),
            "--input", os.path.join(evals, f"s{k:02d}", "input_1.npy"), "--output-dir", out])
        act.append(np.load(os.path.join(out, "output_0.npy")).astype(np.float64))
        ref.append(np.einsum("oc,nchw->nohw", w2[:, :, 0, 0].astype(np.float64), (x + s).astype(np.float64)))
    want = sqnr(np.concatenate(ref), np.concatenate(act))
    got = float(r["y"]["sqnr"])
    print(f"output SQNR: report {got:.2f} dB, npu-run + numpy {want:.2f} dB")
    if abs(got - want) > 0.1:  # the table prints one decimal
        raise SystemExit(f"FAIL: the report's output SQNR {got} dB is not {want:.2f} dB")

    # The same model calibrated like the report's inputs: nothing is marked.
    report = sh([npu_compile, model, "-o", os.path.join(work, "probe_good.npuimg"), "--calib", calib_good,
                 "--accuracy-report", "--accuracy-inputs", evals])
    marked = [v for v, row in rows(report).items() if row["marked"]]
    if marked:
        raise SystemExit(f"FAIL: a well calibrated model marks {marked}:\n{report}")

    # 3. MobileNet-style: every value has a row with a measured SQNR.
    mb_calib = os.path.join(work, "mb_calib")
    for k in range(4):
        d = os.path.join(mb_calib, f"s{k:02d}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input_0.npy"), rng.standard_normal((1, 3, 128, 128)).astype(np.float32))
    report = sh([npu_compile, os.path.join(data, "mobilenet_v3ish.onnx"), "-o", os.path.join(work, "mb.npuimg"),
                 "--calib", mb_calib, "--accuracy-report", "--accuracy-inputs", os.path.join(data, "mobilenet_input.npy")])
    r = rows(report)
    unmeasured = [v for v, row in r.items() if row["sqnr"] == "-"]
    # One row per value the NPU computes: at least one per NPU layer (the compiler fuses lookup
    # tables into the convolutions before them, so the count follows the lowering, not the graph).
    layers = re.search(r"(\d+) NPU layer\(s\)", subprocess.run(
        [npu_compile, os.path.join(data, "mobilenet_v3ish.onnx"), "-o", os.path.join(work, "mb2.npuimg"),
         "--calib", mb_calib], capture_output=True, text=True).stderr)
    if not layers or len(r) < int(layers.group(1)) or unmeasured:
        raise SystemExit(f"FAIL: MobileNet-style: {len(r)} rows for {layers.group(1) if layers else '?'} NPU "
                         f"layers, unmeasured {unmeasured}")
    summary = next(line for line in report.splitlines() if line.startswith("model outputs:"))
    print(f"MobileNet-style: {len(r)} rows; {summary}")

    check_channel_spread(npu_compile, work, rng)
    print("PASS")


def check_channel_spread(npu_compile, work, rng):
    """4. y = DepthwiseConv3x3(Conv1x1(x)) with one output channel of the 1x1 conv 64x the rest."""
    c = 16
    gains = np.ones(c, dtype=np.float32)
    gains[5] = 64.0
    w1 = np.diag(gains).reshape(c, c, 1, 1).astype(np.float32)
    wd = (rng.standard_normal((c, 1, 3, 3)) / 3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["wide"], name="conv_wide"),
         helper.make_node("Conv", ["wide", "wd"], ["y"], name="dw", group=c, pads=[1, 1, 1, 1])],
        "spread_probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(wd, "wd")])
    model = os.path.join(work, "spread.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    calib = os.path.join(work, "spread_calib")
    xs = [rng.standard_normal((1, c, 8, 8)).astype(np.float32) for _ in range(4)]
    for k, x in enumerate(xs):
        d = os.path.join(calib, f"s{k:02d}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "input_0.npy"), x)
    report = sh([npu_compile, model, "-o", os.path.join(work, "spread.npuimg"), "--calib", calib, "--accuracy-report"])
    print(report)
    worst = report.split("worst layers")[1]
    m = re.search(r"channel ranges (\d+)x apart \(widest ([0-9.e+]+), median ([0-9.e+]+)\): "
                  r"the median channel is at ([0-9.-]+) dB", worst)
    if not m:
        raise SystemExit(f"FAIL: the report does not name the spread of 'wide' channels:\n{worst}")
    # numpy: the conv's float output on the samples, its per-tensor grid from the report's row.
    wide = np.concatenate([x * gains.reshape(1, c, 1, 1) for x in xs]).astype(np.float64)
    widest = np.abs(wide).max(axis=(0, 2, 3))
    if abs(float(m.group(2)) - widest.max()) > 0.01 * widest.max() or \
            abs(float(m.group(3)) - np.sort(widest)[c // 2]) > 0.01 * np.sort(widest)[c // 2]:
        raise SystemExit(f"FAIL: widest/median {m.group(2)}/{m.group(3)} are not numpy's "
                         f"{widest.max():.3g}/{np.sort(widest)[c // 2]:.3g}")
    lo, hi = wide.min(), wide.max()
    scale = (hi - lo) / 255
    zp = np.clip(np.round(-128 - lo / scale), -128, 127)
    err = wide - scale * (np.clip(np.round(wide / scale) + zp, -128, 127) - zp)
    per_ch = 10 * np.log10((wide ** 2).sum(axis=(0, 2, 3)) / (err ** 2).sum(axis=(0, 2, 3)))
    want = np.sort(per_ch)[c // 2]
    print(f"channel spread: report median channel {m.group(4)} dB, numpy (min/max grid) {want:.1f} dB")
    if abs(float(m.group(4)) - want) > 2.0:  # the compiler's grid is min/max with a rounded zero point
        raise SystemExit(f"FAIL: the median channel's grid SQNR {m.group(4)} dB is far from numpy's {want:.1f} dB")


if __name__ == "__main__":
    main()
