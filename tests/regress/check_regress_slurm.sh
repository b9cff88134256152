#!/usr/bin/env bash
# scripts/slurm-one-node check_regress_slurm.sh REGRESS BUILD_DIR
# Inside a one-node Slurm cluster (scripts/slurm-one-node starts it in a temporary directory,
# exports SLURM_CONF and stops it whatever happens), runs a small sim-diff regression through
# Slurm and locally with the same seeds, and checks that
#   - both pass and write the same summary.json (all but its "run" key) and a JUnit file,
#   - a failure injected into one shard makes both exit 1 naming that shard and the command
#     that reproduces it, and that command fails on its own too,
#   - bad arguments exit 2 with one line.
set -euo pipefail
REGRESS=$1
BUILD=$2
PROGRAMS=${REGRESS_TEST_PROGRAMS:-8}
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -n "${SLURM_CONF:-}" ] || fail "no SLURM_CONF; run me as scripts/slurm-one-node $0 REGRESS BUILD_DIR"
T=$(mktemp -d /tmp/npu-regress-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
sinfo -h -o '%t' | grep -qE '^(idle|mix|alloc)' || fail "the cluster of $SLURM_CONF is not up: $(sinfo -h 2>&1 | head -n 1)"

SMALL=(sim-diff --build "$BUILD" --shards 4 --seeds 4 --programs "$PROGRAMS")
same_summary() {  # same_summary A B: the summaries agree on all but "run"
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
strip = lambda s: {k: v for k, v in s.items() if k != "run"}
if strip(a) != strip(b):
    for k in sorted(set(a) | set(b)):
        if k != "run" and a.get(k) != b.get(k):
            print(f"summaries differ in {k!r}:\n  {json.dumps(a.get(k))[:600]}\n  {json.dumps(b.get(k))[:600]}")
    sys.exit(1)
modes = (a["run"].get("mode"), b["run"].get("mode"))
if modes != ("local", "slurm"):
    sys.exit(f"run modes are {modes}, not (local, slurm)")
if not b["run"].get("slurm_array_job"):
    sys.exit("the Slurm summary names no array job")
print(f"summaries agree: {a['counts']}, digest {a['digest'][:16]}")
EOF
}
run() {  # run NAME EXPECTED_RC ARGS...: runs scripts/regress, keeps its output in $T/NAME.txt
  local name=$1 want=$2; shift 2
  local rc=0
  "$REGRESS" "$@" >"$T/$name.txt" 2>&1 || rc=$?
  cat "$T/$name.txt"
  [ "$rc" -eq "$want" ] || fail "scripts/regress $* exited $rc, expected $want"
}

# --- the same regression locally and through Slurm
run local 0 "${SMALL[@]}" -j 2 --out "$T/local"
run slurm 0 "${SMALL[@]}" --slurm -j 2 --time 10 --sbatch-arg=--nice=0 --out "$T/slurm"
grep -qF -- '--shard "$SLURM_ARRAY_TASK_ID"' "$T/slurm/slurm/array.sh" || fail "the array script does not pick the shard by task id"
grep -q 'slurm: .* shards done' "$T/slurm.txt" || fail "no progress from squeue in the Slurm run"
[ -s "$T/slurm/slurm/shard-3.out" ] || fail "no Slurm output file of array task 3"
same_summary "$T/local/summary.json" "$T/slurm/summary.json"
for d in local slurm; do
  /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E
n = len(list(E.parse(sys.argv[1]).getroot().iter("testcase")))
sys.exit(0 if n == 4 else f"{sys.argv[1]}: {n} test cases, expected 4")' "$T/$d/junit.xml"
done

# --- a failing shard: both modes exit 1 and name shard 2 and its reproducing command
run local-fail 1 "${SMALL[@]}" --inject-failure 2 -j 2 --out "$T/local-fail"
run slurm-fail 1 "${SMALL[@]}" --inject-failure 2 --slurm --out "$T/slurm-fail"
for name in local-fail slurm-fail; do
  grep -q '^FAIL: shard 2, case injected-failure.shard2' "$T/$name.txt" || fail "$name: the failing shard 2 is not named"
  grep -q "reproduce the shard: .*--inject-failure 2 --shard 2\$" "$T/$name.txt" || fail "$name: no reproducing command"
done
same_summary "$T/local-fail/summary.json" "$T/slurm-fail/summary.json"
grep -q '<failure' "$T/slurm-fail/junit.xml" || fail "junit.xml of the failing run has no failure"
repro=$(sed -n 's/^  reproduce the shard: //p' "$T/slurm-fail.txt")
rc=0
eval "$repro --out $T/repro" >"$T/repro.txt" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "the reproducing command exited $rc, expected 1: $repro"
grep -q '"status": "fail"' "$T/repro/shard-2/status.json" || fail "the reproduced shard 2 did not record its failure"

# --- a shard that never wrote its status (killed, node lost) is a failed shard
rm "$T/slurm/shard-1/status.json"
rc=0
"$REGRESS" --merge "$T/slurm" >"$T/merge.txt" 2>&1 || rc=$?
cat "$T/merge.txt"
[ $rc -eq 1 ] || fail "the merge of a run without shard 1's status exited $rc, expected 1"
grep -q '^FAIL: shard 1: no status.json' "$T/merge.txt" || fail "the merge does not name shard 1 as unfinished"

# --- bad arguments: exit 2, one line naming the problem
for bad in "sim-diff --shards 0" "--slurm sim-diff" "sim-diff --build $BUILD --shard 9 --shards 4" "nosuchsuite" "sim-diff --mem 1G"; do
  rc=0
  # shellcheck disable=SC2086
  out=$("$REGRESS" $bad 2>&1) || rc=$?
  [ $rc -eq 2 ] || fail "scripts/regress $bad exited $rc, expected 2"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "scripts/regress $bad printed more than one line: $out"
  echo "bad arguments ($bad): $out"
done

echo PASS
