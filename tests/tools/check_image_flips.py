#!/usr/bin/python3
"""Integrity-checked model images (issue 14): 1,000 random single-byte changes of a valid
image, each run with npu-run, must give 1,000 refusals with CORRUPT_DATA naming the file,
and no run (no output line). Prints the counts; exit 1 unless all 1,000 are refused.

usage: check_image_flips.py NPU_COMPILE NPU_RUN MODEL.onnx WORK_DIR [COUNT]
"""
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys


def main():
    npu_compile, npu_run, model, work = sys.argv[1:5]
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    image = os.path.join(work, "model.npuimg")
    subprocess.run([npu_compile, model, "-o", image], check=True, capture_output=True)
    good = subprocess.run([npu_run, image], capture_output=True, text=True)
    if good.returncode != 0 or "output 0" not in good.stdout:
        print(f"FAIL: the unmodified image does not run ({good.returncode}): {good.stderr.strip()}")
        return 1
    data = open(image, "rb").read()
    rng = random.Random(14)
    cases = [(rng.randrange(len(data)), rng.randrange(1, 256)) for _ in range(count)]

    def run(k):
        pos, xor = cases[k]
        path = os.path.join(work, f"flip_{k}.npuimg")
        flipped = bytearray(data)
        flipped[pos] ^= xor
        with open(path, "wb") as f:
            f.write(flipped)
        p = subprocess.run([npu_run, path], capture_output=True, text=True, errors="replace", timeout=60)
        os.remove(path)
        errors = [line for line in p.stderr.splitlines() if "error:" in line]
        refused = (p.returncode == 1 and len(errors) == 1 and "output 0" not in p.stdout and
                   re.match(r"npu-run: error: CORRUPT_DATA: " + re.escape(path) + ": ", errors[0]) is not None)
        return k, refused, p.returncode, (errors or [p.stderr.strip()])[0]

    refused, ran, other = 0, 0, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for k, ok, rc, line in pool.map(run, range(count)):
            if ok:
                refused += 1
            else:
                ran += rc == 0
                other.append(f"  byte {cases[k][0]} ^ 0x{cases[k][1]:02x}: exit {rc}: {line[:200]}")
    print(f"image {len(data)} bytes, {count} random single-byte changes: {refused} refused with CORRUPT_DATA, "
          f"{ran} ran, {count - refused - ran} other")
    print("\n".join(other[:20]))
    print("PASS" if refused == count else "FAIL")
    return 0 if refused == count else 1


if __name__ == "__main__":
    sys.exit(main())
