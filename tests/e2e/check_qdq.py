#!/usr/bin/python3
"""Quantised models against onnxruntime-node, on the MobileNet-style model.

check_qdq.py qdq-model NPU_COMPILE NPU_RUN DATA_DIR WORKDIR [MODEL [--unfused] [--qoperator]]
    scripts/make_qdq.py turns mobilenet_v3ish.onnx into a QDQ model (uint8 activations,
    int8 per-channel and per-tensor weights, int32 biases, as onnxruntime's quantize_static
    writes them). npu-compile must take every scale from the model and place every operator
    on the NPU; the NPU's logits are compared with onnxruntime-node running the same QDQ model.
    MODEL (default mobilenet_v3ish) names another float model in DATA_DIR (mlp: MatMul and
    Gemm transB weights; convnet: padded convolutions); its inputs are then N(1,1) samples
    of its input shape, off-centre so that the input's zero point is far from the middle of
    the uint8 range (a padded convolution must then correct its border pixels). --unfused:
    the model also rounds between each Conv and its Relu/Clip (make_qdq.py --unfused), which
    the NPU must then keep as a separate step. --qoperator: QLinearConv/QLinearMatMul
    instead of DequantizeLinear -> Conv/MatMul -> QuantizeLinear (make_qdq.py --qoperator).
    MODEL "matmul" is a one-MatMul model (x[4,64] · W[64,32]) written into WORKDIR.
check_qdq.py export NPU_COMPILE NPU_RUN DATA_DIR WORKDIR
    npu-compile --export-qdq writes the float model's quantisation as a QDQ model; its
    logits on onnxruntime-node are compared with the NPU's on the compiled image.

The reference is tests/e2e/qdq_reference.py, a numpy evaluator of the quantised model whose
integer arithmetic is exact and the same on every CPU (its docstring says why). onnxruntime-node
is not the reference: its uint8 x int8 kernels saturate int16 pair sums on CPUs without VNNI,
so its integers depend on the machine. Where the CPU has VNNI (AVX512-VNNI or AVX-VNNI, whose
vpdpbusd accumulates in int32 without saturating) onnxruntime's integer kernels are exact too,
and there the evaluator itself is checked against onnxruntime-node with the same bounds.

Both compare in units of the logits' quantisation step (LSB): the two sides differ only by
rounding rules (the NPU's requantisation rounds half toward +inf with a 32-bit multiplier,
the reference rounds half to even in float), and such a one-step difference in an early layer
can move later values by a few steps. Required in both modes (the rounding points must be
the same on both sides): at least 95% of the outputs equal and none more than 2 LSB off.
The figures are printed either way.
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from qdq_reference import Evaluator

MIN_EQUAL = 0.95
MAX_LSB = 2.0
INPUTS = 4


def sh(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def sqnr(ref, act):
    noise = np.sum((ref.astype(np.float64) - act) ** 2)
    return float("inf") if noise == 0 else 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / noise)


def within_bounds(what, ref, act, step, n_inputs):
    """Prints the comparison in LSB; whether it holds the required bounds."""
    lsb = np.abs(act - ref) / step
    within_one = float(np.mean(lsb <= 1.0 + 1e-3))
    exact = float(np.mean(lsb <= 1e-3))
    print(f"{what}: SQNR {sqnr(ref, act):.2f} dB, {100 * exact:.1f}% of {lsb.size} logits ({n_inputs} inputs) equal, "
          f"{100 * within_one:.1f}% within 1 LSB, max {lsb.max():.2f} LSB (LSB = {step:.4g})")
    return exact >= MIN_EQUAL and lsb.max() <= MAX_LSB + 1e-3


def cpu_has_vnni(npu_run):
    """Whether the CPU has VNNI as programs see it: CPUID, through the functional model's view
    (npu-smi info's "host cpu" line). /proc/cpuinfo can differ from what an emulator (qemu-user
    -cpu Haswell) or a hypervisor exposes to onnxruntime."""
    env = {k: v for k, v in os.environ.items() if k != "NPU_SIM_KERNELS"}
    proc = subprocess.run([os.path.join(os.path.dirname(npu_run), "npu-smi"), "info", "--device", "sim"],
                          capture_output=True, text=True, env=env)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("host cpu")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"FAIL: npu-smi info --device sim printed no host cpu line ({proc.returncode}): {proc.stderr}")
    return any(f in ("AVX-VNNI", "AVX-512-VNNI") for f in line.split()[2:])


def check_reference_against_ort(ort_dir, npu_run, model, inputs, ref, step, work, strict=True):
    """Where onnxruntime's integer kernels are exact (a VNNI CPU), the reference must agree with
    onnxruntime-node within the same bounds; elsewhere says why it is not compared. With
    strict=False the comparison is printed but is not a pass criterion (see the caller)."""
    if not cpu_has_vnni(npu_run):
        print("onnxruntime-node not compared: this CPU has no VNNI, and there its uint8 x int8 kernels "
              "saturate int16 sums (machine-dependent results)")
        return
    if not (shutil.which("node") and os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node"))):
        raise SystemExit("FAIL: onnxruntime-node is not installed, so the reference cannot be checked on this "
                         "VNNI CPU; run scripts/install-deps")
    ort = []
    for k, x in enumerate(inputs):
        path = os.path.join(work, f"ort_logits_{k}.npy")
        # As written: onnxruntime's extended QDQ fusions drop the saturation of a
        # QuantizeLinear whose range the compiler narrowed for a lookup table (a conv output
        # read only by HardSwish is clamped at -3), so the fused graph computes another model.
        sh(["env", "ORT_GRAPH_OPTIMIZATION=basic", "node", os.path.join(ort_dir, "ort_run.js"), model, x, path, "1"])
        ort.append(np.load(path).astype(np.float64))
    if not within_bounds("check of the reference: qdq_reference.py vs onnxruntime-node (VNNI, exact integers)",
                         np.concatenate(ort), ref, step, len(inputs)):
        if strict:
            raise SystemExit("FAIL: the numpy reference disagrees with onnxruntime-node on a VNNI CPU")
        print("  (not a pass criterion for an exported model whose ranges were narrowed for lookup tables: "
              "onnxruntime evaluates it exactly at no optimisation level; 'all' fuses away the saturating "
              "QuantizeLinear, 'basic' and 'disabled' accumulate its convolutions in float32)")


def logits_step(model_path):
    """The scale of the last DequantizeLinear (the one the outputs come through: the logits' LSB)."""
    m = onnx.load(model_path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear"][-1]
    return float(inits[dq.input[1]])


def main():
    mode, npu_compile, npu_run, data, work = sys.argv[1:6]
    model_name = sys.argv[6] if len(sys.argv) > 6 else "mobilenet_v3ish"
    flags = sys.argv[7:]
    if any(f not in ("--unfused", "--qoperator") for f in flags):
        raise SystemExit(f"unknown flags {flags}; use --unfused, --qoperator")
    os.makedirs(work, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ort_dir = os.path.join(root, "scripts", "ort")
    float_model = os.path.join(data, model_name + ".onnx")
    os.makedirs(work, exist_ok=True)
    if model_name == "matmul":
        float_model = os.path.join(work, "matmul.onnx")
        w = np.random.default_rng(3).normal(0, 0.2, (64, 32)).astype(np.float32)
        graph = onnx.helper.make_graph(
            [onnx.helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "matmul",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 64])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 32])],
            [numpy_helper.from_array(w, "w")])
        onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]), float_model)
    calib = os.path.join(work, "calib")
    if model_name == "mobilenet_v3ish":
        inp = os.path.join(data, "mobilenet_input.npy")
        if not os.path.isdir(calib):
            sh(["/usr/bin/python3", os.path.join(root, "scripts", "make_mobilenet.py"), "--calib", calib])
    else:
        dims = [d.dim_value for d in onnx.load(float_model).graph.input[0].type.tensor_type.shape.dim]
        rng = np.random.default_rng(2026)
        for k in range(8):
            os.makedirs(os.path.join(calib, f"sample_{k:02d}"), exist_ok=True)
            np.save(os.path.join(calib, f"sample_{k:02d}", "input_0.npy"), rng.normal(1, 1, dims).astype(np.float32))
        inp = os.path.join(work, "input.npy")
        np.save(inp, rng.normal(1, 1, dims).astype(np.float32))
    image = os.path.join(work, "model.npuimg")
    if mode == "qdq-model":
        reference_model = os.path.join(work, model_name + "_qdq.onnx")
        sh(["/usr/bin/python3", os.path.join(root, "scripts", "make_qdq.py"), float_model, calib, reference_model] +
           flags)
        compiled = sh([npu_compile, reference_model, "-o", image, "--calib", calib])
    elif mode == "export":
        reference_model = os.path.join(work, model_name + "_exported_qdq.onnx")
        compiled = sh([npu_compile, float_model, "-o", image, "--calib", calib, "--export-qdq", reference_model])
    else:
        raise SystemExit(f"unknown mode {mode}; use qdq-model or export")
    placement = re.search(r"(\d+) NPU layer\(s\), (\d+) host operator\(s\)", compiled.stderr)
    if not placement:
        raise SystemExit(f"FAIL: npu-compile did not report the placement:\n{compiled.stderr}")
    print(f"npu-compile: {placement.group(1)} NPU layer(s), {placement.group(2)} host operator(s)")
    if mode == "qdq-model":
        if "keep the model's scales" not in compiled.stderr:
            raise SystemExit(f"FAIL: npu-compile did not take the model's quantisation:\n{compiled.stderr}")
        if placement.group(2) != "0":
            raise SystemExit(f"FAIL: the QDQ model must run entirely on the NPU:\n{compiled.stderr}")
    # The test input and the first calibration samples: more logits, more chances to differ.
    inputs = [inp] + [os.path.join(calib, d, "input_0.npy") for d in sorted(os.listdir(calib))[:INPUTS - 1]]
    evaluator = Evaluator(onnx.load(reference_model))
    npu, ref = [], []
    for k, x in enumerate(inputs):
        out_dir = os.path.join(work, f"npu_{k}")
        sh([npu_run, image, "--device", "sim", "--input", x, "--output-dir", out_dir])
        npu.append(np.load(os.path.join(out_dir, "output_0.npy")).astype(np.float64))
        ref.append(evaluator.run(np.load(x))[0].astype(np.float64))
    if evaluator.float_gemms:
        raise SystemExit(f"FAIL: {evaluator.float_gemms} Conv/MatMul/Gemm of the reference model have operands "
                         f"that are not quantised; the reference evaluates them in float")
    npu, ref = np.concatenate(npu), np.concatenate(ref)
    step = logits_step(reference_model)
    failed = not within_bounds(f"{mode}: NPU vs the numpy QDQ reference (qdq_reference.py) on the same model",
                               ref, npu, step, len(inputs))
    check_reference_against_ort(ort_dir, npu_run, reference_model, inputs, ref, step, work, strict=(mode != "export"))
    if failed:
        raise SystemExit(f"FAIL: required >= {100 * MIN_EQUAL:.0f}% equal and none more than {MAX_LSB:g} LSB off")
    print("PASS")


if __name__ == "__main__":
    main()
