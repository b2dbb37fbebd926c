#!/usr/bin/env bash
# GPU fault matrix (issue 21 item 5) on the GPUs this machine has (one is enough; with two
# the job runs on both): resnet18-cifar, CUDA graphs, fp32, train.deterministic, checkpoint
# every 500 of 2000 steps, launch.max_restarts 1, comm.timeout_s 10.
#   straight   the unbroken run: its param_sha256 is the reference
#   crash      rank 0 exits at step 1250 (fault.crash_*): restart from 1000, finish
#   kill9      rank 0 is killed with SIGKILL once past step 1100: restart, finish
#   sigstop    rank 0 is stopped with SIGSTOP once past step 1100, inside the graphed step
#              or between steps: the hang is detected (with peers: the other rank's NCCL
#              watchdog, which watches each graph replay; alone: the launcher's heartbeat
#              watch), the attempt stopped, restart, finish
# Each faulty run must finish with restarts 1 and the straight run's param_sha256 (bit
# for bit). Prints a table last; exit 1 on any failure.
# Usage: [FAULT_MATRIX_GPUS=N] tests/gpu/fault_matrix.sh [OUT_DIR]  (default: 2 when the
# machine has them, else 1)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ -x "$RP" ]] || gpu_build
OUT="${1:-$(mktemp -d)}"
mkdir -p "$OUT"
GPUS=$(nvidia-smi -L | wc -l)
((GPUS >= 2)) && GPUS=2
GPUS=${FAULT_MATRIX_GPUS:-$GPUS}
readonly LIMIT_S=240 TIMEOUT_S=10 FAULT_AFTER_STEP=1100
rows=()
fail=0

cat >"$OUT/job.yaml" <<YAML
name: fault-matrix
world: {nodes: 1, procs_per_node: $GPUS, device: cuda}
launch: {backend: local, max_restarts: 1}
model: {name: resnet18-cifar}
data: {kind: synthetic, batch_per_rank: 128}
train: {steps: 2000, precision: fp32, tf32: false, deterministic: true, cuda_graphs: true,
        lr: 0.02, seed: 11, log_every_s: 30}
comm: {timeout_s: $TIMEOUT_S}
checkpoint: {every_steps: 500, keep: 2}
metrics: {enabled: false}
YAML

json_field() { python3 -c 'import json,sys;print(json.load(open(sys.argv[1])).get(sys.argv[2], "missing"))' "$1" "$2" 2>/dev/null || echo missing; }
step_of() { python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["step"])' "$1" 2>/dev/null || echo 0; }
start() {  # name, --set args...: the job in the background; sets JOB_PID, T0
  local name=$1
  shift
  rm -rf "${OUT:?}/$name"
  T0=$(date +%s.%N)
  timeout -k 20 "$LIMIT_S" "$RP" run "$OUT/job.yaml" --run-dir "$OUT/$name" "$@" \
    >"$OUT/$name.out" 2>&1 &
  JOB_PID=$!
}
signal_rank0_after() {  # name, signal: once rank 0 is past FAULT_AFTER_STEP; sets SIG_T
  local name=$1 sig=$2 pid=""
  SIG_T=""
  for _ in $(seq 1 1200); do
    if (($(step_of "$OUT/$name/logs/rank-0.heartbeat") >= FAULT_AFTER_STEP)); then
      pid=$(sed -n 's/.*pid \([0-9]*\), attempt 1).*/\1/p' "$OUT/$name/logs/rank-0.log" | head -n 1)
      [[ -n $pid ]] && kill "-$sig" "$pid" && SIG_T=$(date +%s.%N)
      return 0
    fi
    kill -0 "$JOB_PID" 2>/dev/null || return 0
    sleep 0.05
  done
}
finish() {  # name, label, detail: checks the run against the straight one
  local name=$1 label=$2 detail=$3 rc=0
  wait "$JOB_PID" || rc=$?
  local took restarts sha resumed
  took=$(python3 -c "import time;print(round(time.time() - $T0, 1))")
  restarts=$(json_field "$OUT/$name/summary.json" restarts)
  resumed=$(json_field "$OUT/$name/summary.json" resumed_from_step)
  sha=$(json_field "$OUT/$name/summary.json" param_sha256)
  local verdict=PASS
  # The straight run is the reference: it must only finish, with a hash.
  if [[ $rc -ne 0 || $sha == missing || ($name != straight && ($sha != "$REF_SHA" || $restarts != 1)) ]]; then
    verdict=FAIL
    fail=1
    tail -n 15 "$OUT/$name.out" | sed "s/^/  $name: /"
  fi
  rows+=("$(printf '%-9s %-44s exit %-3s restarts %-7s resumed %-7s %6s s  sha %-12s %s%s' \
    "$name" "$label" "$rc" "$restarts" "$resumed" "$took" "${sha:0:12}" "$verdict" \
    "${detail:+  [$detail]}")")
  # Each row as it comes: a run cut short (a time limit) still tells what it reached.
  echo "${rows[-1]}  sha256 $sha"
}

REF_SHA=""
start straight
finish straight "unbroken 2000 steps" ""
REF_SHA=$(json_field "$OUT/straight/summary.json" param_sha256)

start crash --set fault.crash_rank=0 --set fault.crash_step=1250
finish crash "rank 0 exits at step 1250" ""

start kill9
signal_rank0_after kill9 KILL
finish kill9 "SIGKILL of rank 0 past step $FAULT_AFTER_STEP" "${SIG_T:+signalled}"

start sigstop
signal_rank0_after sigstop STOP
report=$OUT/sigstop/attempts/1/failure.json
detected="no attempts/1/failure.json"
if [[ -n $SIG_T ]]; then
  # Wait for the report (the job goes on to restart and finish).
  for _ in $(seq 1 600); do [[ -f $report ]] && break; sleep 0.1; done
  if [[ -f $report ]]; then
    detected="report $(python3 -c "import os;print(round(os.path.getmtime('$report') - $SIG_T, 1))") s after SIGSTOP"
    hang=$(json_field "$report" hang)
    [[ $hang != missing ]] && detected+=": $hang"
    detected+="; rank behind $(json_field "$report" rank_behind)"
    fatal=$(json_field "$report" fatal_message)
    [[ $fatal != missing ]] && detected+="; FATAL: $fatal"
  fi
fi
finish sigstop "SIGSTOP of rank 0 past step $FAULT_AFTER_STEP" "$detected"

echo "fault matrix: $GPUS GPU(s), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), comm.timeout_s $TIMEOUT_S"
printf '%s\n' "${rows[@]}"
# The straight run's resumed weights: the rows compare each faulty run with it.
echo "reference param_sha256 $REF_SHA"
exit "$fail"
