#!/usr/bin/python3
"""npu-run --test-data on broken test directories: every case must end in a clear FAIL (or
UNSUPPORTED) with a JSON line naming the problem, never a crash.

usage: check_bad_inputs.py NPU_RUN DATA_DIR WORK_DIR   (exit 77 = skipped: no test data)
"""
import json
import os
import shutil
import subprocess
import sys


def make_case(src, dst, mutate):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    mutate(dst)
    return dst


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    npu_run, data, work = sys.argv[1:4]
    add, conv = os.path.join(data, "test_add"), os.path.join(data, "test_conv_with_strides_padding")
    if not (os.path.isdir(add) and os.path.isdir(conv)):
        print(f"SKIP: {data} lacks test_add / test_conv_with_strides_padding (libonnx-testdata)")
        return 77
    os.makedirs(work, exist_ok=True)
    ds = "test_data_set_0"
    pb = lambda d, name: os.path.join(d, ds, name)  # noqa: E731
    cases = {
        # name: (source, mutation, text the message must contain)
        "truncated_input": (add, lambda d: write(pb(d, "input_0.pb"), open(pb(d, "input_0.pb"), "rb").read()[:17]), "input_0.pb"),
        "garbage_input": (add, lambda d: write(pb(d, "input_1.pb"), b"\xff" * 64), "input_1.pb"),
        "empty_output": (add, lambda d: write(pb(d, "output_0.pb"), b""), "output_0.pb: empty file"),
        "missing_input": (add, lambda d: os.remove(pb(d, "input_1.pb")), "input_1.pb"),
        "wrong_shape_input": (conv, lambda d: shutil.copy(os.path.join(add, ds, "input_0.pb"), pb(d, "input_0.pb")), "declared"),
        "no_data_sets": (add, lambda d: shutil.rmtree(os.path.join(d, ds)), "test_data_set"),
        "garbage_model": (add, lambda d: write(os.path.join(d, "model.onnx"), b"\x08\x07garbage" * 10), "model.onnx"),
        "missing_model": (add, lambda d: os.remove(os.path.join(d, "model.onnx")), "model.onnx"),
        "wrong_expected_values": (add, lambda d: shutil.copy(pb(d, "input_0.pb"), pb(d, "output_0.pb")), "output 0 'sum'"),
    }
    failures = 0
    for name, (src, mutate, needle) in cases.items():
        d = make_case(src, os.path.join(work, name), mutate)
        p = subprocess.run([npu_run, "--test-data", d, "--json"], capture_output=True, text=True, errors="replace",
                           timeout=120)
        lines = p.stdout.strip().splitlines()
        try:
            report = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            report = None
        ok = (p.returncode in (1, 4) and report is not None and report.get("result") in ("fail", "unsupported")
              and needle in report.get("message", ""))
        print(f"{'ok  ' if ok else 'BAD '} {name}: exit {p.returncode}: {report.get('message') if report else p.stderr[-300:]}")
        failures += not ok
    print("PASS" if not failures else f"FAIL: {failures} case(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
