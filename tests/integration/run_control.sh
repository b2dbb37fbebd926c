#!/usr/bin/env bash
# `ringpilot status`, `logs` and `stop` against a real 2-rank bert-tiny CPU job:
#   (a) the terminal shows a compact start-up block (job, data, run dir, metrics) before the
#       first step; the placement detail is in logs/rank-0.log only;
#   (b) `status` says running (attempt 1, a step, a loss, 2 ranks beating), `--json` too;
#   (c) `logs -n 3` prints three lines of rank 0's log, each in the one time format;
#   (d) `stop` ends the job gracefully: every rank stops at the same step K with a
#       checkpoint of K, `ringpilot run` exits 79 (stopped, not a failure) with one line
#       `stopped at step K by ringpilot stop; checkpoint ...; resume with: ...` and none of
#       mpirun's "non-zero exit code" notices, `stop` says the same line; a `logs -f`
#       started before ends by itself with the ranks' last lines;
#   (e) `status` then says stopped at step K with the resume command; no failure.json;
#   (f) running the same directory again resumes from K and finishes; `status` says
#       finished, as run 2 of the directory (2 attempts over the 2 runs); summary.json has
#       attempt 1 and resumed_from_step K, and its final_loss is the number rank 0's
#       closing "final loss" line names; every line of the rank logs and launcher.log
#       starts with the one time format;
#   (g) `ringpilot --version` names ringpilot's commit and the trainer's LibTorch.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/run_control.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init run_control

readonly JOB_NAME=it-run-control JOB_LIMIT_S=400 UP_WAIT_S=180 STOP_WAIT_S=120
readonly ISO='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z '
port_base=$(rp_free_ports 2)
run=$RP_TMP/run
job=$RP_TMP/job.yaml
cat >"$job" <<EOF
name: $JOB_NAME
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, dropout: 0.1}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 100000, optimizer: sgd, lr: 0.01, threads_per_rank: 1, log_every_s: 1}
checkpoint: {every_steps: 0, keep: 2}
metrics: {enabled: true, bind: 127.0.0.1, port_base: $port_base}
EOF

# --- the job, in the background ------------------------------------------------------------
timeout -k 20 "$JOB_LIMIT_S" "$RINGPILOT" run "$job" --run-dir "$run" >"$RP_TMP/job.out" 2>&1 &
tpid=$!
rp_on_exit "kill -TERM $tpid 2>/dev/null; wait $tpid 2>/dev/null || true"
job_alive() { kill -0 "$tpid" 2>/dev/null; }
# (No log yet is no step: grep's status would end the script under pipefail.)
step_of_log() { { grep -oE 'step [0-9]+/' "$run/logs/rank-0.log" 2>/dev/null || true; } | tail -n 1 | tr -dc 0-9; }
deadline=$((SECONDS + UP_WAIT_S))
while ((SECONDS < deadline)) && job_alive; do
  s=$(step_of_log)
  [[ -n $s ]] && ((s >= 3)) && break
  sleep 0.5
done
s=$(step_of_log)
if [[ -z $s ]] || ((s < 3)); then
  rp_tail "$RP_TMP/job.out"
  rp_die "the job did not reach step 3 within ${UP_WAIT_S} s"
fi
# Two more progress lines, so that rank 0's heartbeat has a loss.
sleep 2

# (a) the start-up block: a few lines before the first step, no placement lines.
before_step=$(awk '/step [0-9]+\//{exit} {n++} END{print n + 0}' "$RP_TMP/job.out")
if ((before_step <= 8)) && grep -q "^ringpilot: job $JOB_NAME: bert-tiny, 2 rank(s)" "$RP_TMP/job.out" &&
  grep -q "^ringpilot: run directory $run " "$RP_TMP/job.out" &&
  grep -q "^ringpilot: metrics on 127.0.0.1:$port_base-$((port_base + 1)) " "$RP_TMP/job.out" &&
  ! grep -q 'placement' "$RP_TMP/job.out" && grep -q 'INFO placement: ' "$run/logs/rank-0.log"; then
  rp_row "(a) start-up block" "$before_step lines before the first step; placement in rank-0.log" PASS
else
  rp_row "(a) start-up block" "$before_step lines before the first step, or a line missing" FAIL
  rp_tail "$RP_TMP/job.out" 20
fi

# (b) status while it runs.
"$RINGPILOT" status "$run" >"$RP_TMP/status-running.txt" 2>&1 || true
"$RINGPILOT" status "$run" --json >"$RP_TMP/status-running.json" 2>&1 || true
if grep -q '^state       running (launcher pid ' "$RP_TMP/status-running.txt" &&
  grep -q '^attempt     1 of at most 1$' "$RP_TMP/status-running.txt" &&
  grep -q '^ranks       2 of 2 heartbeating' "$RP_TMP/status-running.txt" &&
  python3 - "$RP_TMP/status-running.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
ok = d["state"] == "running" and d["step"] >= 3 and d["loss"] is not None and d["world_size"] == 2
sys.exit(0 if ok else 1)
PY
  rp_row "(b) status" "running, attempt 1, step $(rp_json "$RP_TMP/status-running.json" step), loss $(rp_json "$RP_TMP/status-running.json" loss)" PASS
else
  rp_row "(b) status" "$(tr '\n' ';' <"$RP_TMP/status-running.txt" | head -c 400)" FAIL
fi

# (c) logs -n 3.
"$RINGPILOT" logs "$run" -n 3 >"$RP_TMP/logs3.txt" 2>&1 || true
if [[ $(wc -l <"$RP_TMP/logs3.txt") -eq 3 && $(grep -cE "$ISO(INFO|WARN) " "$RP_TMP/logs3.txt") -eq 3 ]]; then
  rp_row "(c) logs -n 3" "3 lines of rank 0, ISO 8601 UTC times" PASS
else
  rp_row "(c) logs -n 3" "$(head -c 300 "$RP_TMP/logs3.txt" | tr '\n' ';')" FAIL
fi

# (d) stop, with a follower.
"$RINGPILOT" logs "$run" -f >"$RP_TMP/follow.txt" 2>"$RP_TMP/follow.err" &
fpid=$!
rp_on_exit "kill $fpid 2>/dev/null || true"
sleep 1
stop_rc=0
"$RINGPILOT" stop "$run" --timeout "$STOP_WAIT_S" >"$RP_TMP/stop.txt" 2>&1 || stop_rc=$?
rc=0
wait "$tpid" || rc=$?
k=$(sed -n 's/^ringpilot stop: stopped at step \([0-9]*\) by ringpilot stop; checkpoint .*; resume with: .*/\1/p' "$RP_TMP/stop.txt")
ranks_k=$({ grep -ho 'preempted: SIGUSR1 received; checkpoint of step [0-9]*' "$run"/logs/rank-*.log ||
  true; } | grep -oE '[0-9]+$' | sort -u | tr '\n' ' ' || true)
stop_line="ringpilot: stopped at step $k by ringpilot stop; checkpoint $run/checkpoints/step-$(printf '%08d' "${k:-0}"); resume with: ringpilot run $run/job.yaml --run-dir $run"
if ((stop_rc == 0 && rc == 79)) && [[ -n $k && $ranks_k == "$k " ]] &&
  [[ -d $run/checkpoints/step-$(printf '%08d' "$k") ]]; then
  rp_row "(d) stop" "exit 79, both ranks stopped at step $k with its checkpoint" PASS
else
  rp_row "(d) stop" "stop exit $stop_rc, run exit $rc, stop says step '${k}', ranks '${ranks_k}'" FAIL
  rp_tail "$RP_TMP/stop.txt"
  rp_tail "$RP_TMP/job.out"
  k=${k:-0}
fi
if [[ $(tail -n 1 "$RP_TMP/job.out") == "$stop_line" ]] &&
  ! grep -qE 'non-zero exit code|Primary job|exited with non-zero status' "$RP_TMP/job.out" &&
  grep -q 'non-zero exit code' "$run/logs/launcher.log"; then
  rp_row "(d) stop line" "the run's last line: ${stop_line:11:60}...; no mpirun notice (launcher.log keeps it)" PASS
else
  rp_row "(d) stop line" "last line '$(tail -n 1 "$RP_TMP/job.out")', or an mpirun notice on the terminal" FAIL
  rp_tail "$RP_TMP/job.out"
fi
follow_rc=0
for ((i = 0; i < 50; i++)); do
  kill -0 "$fpid" 2>/dev/null || break
  sleep 0.2
done
if kill -0 "$fpid" 2>/dev/null; then
  rp_row "(d) logs -f" "still following 10 s after the job ended" FAIL
  kill "$fpid" 2>/dev/null || true
else
  wait "$fpid" || follow_rc=$?
  if ((follow_rc == 0)) && grep -q 'preempted: SIGUSR1 received; checkpoint of step' "$RP_TMP/follow.txt"; then
    rp_row "(d) logs -f" "ended with the job, after: $(tail -n 1 "$RP_TMP/follow.txt" | cut -c 26-100)" PASS
  else
    rp_row "(d) logs -f" "exit $follow_rc; no preemption line in what it printed" FAIL
  fi
fi

# (e) status after the stop.
"$RINGPILOT" status "$run" --json >"$RP_TMP/status-stopped.json" 2>&1 || true
"$RINGPILOT" status "$run" >"$RP_TMP/status-stopped.txt" 2>&1 || true
if [[ $(rp_json "$RP_TMP/status-stopped.json" state) == stopped &&
  $(rp_json "$RP_TMP/status-stopped.json" latest_checkpoint) == "$k" &&
  $(rp_json "$RP_TMP/status-stopped.json" step) == "$k" && ! -e $run/failure.json ]] &&
  grep -q "^resume      ringpilot run $run/job.yaml --run-dir $run$" "$RP_TMP/status-stopped.txt"; then
  rp_row "(e) status stopped" "stopped at step $k, resume command shown, no failure.json" PASS
else
  rp_row "(e) status stopped" "$(tr '\n' ';' <"$RP_TMP/status-stopped.txt" | head -c 400)" FAIL
fi

# (f) resume from K to K + 3 and finish.
target=$((k + 3))
rp_run "$JOB_LIMIT_S" "$RP_TMP/resume.out" "$run" "$run/job.yaml" --set "train.steps=$target"
rp_expect_ok "(f) resume" "$RP_TMP/resume.out" "$run" || true
"$RINGPILOT" status "$run" --json >"$RP_TMP/status-finished.json" 2>&1 || true
"$RINGPILOT" status "$run" >"$RP_TMP/status-finished.txt" 2>&1 || true
if [[ $(rp_json "$RP_TMP/status-finished.json" state) == finished &&
  $(rp_json "$RP_TMP/status-finished.json" step) == "$target" &&
  $(rp_json "$run/summary.json" resumed_from_step) == "$k" &&
  $(rp_json "$run/summary.json" attempt) == 1 ]] &&
  grep -q '^attempt     1 of at most 1 in run 2 of this directory (2 attempt(s) over the 2 runs)$' "$RP_TMP/status-finished.txt" &&
  grep -q 'finished after 1 attempt(s) of run 2 of this run directory' "$RP_TMP/status-finished.txt"; then
  rp_row "(f) status finished" "finished $target steps, resumed from $k, attempt 1 of run 2 (2 attempts in all)" PASS
else
  rp_row "(f) status finished" "state $(rp_json "$RP_TMP/status-finished.json" state), step $(rp_json "$RP_TMP/status-finished.json" step), resumed_from_step $(rp_json "$run/summary.json" resumed_from_step)" FAIL
fi
# summary.json's final_loss is what rank 0's closing line names (the mean over the ranks),
# and says so; rank 0's own is the last progress line's.
final=$(grep -o 'final loss [0-9.]*: the last step.s loss averaged over the 2 rank(s)' "$run/logs/rank-0.log" |
  tail -n 1 | awk '{print $3}' | tr -d :)
summary_loss=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.4f %s %.4f" % (d["final_loss"], d["final_loss_of"].replace(" ", "_"), d["final_loss_rank0"]))' "$run/summary.json" 2>/dev/null || true)
last_line_loss=$({ grep -oE "step $target/$target \| loss [0-9.]+" "$run/logs/rank-0.log" || true; } | tail -n 1 | awk '{print $5}')
if [[ -n $final && ${summary_loss%% *} == "$final" && $summary_loss == *"mean_over_the_ranks"* &&
  ${summary_loss##* } == "$last_line_loss" ]]; then
  rp_row "(f) final loss" "summary.json final_loss $final = rank 0's closing line (mean); final_loss_rank0 = last progress line $last_line_loss" PASS
else
  rp_row "(f) final loss" "closing line '$final', summary '$summary_loss', last progress line '$last_line_loss'" FAIL
fi
# Every line of the rank logs and launcher.log starts with the one time format, and the
# attempt number is the launcher's.
bad=$(cat "$run"/logs/rank-*.log "$run/logs/launcher.log" | grep -cvE "$ISO" || true)
if ((bad == 0)) && grep -q 'attempt 1)$' "$run/logs/rank-1.log"; then
  rp_row "(f) log lines" "every line ISO 8601 UTC with ms; rank logs say attempt 1" PASS
else
  rp_row "(f) log lines" "$bad line(s) without the time format, or no 'attempt 1' in rank-1.log" FAIL
fi

# (g) --version.
"$RINGPILOT" --version >"$RP_TMP/version.txt" 2>&1 || true
torch=$("$RINGPILOT_TRAINER_BIN" --versions | python3 -c 'import json,sys; print(json.load(sys.stdin)["torch"])')
if grep -qE '^ringpilot [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]{12}(-dirty)?\)$' "$RP_TMP/version.txt" &&
  grep -qE "^  libtorch +$torch$" "$RP_TMP/version.txt" && grep -qE '^  mpi +Open MPI' "$RP_TMP/version.txt"; then
  rp_row "(g) --version" "$(head -n 1 "$RP_TMP/version.txt"), libtorch $torch" PASS
else
  rp_row "(g) --version" "$(tr '\n' ';' <"$RP_TMP/version.txt" | head -c 300)" FAIL
fi

rp_finish
