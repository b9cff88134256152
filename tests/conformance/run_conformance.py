#!/usr/bin/python3
"""ONNX backend node tests through `npu-run --test-data DIR --json`.

Runs every test directory (in parallel), prints the passed / failed / unsupported counts and
fails only on unexpected results:
  - a failure not listed in the expected-failures file,
  - a listed test that now passes (remove it from the list),
  - a crash, a timeout, or a run without the JSON line.
An "unsupported" result (an operator, dtype or attribute that neither the NPU nor the host
fallback supports) is counted and grouped by reason, never a failure; with
--unsupported-listed it too must be listed in the expected-failures file (the pytorch
directories: every test passes or is listed with its reason).

With --npu-set OPS_FILE it also reports on the NPU operator set: the tests whose graph is
exactly one node of a listed operator (op types read from model.onnx with the onnx package,
not guessed from the test name) are counted as "pass with zero host ops", "pass with host ops"
or "fail" (failed, unsupported or crashed). Every such test that does not pass with zero host
ops must be listed, with its reason, in the --npu-set-fallback file; an unlisted one, or a
listed one that now runs entirely on the NPU, is an unexpected result.
--write-npu-set-fallback FILE writes the current list (known reasons kept, new ones TODO).

Exit status: 0 ok, 1 unexpected results, 77 skipped (no test data; ctest SKIP_RETURN_CODE).
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"


def read_expected(path):
    """test name -> reason, from lines 'test_name  reason' ('#' starts a comment)."""
    expected = {}
    if not path or not os.path.exists(path):
        return expected
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
            if not line:
                continue
            name, _, reason = line.partition(" ")
            expected[name] = reason.strip()
    return expected


def read_op_set(path):
    """Operator names, one per line ('#' starts a comment)."""
    ops = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                ops.add(line)
    return ops


def single_npu_set_op(model_path, op_set):
    """The op type when the model's graph is exactly one default-domain node of op_set."""
    try:
        import onnx  # only needed for the NPU-set report
    except ImportError as e:
        raise SystemExit(f"--npu-set needs the onnx Python package (Debian: python3-onnx): {e}")
    model = onnx.load(model_path, load_external_data=False)
    nodes = model.graph.node
    if len(nodes) != 1 or nodes[0].domain not in ("", "ai.onnx") or nodes[0].op_type not in op_set:
        return None
    return nodes[0].op_type


def npu_set_class(report):
    """'npu' (pass, zero host ops), 'host' (pass with host ops) or 'fail'."""
    if report.get("result") != "pass":
        return "fail"
    placement = report.get("placement", {})
    if report.get("path") == "npu" and placement.get("host_ops", 1) == 0:
        return "npu"
    return "host"


def run_one(npu_run, test_dir, device, timeout):
    cmd = [npu_run, "--test-data", test_dir, "--json"]
    if device:
        cmd += ["--device", device]
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"result": "crash", "message": f"timed out after {timeout} s"}, time.monotonic() - start
    lines = p.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        report = None
    if report is None or p.returncode < 0 or p.returncode not in (0, 1, 4):
        tail = (p.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        report = {"result": "crash", "message": f"exit status {p.returncode}, no JSON result: {tail}"}
    return report, time.monotonic() - start


def reason_key(message):
    """Groups unsupported results: 'operator Loop', or the message without names and paths."""
    m = re.search(r"operator (\S+) \(node", message)
    if m:
        return f"operator {m.group(1)}"
    m = re.search(r"ONNX element type (\d+)", message)
    if m:
        return f"element type {m.group(1)}"
    m = re.search(r"opset (\d+)", message)
    if m:
        return f"opset {m.group(1)}"
    return re.sub(r"'[^']*'|/\S+", "...", message)[:100]


def npu_set_report(args, tests, results):
    """Prints the NPU-set counts; returns the unexpected results."""
    op_set = read_op_set(args.npu_set)
    fallback = read_expected(args.npu_set_fallback)
    classes = {}
    for t in tests:
        op = single_npu_set_op(os.path.join(args.data, t, "model.onnx"), op_set)
        if op:
            classes[t] = (op, npu_set_class(results[t][0]))
    counts = collections.Counter(c for _, c in classes.values())
    print(f"NPU-set node tests (one node of {len(op_set)} NPU-set operators): {len(classes)}")
    print(f"  pass with zero host ops  {counts['npu']}")
    print(f"  pass with host ops       {counts['host']}")
    print(f"  fail                     {counts['fail']}")
    per_op = collections.defaultdict(collections.Counter)
    for op, c in classes.values():
        per_op[op][c] += 1
    print("  by operator (npu/host/fail): " +
          ", ".join(f"{op} {c['npu']}/{c['host']}/{c['fail']}" for op, c in sorted(per_op.items())))
    unexpected = []
    for t, (op, c) in sorted(classes.items()):
        report = results[t][0]
        if args.verbose and c != "npu":
            print(f"  npu-set {c:4s} {t}: {report.get('placement', {})} {report.get('message', '')}")
        if c != "npu" and t not in fallback:
            what = "uses host ops" if c == "host" else "does not pass"
            unexpected.append(f"NPU-SET {t}: {what} ({report.get('placement', {})}, "
                              f"{report.get('message', '') or report.get('result')}); make it run on the NPU "
                              f"or list it with the reason in {args.npu_set_fallback}")
        elif c == "npu" and t in fallback:
            unexpected.append(f"NPU-SET {t}: now passes with zero host ops; remove it from {args.npu_set_fallback}")
    if not args.filter and not args.shard:
        for t in sorted(set(fallback) - set(classes)):
            unexpected.append(f"NPU-SET {t}: listed in {args.npu_set_fallback} but is not a single-operator "
                              f"NPU-set test here; remove it")
    if args.write_npu_set_fallback:
        with open(args.write_npu_set_fallback, "w", encoding="utf-8") as f:
            f.write("# NPU-set ONNX node tests (one node of an operator in npu_set_ops.txt) that do not pass\n")
            f.write("# with zero host operators, with the reason. Format: test_name  reason.\n")
            f.write("# run_conformance.py --npu-set fails on an unlisted test that uses host ops (or fails) and\n")
            f.write("# on a listed test that now runs entirely on the NPU (remove it then).\n")
            for t, (op, c) in sorted(classes.items()):
                if c != "npu":
                    reason = fallback.get(t) or f"TODO ({c}): {results[t][0].get('message', '')}"
                    f.write(f"{t}  {reason}\n")
        print(f"wrote {args.write_npu_set_fallback}")
    return unexpected


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--npu-run", required=True, help="the npu-run binary")
    ap.add_argument("--data", default=DEFAULT_DATA, help="directory of test_* directories")
    ap.add_argument("--expected", help="expected-failures file")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--device", default="", help="passed to npu-run --device")
    ap.add_argument("--filter", default="", help="regular expression on test names")
    ap.add_argument("--shard", default="", metavar="K/N",
                    help="only every N-th test from the K-th (0-based) of the sorted, filtered list")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per test")
    ap.add_argument("--verbose", action="store_true", help="print every test's result")
    ap.add_argument("--npu-set", metavar="OPS_FILE", help="NPU operator set: report its single-operator tests")
    ap.add_argument("--npu-set-fallback", metavar="FILE",
                    help="NPU-set tests allowed not to pass with zero host ops, with the reason")
    ap.add_argument("--write-npu-set-fallback", metavar="FILE",
                    help="write the NPU-set tests that do not pass with zero host ops (keeps known reasons)")
    ap.add_argument("--unsupported-listed", action="store_true",
                    help="an unsupported result must be listed in the expected-failures file too")
    ap.add_argument("--write-expected", metavar="FILE",
                    help="write the current failures as an expected-failures file (keeps known reasons)")
    args = ap.parse_args()

    if not os.path.isdir(args.data):
        print(f"SKIP: {args.data} does not exist; install the Debian package libonnx-testdata")
        return 77
    tests = sorted(d for d in os.listdir(args.data)
                   if os.path.isfile(os.path.join(args.data, d, "model.onnx")) and re.search(args.filter, d))
    if args.shard:
        m = re.fullmatch(r"(\d+)/(\d+)", args.shard)
        if not m or not int(m.group(1)) < int(m.group(2)):
            ap.error(f"--shard {args.shard}: give K/N with 0 <= K < N, e.g. 3/8")
        tests = tests[int(m.group(1))::int(m.group(2))]
    if not tests:
        print(f"SKIP: no test directories under {args.data} match '{args.filter}'" + (f" in shard {args.shard}" if args.shard else ""))
        return 77
    expected = read_expected(args.expected)

    start = time.monotonic()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, args.npu_run, os.path.join(args.data, t), args.device, args.timeout): t
                   for t in tests}
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()
    elapsed = time.monotonic() - start

    counts = collections.Counter()
    host_only = npu = 0
    unexpected = []
    unsupported = collections.Counter()
    for t in tests:
        report, secs = results[t]
        res = report.get("result", "crash")
        msg = report.get("message", "")
        counts[res] += 1
        placement = report.get("placement", {})
        if res in ("pass", "fail"):
            if placement.get("npu_ops", 0) > 0:
                npu += 1
            else:
                host_only += 1
        if args.verbose:
            print(f"{res:11s} {secs:6.2f}s {t}: {report.get('metric', '')} {placement} {msg}")
        if res == "unsupported":
            unsupported[reason_key(msg)] += 1
            if args.unsupported_listed and t not in expected:
                unexpected.append(f"UNSUPPORTED {t}: {msg}; support it or list it with the reason in {args.expected}")
        elif res == "fail" and t not in expected:
            unexpected.append(f"FAIL  {t}: {msg}")
        elif res == "pass" and t in expected:
            unexpected.append(f"XPASS {t}: now passes; remove it from {args.expected}")
        elif res == "crash":
            unexpected.append(f"CRASH {t}: {msg}")
    stale = [] if args.shard else sorted(set(expected) - set(tests))

    print(f"ONNX node tests in {args.data}: {len(tests)} run in {elapsed:.1f} s with {args.jobs} job(s)")
    print(f"  passed       {counts['pass']}")
    print(f"  failed       {counts['fail']} ({sum(1 for t in tests if results[t][0].get('result') == 'fail' and t in expected)} expected)")
    print(f"  unsupported  {counts['unsupported']}")
    if counts["crash"]:
        print(f"  crashed      {counts['crash']}")
    print(f"  placement of the passed/failed ones: {host_only} host-only, {npu} with NPU operators")
    if unsupported:
        print("unsupported, by reason:")
        for reason, n in unsupported.most_common():
            print(f"  {n:4d}  {reason}")
    for s in stale:
        print(f"note: {s} is listed in {args.expected} but is not a test here")
    if args.write_expected:
        with open(args.write_expected, "w", encoding="utf-8") as f:
            f.write("# ONNX backend node tests expected to FAIL through npu-run --test-data, with the reason.\n")
            f.write("# Format: test_name  reason. A listed test that passes fails the suite (remove it then).\n")
            f.write("# Regenerate with run_conformance.py --write-expected FILE (known reasons are kept). NPU-path\n")
            f.write("# failures depend on the compiler's partitioning and move with it.\n")
            for t in tests:
                report = results[t][0]
                if report.get("result") == "fail" or (args.unsupported_listed and report.get("result") == "unsupported"):
                    reason = expected.get(t) or report.get("message", "")
                    f.write(f"{t}  {reason}\n")
        print(f"wrote {args.write_expected}")
    if args.npu_set:
        unexpected += npu_set_report(args, tests, results)
    if unexpected:
        print(f"{len(unexpected)} unexpected result(s):")
        for u in unexpected:
            print("  " + u)
        return 1
    print("conformance: OK (no unexpected results)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
