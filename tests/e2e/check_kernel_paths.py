#!/usr/bin/python3
"""A kernel path of the functional model gives the portable path's outputs on model images.

check_kernel_paths.py NPU_COMPILE NPU_RUN DATA_DIR WORKDIR PATH MODEL...

Compiles each MODEL (DATA_DIR/MODEL.onnx) once, then runs the image with npu-run --device sim
under NPU_SIM_KERNELS=portable and NPU_SIM_KERNELS=PATH (sim/include/npu/sim/kernel_paths.h)
and requires every output byte-identical. Random programs (sim_kernel_paths_tests) reach every
instruction; compiled models reach the parameter ranges that real layers use (small zero
points, int32 multipliers, 3x3 windows), which random programs rarely do. When this CPU cannot
run PATH, npu-run must refuse it with "this CPU lacks ..."; the test then exits 77, which ctest
reports as skipped with that line, so every run lists the paths it did not cover. Any other
failure fails. Also checks that an unknown path is refused in one line with a non-zero exit.
"""
import os
import subprocess
import sys

def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def main():
    npu_compile, npu_run, data, work, path = sys.argv[1:6]
    models = sys.argv[6:]
    os.makedirs(work, exist_ok=True)
    inputs = {"mobilenet_v3ish": os.path.join(data, "mobilenet_input.npy")}
    for model in models:
        image = os.path.join(work, model + ".npuimg")
        proc = run([npu_compile, os.path.join(data, model + ".onnx"), "-o", image])
        if proc.returncode != 0:
            raise SystemExit(f"FAIL: npu-compile {model}: {proc.stderr.strip()}")
        outputs = {}
        for p in ("portable", path):
            out_dir = os.path.join(work, f"{model}_{p}")
            cmd = [npu_run, image, "--device", "sim", "--output-dir", out_dir]
            if model in inputs:
                cmd += ["--input", inputs[model]]
            proc = run(cmd, dict(os.environ, NPU_SIM_KERNELS=p, NPU_LOG="quiet"))
            if proc.returncode != 0:
                if "this CPU lacks" in proc.stderr:
                    print(f"SKIP: kernel path {p} not covered on this CPU: {proc.stderr.strip().splitlines()[-1]}")
                    sys.exit(77)
                raise SystemExit(f"FAIL: {model} on kernel path {p}: {proc.stderr.strip()}")
            files = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
            if not files:
                raise SystemExit(f"FAIL: {model} on kernel path {p} wrote no output")
            outputs[p] = {f: open(os.path.join(out_dir, f), "rb").read() for f in files}
        if outputs[path] != outputs["portable"]:
            bad = [f for f in outputs["portable"] if outputs[path].get(f) != outputs["portable"][f]]
            raise SystemExit(f"FAIL: {model}: kernel path {path} differs from portable in {', '.join(bad)}")
        print(f"{model}: {len(outputs[path])} output(s) byte-identical on kernel paths {path} and portable")
    proc = run([npu_run, os.path.join(work, models[0] + ".npuimg"), "--device", "sim"],
               dict(os.environ, NPU_SIM_KERNELS="avx1024"))
    lines = proc.stderr.strip().splitlines()
    if proc.returncode == 0 or len(lines) != 1 or "NPU_SIM_KERNELS=avx1024 is not a kernel path" not in lines[0]:
        raise SystemExit(f"FAIL: NPU_SIM_KERNELS=avx1024 must be refused in one line, got exit {proc.returncode}: "
                         f"{proc.stderr!r}")
    print(f"unknown path refused (exit {proc.returncode}): {lines[0]}")
    print("PASS")


if __name__ == "__main__":
    main()
