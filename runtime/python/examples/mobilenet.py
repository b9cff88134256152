#!/usr/bin/env python3
"""Classify with the MobileNet-style model on the NPU: compile the ONNX model on the fly
(calibrated on the given input), run it once blocking, then stream requests through an async
session, and write a Chrome trace of the requests.

usage: mobilenet.py [MODEL.onnx] [INPUT.npy] [--device sim|rtl|accel:N] [--requests N]
                    [--trace FILE.json]
From the repository root after a build:
    PYTHONPATH=build/python runtime/python/examples/mobilenet.py
"""
import argparse
import pathlib
import time

import numpy as np

import npu
from npu.runtime import session

DATA = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("model", nargs="?", default=str(DATA / "mobilenet_v3ish.onnx"))
parser.add_argument("input", nargs="?", default=str(DATA / "mobilenet_input.npy"))
parser.add_argument("--device", default="sim")
parser.add_argument("--requests", type=int, default=64)
parser.add_argument("--trace", default="mobilenet_trace.json")
args = parser.parse_args()

x = np.load(args.input).astype(np.float32)

# 1. A blocking session. An .onnx model is compiled for the device, calibrated on `x`.
with session.create(args.model, device=args.device, calibration=[x]) as sess:
    sess.print_summary()
    logits = sess.run(x)[0].numpy()
    top5 = np.argsort(logits[0])[::-1][:5]
    print("top-5 classes:", ", ".join(f"{c} ({logits[0, c]:.2f})" for c in top5))
    stats = sess.last_stats
    print(f"one request: {stats['total_us']:.0f} us, {stats['device_cycles']} device cycles")

# 2. An async session: submit never blocks while fewer than 8 requests are outstanding;
#    each completion hands back the context it was submitted with.
async_sess, queue = session.create_async(args.model, device=args.device, calibration=[x],
                                         input_queue_size=8, output_queue_size=0)
with npu.runtime.profile(args.trace), async_sess, queue:
    start = time.perf_counter()
    received = 0
    for i in range(args.requests):
        async_sess.submit([x], context=i)
        if i >= 7:  # keep 8 in flight: receive one per submit from then on
            context, outputs = queue.recv()
            received += 1
    async_sess.close()  # no more submits; what is in flight still completes
    for context, outputs in queue:  # until the queue is drained
        received += 1
        assert np.array_equal(outputs[0].numpy(), logits)
    elapsed = time.perf_counter() - start
print(f"{received} async requests: {received / elapsed:.0f} requests/s; trace in {args.trace}")
