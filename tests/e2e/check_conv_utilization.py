#!/usr/bin/python3
"""Conv 3x3 64->64 on 56x56, compiled by npu-compile and run on the RTL: MAC utilisation in
RTL cycles must reach 93% (issue 5 asked for 70%; with the engines overlapping and the conv
lowering double-buffering it is 0.946 at 16x16, 0.883 without the overlap), and the outputs
must match the functional model.

check_conv_utilization.py NPU_COMPILE NPU_RUN WORKDIR
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


def main():
    npu_compile, npu_run, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(1)
    w = rng.normal(0, 0.05, (64, 64, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, (64,)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv3x3", pads=[1, 1, 1, 1])], "conv64",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = os.path.join(work, "conv64.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    inp = os.path.join(work, "input_0.npy")
    np.save(inp, rng.normal(0, 1, (1, 64, 56, 56)).astype(np.float32))
    image = os.path.join(work, "conv64.npuimg")
    sh([npu_compile, model, "-o", image])
    outs = {}
    for dev in ("sim", "rtl"):
        report = json.loads(sh([npu_run, image, "--device", dev, "--input", inp, "--output-dir",
                                os.path.join(work, dev), "--json"]).strip().splitlines()[-1])
        outs[dev] = np.load(os.path.join(work, dev, "output_0.npy"))
        print(f"{dev}: {report['device_cycles']} cycles, MAC utilization {report['mac_utilization']:.3f}")
    if not np.array_equal(outs["sim"], outs["rtl"]):
        raise SystemExit("FAIL: rtl output differs from sim")
    if not report["mac_utilization"] >= 0.93:
        raise SystemExit(f"FAIL: RTL MAC utilization {report['mac_utilization']:.3f} < 0.93 "
                         "(LOAD/STORE no longer overlap the GEMMs?)")
    print("PASS")


if __name__ == "__main__":
    main()
