#!/usr/bin/env bash
# check_regress_slurm.sh REGRESS BUILD_DIR
# Starts a one-node Slurm cluster (munged, slurmctld, slurmd) in a temporary directory, runs a
# small sim-diff regression through it and locally with the same seeds, and checks that
#   - both pass and write the same summary.json (all but its "run" key) and a JUnit file,
#   - a failure injected into one shard makes both exit 1 naming that shard and the command
#     that reproduces it, and that command fails on its own too,
#   - bad arguments exit 2 with one line.
# The daemons' PIDs are recorded and they are stopped whatever happens; at the end no daemon
# of this cluster (nor a slurmstepd) may be left running. Needs root (as CI runs) and the
# Debian packages slurm-wlm and munge; without them it fails with that reason.
set -euo pipefail
REGRESS=$1
BUILD=$2
PROGRAMS=${REGRESS_TEST_PROGRAMS:-8}

fail() { echo "FAIL: $*" >&2; exit 1; }
for exe in munged slurmctld slurmd sbatch squeue sinfo scancel; do
  command -v "$exe" >/dev/null || fail "$exe not found; install the Debian packages slurm-wlm and munge (scripts/install-deps)"
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the one-node Slurm cluster runs its daemons as root (CI runs as root)"; exit 77; }

T=$(mktemp -d /tmp/npu-regress-slurm.XXXXXX)
chmod 700 "$T"
PIDS=()
stop_daemons() {  # TERM, up to 5 s, then KILL; job steps outlive slurmd (ours are the only ones)
  local pid alive
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet --user=root >/dev/null 2>&1
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}" $(pgrep -x slurmstepd); do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  return 0
}
on_exit() {
  local rc=$?
  set +e
  stop_daemons
  if [ $rc -ne 0 ]; then
    for log in slurmctld.log slurmd.log munged.log; do
      [ -f "$T/$log" ] && { echo "--- tail of $log"; tail -n 15 "$T/$log"; }
    done
  fi
  rm -rf "$T"
  exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# --- munge, with its own key and socket
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge.key"
munged --foreground --force --socket="$T/munge.sock" --key-file="$T/munge.key" --pid-file="$T/munged.pid" \
  --log-file="$T/munged.log" --seed-file="$T/munged.seed" >"$T/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$T/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge.sock" ] || fail "munged did not create its socket (see munged.log)"

# --- slurm.conf: one node, CPUs=2, nothing outside $T
read -r CTLD_PORT SLURMD_PORT < <(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
NODE=$(hostname -s)
mkdir -p "$T/state" "$T/spool"
cat > "$T/slurm.conf" <<EOF
ClusterName=npu-regress-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge.sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$T/jobcomp.txt
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=regress Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -f "$SLURM_CONF" -N "$NODE" >"$T/slurmd.out" 2>&1 &
PIDS+=($!)
up=0
for _ in $(seq 100); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then up=1; break; fi
  sleep 0.2
done
[ $up -eq 1 ] || fail "the one-node cluster did not come up in 20 s: $(sinfo -h 2>&1 | head -1)"
echo "cluster up: node $NODE, daemons ${PIDS[*]}, SLURM_CONF=$SLURM_CONF"

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
run slurm 0 "${SMALL[@]}" --slurm --time 10 --sbatch-arg=--nice=0 --out "$T/slurm"
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

# --- bad arguments: exit 2, one line naming the problem
for bad in "sim-diff --shards 0" "sim-diff --build $BUILD --shard 9 --shards 4" "nosuchsuite" "sim-diff --mem 1G"; do
  rc=0
  # shellcheck disable=SC2086
  out=$("$REGRESS" $bad 2>&1) || rc=$?
  [ $rc -eq 2 ] || fail "scripts/regress $bad exited $rc, expected 2"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "scripts/regress $bad printed more than one line: $out"
  echo "bad arguments ($bad): $out"
done

# --- stop the cluster, then check that nothing of it is left
set +e
stop_daemons
set -e
running() {  # processes of this cluster, or any job step, that are not zombies
  local pid
  for pid in $( (pgrep -f "$T"; pgrep -x slurmstepd) || true); do
    [ "$(ps -o stat= -p "$pid" | cut -c1)" = Z ] || ps -o pid=,args= -p "$pid"
  done
}
for _ in $(seq 50); do [ -z "$(running)" ] && break; sleep 0.1; done
left=$(running)
[ -z "$left" ] || fail "daemons left running after the stop: $left"
echo "no daemon left running (pids ${PIDS[*]} stopped)"
echo PASS
