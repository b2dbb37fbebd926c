#!/usr/bin/env bash
# A user's own program as a ringpilot job (launch.command, docs/programs.md): two CPU ranks
# of examples/ddp_fashion_mnist.py (stock PyTorch DDP over gloo) train on real images
# (Debian's dataset-fashion-mnist) under `ringpilot run`.
#
# 1. Rank 1 kills itself with SIGKILL at step 150 of the first attempt: the attempt's
#    failure report names rank 1 and the signal, the job restarts, the program resumes from
#    its own checkpoint (step 120), sees RINGPILOT_ATTEMPT 2, learns (test accuracy) and the
#    run exits 0; every rank has its log.
#    The start-up lines describe the command (no model or data defaults); `status` shows the
#    command, the program's own progress line (step 240/240, its loss) and its checkpoint
#    file; `diagnose` reports the run (gloo: no NCCL records) and exits 0.
# 2. Rank 1 exits 3 on every attempt: after launch.max_restarts the run ends with exit 3,
#    failure.json names rank 1 and its status, and each earlier attempt has its report.
# 3. A long run, live: `status` counts 2 of 2 ranks running (the launcher's view of the
#    processes) and shows the progress the program prints; each rank serves its program's
#    process series (CPU, memory, restarts) though the program loads no NCCL; `ringpilot
#    stop` ends it with exit 79 and one line naming the step and the program's checkpoint.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init user_program

data=/usr/share/datasets/fashion-mnist
[[ -s $data/train-images-idx3-ubyte.gz ]] ||
  rp_die "$data missing: install dataset-fashion-mnist (scripts/setup.sh)"
# The torch the build took LibTorch from (CMake passes it), else the setup's venv: its bin
# first on PATH, as for a user with the venv activated, so that the job's `python3` is it.
py=${RINGPILOT_TORCH_PYTHON:-$RINGPILOT_SOURCE_DIR/.venv/bin/python3}
"$py" -c 'import torch' 2>/dev/null || rp_die "$py cannot import torch (run scripts/setup.sh)"
PATH=$(dirname "$py"):$PATH
export PATH
program=$RINGPILOT_SOURCE_DIR/examples/ddp_fashion_mnist.py

# job NAME ARGS...: a two-rank CPU job running the example with ARGS.
job() {
  local name=$1 args="" a
  shift
  for a in "$@"; do args+=", \"$a\""; done
  cat >"$RP_TMP/$name.yaml" <<EOF
name: $name
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch:
  max_restarts: 2
  command: [python3, "$program", --data, "$data", --train-samples, "6000", --batch, "32"$args]
comm: {timeout_s: 120}
metrics: {port_base: $(rp_free_ports 2)}
EOF
}

# json FILE EXPR: a value from a JSON file (python expression on `d`); "error" if unreadable.
json() {
  python3 -c 'import json,sys
try: d = json.load(open(sys.argv[1]))
except Exception: print("error"); sys.exit(0)
try: print(eval(sys.argv[2]))
except Exception: print("missing")' "$1" "$2"
}

# ---- 1. one crash, restart, resume ------------------------------------------------------
job crash_once --steps 240 --checkpoint-every 60 --log-every 40 --crash-rank 1 --crash-step 150
run=$RP_TMP/run-crash
rp_run 600 "$RP_TMP/crash.out" "$run" "$RP_TMP/crash_once.yaml"
if [[ $RP_RC -eq 0 ]]; then
  rp_row "exit status" "exit 0 after a restart" PASS
else
  rp_row "exit status" "exit $RP_RC, expected 0 (see $RP_TMP/crash.out)" FAIL
  rp_tail "$RP_TMP/crash.out" 40
fi
report=$run/attempts/1/failure.json
rank=$(json "$report" 'd["first_failing_rank"]')
fatal=$(json "$report" 'd["fatal_message"]')
if [[ $rank == 1 && $fatal == *"killed by SIGKILL"* ]]; then
  rp_row "failure report" "attempts/1/failure.json: rank 1, $fatal" PASS
else
  rp_row "failure report" "attempts/1/failure.json: rank '$rank', message '$fatal'" FAIL
fi
if grep -q "restarting" "$run/logs/launcher.log" && [[ ! -e $run/failure.json ]]; then
  rp_row "restart" "launcher.log: restarted once; no failure.json (the job succeeded)" PASS
else
  rp_row "restart" "no restart in launcher.log, or a failure.json" FAIL
fi
for r in 0 1; do
  rp_check "rank-$r.log" "per-rank log with both attempts" \
    grep -q "rank $r/2 attempt 2 " "$run/logs/rank-$r.log"
done
rp_check "attempt variable" "rank 1 saw RINGPILOT_ATTEMPT 1, then 2" \
  bash -c "grep -q 'rank 1/2 attempt 1 (TORCHELASTIC_RESTART_COUNT 0)' '$run/logs/rank-1.log' &&
    grep -q 'rank 1/2 attempt 2 (TORCHELASTIC_RESTART_COUNT 1)' '$run/logs/rank-1.log'"
rp_check "FATAL line" "rank-1.log ends its first attempt with the wrapper's FATAL line" \
  grep -qE "^[0-9-]{10}T[0-9:.]{12}Z FATAL python3 killed by SIGKILL" "$run/logs/rank-1.log"
resumed=$(json "$run/result.json" 'd["resumed_from_step"]')
if [[ $resumed == 120 ]]; then
  rp_row "resume" "attempt 2 resumed from the program's checkpoint at step 120" PASS
else
  rp_row "resume" "resumed_from_step '$resumed', expected 120" FAIL
fi
accuracy=$(json "$run/result.json" 'd["test_accuracy"]')
if rp_le 0.65 "$accuracy" 2>/dev/null; then
  rp_row "learning" "test accuracy $accuracy >= 0.65 (chance: 0.1)" PASS
else
  rp_row "learning" "test accuracy '$accuracy' < 0.65" FAIL
fi

# What the user sees of the program: the command, never the trainer's defaults.
if grep -q "^ringpilot: job crash_once: python3 $program --data $data" "$RP_TMP/crash.out" &&
  ! grep -qE '^ringpilot: (data |job crash_once: resnet)' "$RP_TMP/crash.out" &&
  grep -q "^ringpilot: metrics of each rank's program process" "$RP_TMP/crash.out"; then
  rp_row "start-up lines" "the command and the metrics each rank serves; no model or data" PASS
else
  rp_row "start-up lines" "$(grep '^ringpilot:' "$RP_TMP/crash.out" | head -n 4 | tr '\n' ';')" FAIL
fi
"$RINGPILOT" status "$run" >"$RP_TMP/crash-status.txt" 2>&1 || true
"$RINGPILOT" status "$run" --json >"$RP_TMP/crash-status.json" 2>&1 || true
if grep -q "^command     python3 $program " "$RP_TMP/crash-status.txt" &&
  grep -qE "^step        240/240 \| loss [0-9.]+ \(rank 0's last progress line\)$" "$RP_TMP/crash-status.txt" &&
  grep -q "^checkpoint  step 240 ($run/checkpoints/step-00000240.pt)$" "$RP_TMP/crash-status.txt" &&
  ! grep -qE 'resnet|synthetic' "$RP_TMP/crash-status.txt" &&
  [[ $(rp_json "$RP_TMP/crash-status.json" loss_source) == "progress line" &&
     $(rp_json "$RP_TMP/crash-status.json" model) == null ]]; then
  rp_row "status" "command, step 240/240 and loss from the program's line, its step-00000240.pt" PASS
else
  rp_row "status" "$(tr '\n' ';' <"$RP_TMP/crash-status.txt" | head -c 500)" FAIL
fi
diag_rc=0
"$RINGPILOT" diagnose "$run" >"$RP_TMP/crash-diagnose.txt" 2>&1 || diag_rc=$?
if ((diag_rc == 0)) && grep -q "^program: python3 $program" "$RP_TMP/crash-diagnose.txt" &&
  grep -qE '^progress: step 240/240 loss [0-9.]+' "$RP_TMP/crash-diagnose.txt" &&
  grep -q '^communication: no NCCL records' "$RP_TMP/crash-diagnose.txt"; then
  rp_row "diagnose" "exit 0: the command, step 240/240, a row per rank, no NCCL records (gloo)" PASS
else
  rp_row "diagnose" "exit $diag_rc: $(head -c 400 "$RP_TMP/crash-diagnose.txt" | tr '\n' ';')" FAIL
fi

# ---- 2. a failure on every attempt ------------------------------------------------------
job exit3 --steps 100 --checkpoint-every 50 --crash-rank 1 --crash-step 20 --crash-exit 3 \
  --crash-every-attempt
run=$RP_TMP/run-exit3
rp_run 600 "$RP_TMP/exit3.out" "$run" "$RP_TMP/exit3.yaml" --set launch.max_restarts=1
if [[ $RP_RC -eq 3 ]]; then
  rp_row "exit status (for good)" "exit 3, the program's status" PASS
else
  rp_row "exit status (for good)" "exit $RP_RC, expected 3" FAIL
  rp_tail "$RP_TMP/exit3.out" 40
fi
rank=$(json "$run/failure.json" 'd["first_failing_rank"]')
fatal=$(json "$run/failure.json" 'd["fatal_message"]')
attempts=$(json "$run/failure.json" 'd["attempts"]')
if [[ $rank == 1 && $attempts == 2 && $fatal == *"exited with status 3"* ]]; then
  rp_row "failure.json" "rank 1, 2 attempts: $fatal" PASS
else
  rp_row "failure.json" "rank '$rank', attempts '$attempts', message '$fatal'" FAIL
fi
rp_check "attempt report" "attempts/1/failure.json of the restarted attempt" \
  test -s "$run/attempts/1/failure.json"
rp_check "summary" "the terminal says it failed for good and names rank 1" \
  bash -c "grep -q 'job failed for good after 2 attempt' '$RP_TMP/exit3.out' &&
    grep -q 'first failing rank: 1: python3 exited with status 3' '$RP_TMP/exit3.out'"
# ---- 3. live: status, the processes' metrics, a stop -------------------------------------
job live --steps 100000 --checkpoint-every 20 --log-every 5
run=$RP_TMP/run-live
timeout -k 20 600 "$RINGPILOT" run "$RP_TMP/live.yaml" --run-dir "$run" >"$RP_TMP/live.out" 2>&1 &
RP_JOB_PID=$!
deadline=$((SECONDS + 240))
while ((SECONDS < deadline)) && kill -0 "$RP_JOB_PID" 2>/dev/null; do
  "$RINGPILOT" status "$run" --json >"$RP_TMP/live-status.json" 2>/dev/null || true
  s=$(rp_json "$RP_TMP/live-status.json" step)
  [[ $s =~ ^[0-9]+$ ]] && ((s >= 10)) && break
  sleep 1
done
"$RINGPILOT" status "$run" >"$RP_TMP/live-status.txt" 2>&1 || true
if grep -q '^state       running ' "$RP_TMP/live-status.txt" &&
  grep -q '^ranks       2 of 2 running (their processes' "$RP_TMP/live-status.txt" &&
  grep -qE "^step        [0-9]+/100000 \| loss [0-9.]+ \(rank 0's last progress line\)$" "$RP_TMP/live-status.txt"; then
  rp_row "status (running)" "$(grep "^step" "$RP_TMP/live-status.txt" | cut -c 13-60 | tr -d "|"); 2 of 2 running" PASS
else
  rp_row "status (running)" "$(tr '\n' ';' <"$RP_TMP/live-status.txt" | head -c 500)" FAIL
  rp_tail "$RP_TMP/live.out"
fi
# Each rank's own endpoint (the program loads no NCCL on CPUs).
scraped=0
for r in 0 1; do
  target=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["targets"][0])' \
    "$run/prometheus-targets-rank-$r.process.json" 2>/dev/null || true)
  body=$(curl -fsS --max-time 10 "http://$target/metrics" 2>/dev/null || true)
  if [[ -n $target ]] && grep -q "^process_cpu_seconds_total{.*rank=\"$r\"" <<<"$body" &&
    grep -q '^process_resident_memory_bytes{' <<<"$body"; then
    scraped=$((scraped + 1))
  fi
done
if ((scraped == 2)) && [[ ! -e $run/prometheus-targets-rank-0.json ]]; then
  rp_row "process metrics" "both ranks serve process_cpu_seconds_total and memory; no NCCL target (gloo)" PASS
else
  rp_row "process metrics" "$scraped of 2 ranks served process series" FAIL
fi
stop_rc=0
"$RINGPILOT" stop "$run" --timeout 120 >"$RP_TMP/live-stop.txt" 2>&1 || stop_rc=$?
rc=0
wait "$RP_JOB_PID" || rc=$?
RP_JOB_PID=""
k=$(sed -n 's/^ringpilot: stopped at step \([0-9]*\) by ringpilot stop; checkpoint .*/\1/p' "$RP_TMP/live.out")
expected="ringpilot: stopped at step $k by ringpilot stop; checkpoint $run/checkpoints/step-$(printf '%08d' "${k:-0}").pt; resume with: ringpilot run $run/job.yaml --run-dir $run"
if ((rc == 79 && stop_rc == 0)) && [[ -n $k && $(tail -n 1 "$RP_TMP/live.out") == "$expected" ]] &&
  ! grep -qE 'non-zero exit code|Primary job' "$RP_TMP/live.out" &&
  [[ $(rp_json "$run/prometheus-targets-rank-0.process.json" x 2>/dev/null) != unreadable ]] &&
  [[ $(cat "$run/prometheus-targets-rank-0.process.json") == "[]" ]]; then
  rp_row "stop" "exit 79; the last line: stopped at step $k ...step-$(printf '%08d' "$k").pt; no mpirun notice" PASS
else
  rp_row "stop" "run exit $rc, stop exit $stop_rc, last line '$(tail -n 1 "$RP_TMP/live.out")'" FAIL
  rp_tail "$RP_TMP/live.out"
fi
rp_finish
