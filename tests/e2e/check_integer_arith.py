#!/usr/bin/python3
"""ONNX integer Add/Sub/Mul (uint8 and int8, wrapping modulo 256) and uint8 Div (truncating) on
the NPU, bit-exact.

check_integer_arith.py NPU_RUN WORKDIR [--rtl]
    Writes one ONNX backend-test directory (model.onnx, test_data_set_0/input_*.pb,
    output_0.pb) per dtype x operator x shape case into WORKDIR and runs
    `npu-run --test-data DIR --json` on each (--rtl: on the RTL device). Every case must pass
    bit-exact with zero host operators. The shapes are the float operators' broadcasts the
    compiler lowers: equal shapes, b = [N,C,1,1] against a = [N,C,H,W] (per channel), and
    b = [L] against a dense [..., L] (along the last axis). The expected outputs are numpy's
    integer arithmetic, which wraps modulo 256 as ONNX does; the inputs span the whole
    dtype range, and the script checks that most results actually wrap (else a saturating
    NPU would pass too). Div (uint8 only; int8 Div stays on the host) is checked against
    truncating division, on divisors that make it differ from rounding division in many
    lanes; one case has zero divisors, for which the NPU's documented quotient is 255
    (docs/architecture.md §3.1: the host fallback refuses a zero divisor instead).
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

CASES = [  # name, a shape, b shape
    ("same", [3, 4, 5], [3, 4, 5]),
    ("channels", [2, 20, 3, 3], [2, 20, 1, 1]),
    ("last_axis", [4, 37], [37]),
]
DTYPES = {"uint8": (np.uint8, onnx.TensorProto.UINT8), "int8": (np.int8, onnx.TensorProto.INT8)}
OPS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.floor_divide}
DIV_CASES = [  # name, a shape, b shape, zero divisors
    ("same", [3, 4, 5], [3, 4, 5], False),
    ("channels", [2, 20, 3, 3], [2, 20, 1, 1], False),
    ("last_axis", [4, 37], [37], False),
    ("zero_divisors", [6, 50], [6, 50], True),
]


def write_case(work, name, op, dtype, a_shape, b_shape, rng, zero_divisors=False):
    np_type, onnx_type = DTYPES[dtype]
    info = np.iinfo(np_type)
    a = rng.integers(info.min, info.max + 1, a_shape).astype(np_type)
    if op == "Div":
        # Divisors 1..255, small ones often (else most quotients are 0 or 1).
        b = np.minimum(rng.geometric(0.08, b_shape), 255).astype(np_type)
        if zero_divisors:
            b.flat[::7] = 0
        with np.errstate(divide="ignore"):
            y = np.where(b == 0, np.uint8(255), a // np.maximum(b, 1)).astype(np_type)
        # Fraction of lanes where rounding division would differ (the check's power).
        wide = np.round(a.astype(np.float64) / np.maximum(b, 1))
        wrapped = float(np.mean(wide != a // np.maximum(b, 1)))
    else:
        b = rng.integers(info.min, info.max + 1, b_shape).astype(np_type)
        y = OPS[op](a, b)  # numpy integer arithmetic on uint8/int8 wraps modulo 256
        wide = OPS[op](a.astype(np.int64), b.astype(np.int64))
        wrapped = float(np.mean((wide < info.min) | (wide > info.max)))
    assert y.dtype == np_type
    graph = helper.make_graph(
        [helper.make_node(op, ["a", "b"], ["y"], name=op.lower())], name,
        [helper.make_tensor_value_info("a", onnx_type, a_shape),
         helper.make_tensor_value_info("b", onnx_type, b_shape)],
        [helper.make_tensor_value_info("y", onnx_type, list(y.shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                              producer_name="npu check_integer_arith.py")
    onnx.checker.check_model(model)
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, (t, n) in enumerate(((a, "a"), (b, "b"))):
        with open(os.path.join(d, "test_data_set_0", f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t, n).SerializeToString())
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, "y").SerializeToString())
    return d, wrapped


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    npu_run, work = sys.argv[1], sys.argv[2]
    rtl = "--rtl" in sys.argv[3:]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(256)
    failures = []
    cases = [(op, dtype, case, a_shape, b_shape, False)
             for dtype in DTYPES for op in ("Add", "Sub", "Mul") for case, a_shape, b_shape in CASES]
    cases += [("Div", "uint8") + c for c in DIV_CASES]
    for op, dtype, case, a_shape, b_shape, zero_divisors in cases:
        name = f"{op.lower()}_{dtype}_{case}"
        d, wrapped = write_case(work, name, op, dtype, a_shape, b_shape, rng, zero_divisors)
        cmd = [npu_run, "--test-data", d, "--json"] + (["--device", "rtl"] if rtl else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = proc.stdout.strip().splitlines()
        try:
            report = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            report = {"result": f"no JSON (exit {proc.returncode}): {proc.stderr.strip()}"}
        host_ops = report.get("placement", {}).get("host_ops")
        ok = report.get("result") == "pass" and host_ops == 0
        what = "rounding would differ" if op == "Div" else f"results outside {dtype}"
        print(f"{name:26s} {report.get('result')} {report.get('metric', '')} host_ops={host_ops} "
              f"{what}: {100 * wrapped:.0f}%")
        # Random operands: Add/Sub wrap in about a quarter (int8) to a half (uint8) of
        # the lanes, Mul in nearly all; Div truncates where rounding goes up in ~40%.
        if wrapped < 0.1:
            failures.append(f"{name}: only {100 * wrapped:.0f}% of the results test the semantics ({what})")
        if not ok:
            failures.append(f"{name}: {report.get('result')} host_ops={host_ops} {report.get('message', '')}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"PASS: {len(cases)} integer Add/Sub/Mul/Div cases bit-exact with zero host "
          f"operators{' on the RTL' if rtl else ''}")


if __name__ == "__main__":
    main()
