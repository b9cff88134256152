#!/usr/bin/python3
"""The conventions every tool shares (docs/architecture.md §7), for one tool:

  usage  an unknown option, a missing argument or value, a --device that is no device: exit 2,
         nothing on stdout, exactly one line on stderr, "TOOL: error: ..." naming the problem
         (and, for what CLI11 finds, "; see TOOL --help").
  json   --json: the last stdout line parses as JSON (json.loads) and has the keys and values
         the tool documents.

usage: check_conventions.py usage TOOL_PATH
       check_conventions.py json TOOL_PATH DATA_DIR WORK_DIR
Prints one row per case; exit 1 when a case fails.
"""
import json
import os
import re
import shutil
import subprocess
import sys

TIMEOUT = 120


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


# Per tool: (arguments, regex of the one stderr line). Every row must exit 2.
NO_SUCH = "--no-such-option"
UNKNOWN = r"unknown option '--no-such-option'; see {cmd} --help$"
USAGE = {
    "npu-compile": [
        ([NO_SUCH], UNKNOWN.format(cmd="npu-compile")),
        (["m.onnx", "-o", "x", NO_SUCH], UNKNOWN.format(cmd="npu-compile")),
        ([], r"MODEL\.onnx is required; see npu-compile --help$"),
        (["m.onnx"], r"-o is required; see npu-compile --help$"),
        (["m.onnx", "-o"], r"-o: .*missing; see npu-compile --help$"),
        (["m.onnx", "-o", "x", "--array", "12"], r"--array must be 8, 16 or 32$"),
        (["m.onnx", "-o", "x", "--weight-rounding", "best"], r"--weight-rounding best: unknown; use nearest or gptq$"),
        (["m.onnx", "-o", "x", "--device", "sim"], r"--device is where --accuracy-report runs"),
    ],
    "npu-run": [
        ([NO_SUCH], UNKNOWN.format(cmd="npu-run")),
        (["m.onnx", NO_SUCH], UNKNOWN.format(cmd="npu-run")),
        ([], r"no model given"),
        (["m.onnx", "--iterations"], r"--iterations: .*missing; see npu-run --help$"),
        (["m.onnx", "--iterations", "0"], r"--iterations '0' is not a number from 1 to"),
        (["m.onnx", "--input-shape", "x"], r"--input-shape expects NAME=D0,D1,\.\.\."),
        (["m.onnx", "--device", "gpu"], r"'gpu' is not a device: use sim, rtl, accel:N or /dev/accel/accelN"),
        (["--test-data"], r"--test-data: .*missing; see npu-run --help$"),
        (["--test-data", "d", "--input", "x.npy"], r"'--input' does not go with --test-data"),
        (["m.onnx", "--host"], r"--host is for --test-data"),
    ],
    "npu-smi": [
        ([NO_SUCH], UNKNOWN.format(cmd="npu-smi")),
        (["info", NO_SUCH], UNKNOWN.format(cmd="npu-smi info")),
        ([], r"name a command: list, info, regs, reset or selftest"),
        (["info", "--device"], r"--device: .*missing; see npu-smi info --help$"),
        (["info", "--device", "gpu"], r"'gpu' is not a device"),
        (["frobnicate"], r"unexpected argument 'frobnicate'; see npu-smi --help$"),
        (["regs", "--device", "sim", "read"], r"regs takes nothing, read REG or write REG VALUE"),
        (["regs", "--device", "sim", "read", "NO_SUCH_REG"], r"'NO_SUCH_REG' is not a register"),
    ],
    "npu-replay": [
        ([NO_SUCH], UNKNOWN.format(cmd="npu-replay")),
        (["t.trace", NO_SUCH], UNKNOWN.format(cmd="npu-replay")),
        ([], r"TRACE is required; see npu-replay --help$"),
        (["t.trace", "--device"], r"--device: .*missing; see npu-replay --help$"),
        (["t.trace", "--device", "gpu"], r"'gpu' is not a device"),
        (["t.trace", "--device", "sim", "--trace", "w.fst"], r"--trace \(FST waveform\) needs --device rtl"),
    ],
    "npu-sim-diff": [
        ([NO_SUCH], UNKNOWN.format(cmd="npu-sim-diff")),
        (["--programs"], r"--programs: .*missing; see npu-sim-diff --help$"),
        (["--seed", "-1"], r"--seed '-1' is not a number from 0 to 2\^64-1$"),
        (["--array", "7"], r"--array must be 8, 16 or 32$"),
        (["stray"], r"unexpected argument 'stray'; see npu-sim-diff --help$"),
    ],
    "npu-bench": [
        ([NO_SUCH], UNKNOWN.format(cmd="npu-bench")),
        (["sim", NO_SUCH], UNKNOWN.format(cmd="npu-bench sim")),
        (["model", "m.onnx", NO_SUCH], UNKNOWN.format(cmd="npu-bench model")),
        ([], r"name a mode: npu-bench sim or npu-bench model"),
        (["model"], r"IMAGE_OR_ONNX is required; see npu-bench model --help$"),
        (["model", "m.onnx", "--concurrency", "2000"], r"--concurrency '2000' is not a number from 1 to 1024$"),
        (["model", "m.npuimg", "--compare-ort"], r"--compare-ort needs the ONNX model"),
        (["model", "m.onnx", "--device", "gpu"], r"'gpu' is not a device"),
        (["sim", "--kernels", "fft"], r"unknown kernel 'fft': use conv, matmul or depthwise$"),
    ],
}


def check_usage(exe):
    tool = os.path.basename(exe)
    failures = 0
    for args, pattern in USAGE[tool]:
        rc, out, err = run([exe] + args)
        lines = err.splitlines()
        ok = (rc == 2 and not out and len(lines) == 1 and lines[0].startswith(f"{tool}: error: ")
              and re.search(pattern, lines[0]) is not None)
        print(f"{'ok ' if ok else 'BAD'} {tool} {' '.join(args):48} exit {rc}  {err.strip()[:150]!r}")
        if not ok and out:
            print(f"    stdout (should be empty): {out[:200]!r}")
        failures += not ok
    return failures


def dynamic_model(path):
    """MatMul x[n,8] by an 8x4 weight, then Relu: a batch dimension left dynamic."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"], name="mm"), helper.make_node("Relu", ["t"], ["y"], name="relu")],
        "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def last_json(cmd):
    rc, out, err = run(cmd)
    if rc != 0:
        raise AssertionError(f"exit {rc}: {err.strip()[-300:]}")
    lines = out.strip().splitlines()
    if not lines:
        raise AssertionError("no stdout")
    return json.loads(lines[-1])


def expect(obj, keys):
    missing = [k for k in keys if k not in obj]
    if missing:
        raise AssertionError(f"missing keys {missing} in {sorted(obj)}")


def json_cases(exe, data, work):
    tool = os.path.basename(exe)
    gemm = os.path.join(data, "gemm_relu.onnx")
    image = os.path.join(work, "gemm_relu.npuimg")
    bin_dir = os.path.dirname(exe)

    def compile_image():
        if not os.path.exists(image):
            subprocess.run([os.path.join(bin_dir, "npu-compile"), gemm, "-o", image], check=True,
                           capture_output=True)

    def npu_compile():
        j = last_json([exe, gemm, "-o", image, "--json"])
        expect(j, ["model", "image", "bytes", "array_dim", "inputs", "outputs", "npu_steps", "host_steps",
                   "macs", "predicted_cycles", "layers"])
        assert j["bytes"] == os.path.getsize(image), (j["bytes"], os.path.getsize(image))
        assert j["inputs"][0]["name"] == "x" and j["inputs"][0]["shape"] == [4, 64], j["inputs"]
        assert j["npu_steps"] >= 1 and j["macs"] == 4 * 64 * 32, j
        assert all(l["on"] in ("npu", "host") for l in j["layers"]) and j["layers"], j["layers"]

    def npu_run_image():
        compile_image()
        j = last_json([exe, image, "--iterations", "3", "--device", "sim", "--json"])
        expect(j, ["model", "device", "platform", "array_dim", "iterations", "random_inputs", "outputs",
                   "latency_us", "device_cycles", "device_us", "predicted_cycles", "macs", "mac_utilization"])
        assert j["device"] == "sim" and j["iterations"] == 3 and j["random_inputs"] is True, j
        expect(j["latency_us"], ["p50", "p90", "p99"])
        assert j["outputs"][0]["shape"] == [4, 32] and j["device_cycles"] > 0, j

    def npu_run_input_shape():
        dyn = os.path.join(work, "dynamic_batch.onnx")
        dynamic_model(dyn)
        for n in (3, 5):
            j = last_json([exe, dyn, "--input-shape", f"x={n},8", "--json"])
            assert j["outputs"][0]["shape"] == [n, 4], (n, j["outputs"])

    def npu_run_image_input_shape():
        compile_image()
        rc, out, err = run([exe, image, "--input-shape", "x=4,64"])
        assert rc == 2 and "is a model image; give --input-shape to npu-compile" in err, (rc, err)

    def npu_bench_model():
        j = last_json([exe, "model", gemm, "--iterations", "5", "--warmup", "1", "--concurrency", "2", "--json"])
        expect(j, ["model", "device", "platform", "array_dim", "iterations", "warmup", "rounds", "latency_us",
                   "throughput", "device_cycles", "predicted_cycles", "macs", "mac_utilization", "host_us"])
        assert j["iterations"] == 5 and j["warmup"] == 1 and j["throughput"]["concurrency"] == 2, j
        expect(j["host_us"], ["copy_in", "queue", "device", "host_steps", "copy_out"])

    def npu_bench_sim():
        j = last_json([exe, "sim", "--kernels", "matmul", "--json"])
        expect(j, ["array_dim", "rtl_cycles_per_s", "rtl_cycles_per_cpu_s", "kernels"])
        k = j["kernels"][0]
        expect(k, ["name", "rtl_cycles", "model_cycles", "mac_utilization", "model_macs_per_s", "macs",
                   "rtl_supported", "rtl_status", "verified"])
        assert len(j["kernels"]) == 1 and k["name"].startswith("matmul") and k["verified"] is True, j

    def npu_smi():
        j = last_json([exe, "list", "--json"])
        assert any(d["device"] == "sim" and d["status"] == "ok" for d in j["devices"]), j
        j = last_json([exe, "info", "--device", "sim", "--json"])
        expect(j, ["device", "driver", "platform", "fingerprint", "array_dim", "clock_mhz", "memory", "counters"])
        assert j["platform"] == "functional" and j["device"] == "sim", j
        j = last_json([exe, "--device", "sim", "regs", "read", "ID", "--json"])
        assert j["offset"] == 0 and j["value"] != 0, j
        j = last_json([exe, "selftest", "-d", "sim", "--json"])
        assert j["passed"] is True and [e["engine"] for e in j["engines"]] == ["LOAD", "STORE", "GEMM", "VEC"], j

    def npu_replay():
        trace = os.path.join(os.path.dirname(os.path.abspath(data)), "replay", "identity.trace")
        j = last_json([exe, trace, "--device", "sim", "--json"])
        expect(j, ["trace", "device", "commands", "passed", "failure", "device_cycles"])
        assert j["passed"] is True and j["commands"] > 0 and j["failure"] == "", j

    def npu_sim_diff():
        j = last_json([exe, "--programs", "3", "--seed", "7", "--json"])
        expect(j, ["programs", "array_dim", "matched", "errors", "vec_completed", "rtl_cycles_per_s"])
        assert j["programs"] == 3 and j["matched"] is True, j

    return {
        "npu-compile": [npu_compile],
        "npu-run": [npu_run_image, npu_run_input_shape, npu_run_image_input_shape],
        "npu-bench": [npu_bench_model, npu_bench_sim],
        "npu-smi": [npu_smi],
        "npu-replay": [npu_replay],
        "npu-sim-diff": [npu_sim_diff],
    }[tool]


def check_json(exe, data, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = 0
    for case in json_cases(exe, data, work):
        try:
            case()
            print(f"ok  {case.__name__}")
        except (AssertionError, ValueError, KeyError, TypeError, IndexError, subprocess.SubprocessError) as e:
            print(f"BAD {case.__name__}: {type(e).__name__}: {e}")
            failures += 1
    return failures


def main():
    mode, exe = sys.argv[1:3]
    failures = check_usage(exe) if mode == "usage" else check_json(exe, *sys.argv[3:5])
    print("PASS" if not failures else f"FAIL: {failures} case(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
