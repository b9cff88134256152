#!/usr/bin/python3
"""The MobileNet-style model end to end: compiled with calibration, run with npu-run on the
functional model (and the RTL with --rtl), compared with onnxruntime-node (the external
reference) when it is installed (scripts/install-deps does that).

check_mobilenet.py NPU_COMPILE NPU_RUN DATA_DIR WORKDIR [--rtl]
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np


def sh(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def sqnr(ref, act):
    noise = np.sum((ref.astype(np.float64) - act) ** 2)
    return float("inf") if noise == 0 else 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / noise)


def main():
    npu_compile, npu_run, data, work = sys.argv[1:5]
    with_rtl = "--rtl" in sys.argv
    os.makedirs(work, exist_ok=True)
    model = os.path.join(data, "mobilenet_v3ish.onnx")
    image = os.path.join(work, "mobilenet.npuimg")
    inp = os.path.join(data, "mobilenet_input.npy")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    calib = os.path.join(work, "calib")
    if not os.path.isdir(calib):
        sh(["/usr/bin/python3", os.path.join(root, "scripts", "make_mobilenet.py"), "--calib", calib])
    sh([npu_compile, model, "-o", image, "--calib", calib])
    outs = {}
    for dev in ["sim"] + (["rtl"] if with_rtl else []):
        out_dir = os.path.join(work, dev)
        report = json.loads(sh([npu_run, image, "--device", dev, "--input", inp, "--output-dir", out_dir,
                                "--json"]).strip().splitlines()[-1])
        outs[dev] = np.load(os.path.join(out_dir, "output_0.npy"))
        print(f"{dev}: logits {outs[dev].shape}, device_cycles {report['device_cycles']}, "
              f"mac_utilization {report['mac_utilization']:.3f}")
    if with_rtl:
        if not np.array_equal(outs["sim"], outs["rtl"]):
            raise SystemExit("FAIL: rtl logits differ from sim")
        print("rtl: bit-identical to sim")
    ort_dir = os.path.join(root, "scripts", "ort")
    if shutil.which("node") and os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node")):
        ref_path = os.path.join(work, "ort_logits.npy")
        sh(["node", os.path.join(ort_dir, "ort_run.js"), model, inp, ref_path, "1"])
        db = sqnr(np.load(ref_path), outs["sim"])
        print(f"SQNR vs onnxruntime-node: {db:.2f} dB (required >= 25 dB)")
        if not db >= 25.0:
            raise SystemExit(f"FAIL: SQNR {db:.2f} dB < 25 dB")
    else:
        print("onnxruntime-node is not installed (scripts/install-deps installs it): SQNR check skipped")
    print("PASS")


if __name__ == "__main__":
    main()
