#!/usr/bin/python3
"""The tools on bad inputs (issue 14): every row is a command, the exit status it must end
with (0 ok, 1 failure, 2 usage) and a regex its one error line on stderr must match. No
signal, no hang (each row has a time limit), no second error line, no data lost. Prints a
table; exit 1 when a row fails.

usage: check_bad_inputs.py BIN_DIR DATA_DIR WORK_DIR
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np


def conv_model(path, **attrs):
    """Conv 1x4x8x8 -> 2 channels, 3x3, with the given attributes."""
    w = numpy_helper.from_array(np.ones((2, 4, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_bad", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def conv_in_if_model(path):
    """An If whose then-branch holds a Conv with strides=[0,0] (shape inference descends)."""
    w = numpy_helper.from_array(np.ones((2, 4, 3, 3), np.float32), "w")
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])
    branch = lambda s: helper.make_graph(  # noqa: E731
        [helper.make_node("Conv", ["x", "w"], ["y"], name=f"conv_{s[0]}", strides=s)], f"b{s[0]}", [], [out])
    node = helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch([0, 0]), else_branch=branch([1, 1]))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [out], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    bin_dir, data, work = sys.argv[1:4]
    tool = lambda name: os.path.join(bin_dir, name)  # noqa: E731
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "a_dir"))
    w = lambda name: os.path.join(work, name)  # noqa: E731
    conv_model(w("strides0.onnx"), strides=[0, 0])
    conv_model(w("dilations0.onnx"), dilations=[0, 0])
    conv_model(w("kernel_huge.onnx"), kernel_shape=[3, 1 << 20])
    conv_model(w("pads_odd.onnx"), pads=[1, 1, 1])
    conv_model(w("group0.onnx"), group=0)
    conv_in_if_model(w("if_strides0.onnx"))
    shutil.copy(os.path.join(data, "gemm_relu.onnx"), w("m.onnx"))
    os.makedirs(w("sub"))
    os.symlink(w("m.onnx"), w("link.onnx"))
    open(w("empty"), "wb").close()
    with open(w("comments.trace"), "w") as f:
        f.write("# only a comment\n\n   # another\n")
    with open(w("garbage.onnx"), "wb") as f:
        f.write(b"\x08\x07garbage" * 10)
    image = w("gemm_relu.npuimg")
    subprocess.run([tool("npu-compile"), os.path.join(data, "gemm_relu.onnx"), "-o", image], check=True,
                   capture_output=True)
    shutil.copy(image, w("image_copy.npuimg"))
    model_digest = digest(w("m.onnx"))

    root = os.path.dirname(os.path.dirname(os.path.abspath(data)))  # data is tests/data
    mobilenet = os.path.join(data, "mobilenet_v3ish.onnx")
    rows = [
        # name, command, exit status, regex of the error line, time limit in seconds
        ("conv strides=[0,0] (compile)", ["npu-compile", w("strides0.onnx"), "-o", w("x")], 1,
         r"^npu-compile: error: model: .*Conv node 'conv_bad': attribute 'strides' has the value 0, outside 1\.\.", 30),
        ("conv strides=[0,0] (run)", ["npu-run", w("strides0.onnx")], 1,
         r"^npu-run: error: model: .*attribute 'strides' has the value 0", 30),
        ("conv dilations=[0,0]", ["npu-compile", w("dilations0.onnx"), "-o", w("x")], 1,
         r"model: .*attribute 'dilations' has the value 0", 30),
        ("conv kernel_shape 2^20", ["npu-compile", w("kernel_huge.onnx"), "-o", w("x")], 1,
         r"model: .*attribute 'kernel_shape' has the value 1048576", 30),
        ("conv 3 pads", ["npu-compile", w("pads_odd.onnx"), "-o", w("x")], 1,
         r"model: .*'pads' has an odd number of entries", 30),
        ("conv group=0", ["npu-compile", w("group0.onnx"), "-o", w("x")], 1,
         r"model: .*attribute 'group' must be an integer from 1", 30),
        # fuzz_onnx's finding: a rank-3 weight under 2-D pads was a SIGSEGV in ONNX shape inference.
        ("conv weight of rank 3 under 2-D pads", ["npu-compile", os.path.join(root, "compiler", "fuzz", "findings",
                                                   "conv_weight_rank3.onnx"), "-o", w("x")], 1,
         r"^npu-compile: error: model: .*Conv node 'dw2': attributes give 2 spatial axes but weight 'w2' has 1", 30),
        # fuzz_onnx's finding: an opset-1 graph output that no node produces was a SIGSEGV in the
        # ONNX version converter.
        ("opset-1 graph output no node produces", ["npu-compile", os.path.join(root, "compiler", "fuzz", "findings",
                                                   "opset1_undefined_output.onnx"), "-o", w("x")], 1,
         r"^npu-compile: error: model: .*graph output '.*' is not produced by any node, input or initializer", 30),
        ("conv input of rank 4 with a weight of rank 5", ["npu-compile", os.path.join(root, "compiler", "fuzz", "findings",
                                                   "conv_input_rank4_weight_rank5.onnx"), "-o", w("x")], 1,
         r"^npu-compile: error: model: .*input 'x' has rank 4 but weight 'w' has rank 5", 30),
        ("conv strides=[0,0] inside an If branch", ["npu-compile", w("if_strides0.onnx"), "-o", w("x")], 1,
         r"model: .*Conv node 'conv_0': attribute 'strides' has the value 0", 30),
        ("--input-shape x=99999999999,64", ["npu-compile", w("m.onnx"), "-o", w("x"), "--input-shape",
                                            "x=99999999999,64"], 1,
         r"^npu-compile: error: input shape: --input-shape 'x' has dimension 99999999999, more than", 30),
        ("--input-shape x=-4,64", ["npu-compile", w("m.onnx"), "-o", w("x"), "--input-shape", "x=-4,64"], 2,
         r"^npu-compile: error: input shape: .*positive integers", 30),
        ("mobilenet at 4096x4096: fit before calibration",
         ["npu-compile", mobilenet, "-o", w("x"), "--input-shape", "input=1,3,4096,4096"], 1,
         r"^npu-compile: error: model: .*conv '[^']+' .*found before calibration", 30),
        ("mobilenet at 8192x8192: memory before calibration",
         ["npu-compile", mobilenet, "-o", w("x"), "--input-shape", "input=1,3,8192,8192"], 1,
         r"^npu-compile: error: calibration: the float reference run and its samples would need more than 8 GiB "
         r"\(largest value 'conv_1' \[1,16,4096,4096\]\)", 30),
        ("npu-compile m.onnx -o m.onnx", ["npu-compile", w("m.onnx"), "-o", w("m.onnx")], 2,
         r"^npu-compile: error: -o .* is the input model", 30),
        ("npu-compile -o (same file, other path)", ["npu-compile", w("m.onnx"), "-o", w("sub/../m.onnx")], 2,
         r"is the input model", 30),
        ("npu-compile -o (symlink to the model)", ["npu-compile", w("m.onnx"), "-o", w("link.onnx")], 2,
         r"is the input model", 30),
        ("npu-compile --export-qdq over the model", ["npu-compile", w("m.onnx"), "-o", w("x"), "--export-qdq",
                                                     w("m.onnx")], 2, r"--export-qdq .* is the input model", 30),
        ("npu-compile on garbage", ["npu-compile", w("garbage.onnx"), "-o", w("x")], 1,
         r"^npu-compile: error: model: .*not an ONNX model(?!.*recompile)", 30),
        ("npu-compile on an image", ["npu-compile", image, "-o", w("x")], 1,
         r"^npu-compile: error: model: (?!.*(invalid model image|recompile)).*is a model image written by "
         r"npu-compile, not an ONNX model", 30),
        ("npu-compile on a directory", ["npu-compile", w("a_dir"), "-o", w("x")], 1,
         r"^npu-compile: error: model: .*is a directory", 30),
        ("npu-compile --calib missing", ["npu-compile", w("m.onnx"), "-o", w("x"), "--calib", w("nope")], 1,
         r"^npu-compile: error: calibration: --calib .*not a directory", 30),
        ("npu-compile -o unwritable", ["npu-compile", w("m.onnx"), "-o", "/nonexistent/x.npuimg"], 1,
         r"^npu-compile: error: image: /nonexistent/x.npuimg: cannot create file", 60),
        ("npu-replay /dev/zero", ["npu-replay", "/dev/zero"], 1, r"^npu-replay: error: /dev/zero: not a regular file", 10),
        ("npu-replay DIR", ["npu-replay", w("a_dir")], 1, r"^npu-replay: error: .*a_dir: is a directory", 10),
        ("npu-replay empty file", ["npu-replay", w("empty")], 1, r"^npu-replay: error: .*empty: empty file", 10),
        ("npu-replay comments only", ["npu-replay", w("comments.trace")], 1, r"^npu-replay: FAIL .*no commands", 30),
        ("npu-replay missing file", ["npu-replay", w("nope.trace")], 1, r"^npu-replay: error: .*nope.trace: no such file", 10),
        ("npu-sim-diff --programs -1", ["npu-sim-diff", "--programs", "-1"], 2,
         r"^npu-sim-diff: error: --programs '-1' is not a number from 0 to", 10),
        ("npu-sim-diff --programs 2^64", ["npu-sim-diff", "--programs", "18446744073709551616"], 2,
         r"^npu-sim-diff: error: --programs .* is not a number", 10),
        ("npu-run IMAGE --input DIR", ["npu-run", image, "--input", w("a_dir")], 1,
         r"^npu-run: error: .*a_dir: is a directory", 30),
        ("npu-run DIR", ["npu-run", w("a_dir")], 1, r"^npu-run: error: .*a_dir: is a directory", 30),
        ("npu-run /dev/null", ["npu-run", "/dev/null"], 1, r"^npu-run: error: /dev/null: not a regular file", 30),
        ("npu-run empty file", ["npu-run", w("empty")], 1, r"^npu-run: error: .*empty: empty file", 30),
        ("npu-run --output-dir ''", ["npu-run", image, "--output-dir", ""], 2,
         r"^npu-run: error: --output-dir needs a directory", 30),
        ("npu-smi regs write ID notanumber", ["npu-smi", "regs", "--device", "sim", "write", "ID", "notanumber"], 2,
         r"^npu-smi: error: regs write: 'notanumber' is not a number", 30),
        ("npu-smi regs write ID -1", ["npu-smi", "regs", "--device", "sim", "write", "ID", "-1"], 2,
         r"^npu-smi: error: regs write: '-1' is not a number", 30),
        ("npu-bench sim --trace /nonexistent/x.fst", ["npu-bench", "sim", "--trace", "/nonexistent/x.fst"], 1,
         r"^npu-bench: error: cannot write the waveform '/nonexistent/x.fst'", 30),
    ]
    failures = 0
    print(f"{'':4} {'case':44} {'exit':>4} {'want':>4} {'secs':>5}  error line")
    for name, cmd, want_rc, pattern, limit in rows:
        exe = tool(cmd[0])
        if not os.path.exists(exe):
            print(f"skip {name:44} ({cmd[0]} is not built here)")
            continue
        start = time.monotonic()
        try:
            p = subprocess.run([exe] + cmd[1:], capture_output=True, text=True, errors="replace", timeout=limit,
                               stdin=subprocess.DEVNULL)
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired:
            rc, err = "hang", f"(no exit within {limit} s)"
        secs = time.monotonic() - start
        errors = [line for line in err.splitlines() if re.search(r"error:|FAIL", line)]
        line = errors[0] if errors else (err.strip().splitlines() or [""])[-1]
        ok = rc == want_rc and len(errors) == 1 and re.search(pattern, line) is not None
        print(f"{'ok  ' if ok else 'BAD '} {name:44} {rc!s:>4} {want_rc:>4} {secs:5.1f}  {line[:160]}")
        if not ok and len(errors) != 1:
            print(f"     expected exactly one error line, got {len(errors)}:\n     " + "\n     ".join(err.splitlines()[-5:]))
        failures += not ok
    # Never lose data: the model written over must be intact, and no partial image left.
    if digest(w("m.onnx")) != model_digest:
        print("BAD  m.onnx changed")
        failures += 1
    if digest(w("image_copy.npuimg")) != digest(image):
        print("BAD  the image changed")
        failures += 1
    print("PASS" if not failures else f"FAIL: {failures} case(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
