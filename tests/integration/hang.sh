#!/usr/bin/env bash
# A hang on CPU ranks (issue 21): a 2-rank bert-tiny job, comm.timeout_s 8, checkpoint every
# 10 steps, launch.max_restarts 1. Once rank 1 has passed step 20, it is stopped with
# SIGSTOP (outside or inside a collective, wherever it happens to be):
#   (a) rank 0 gives up within comm.timeout_s + a few seconds: a FATAL line naming the
#       collective, its sequence number and comm.timeout_s;
#   (b) the failed attempt's report (attempts/1/failure.json) names rank 1 as the rank
#       behind, and every rank's last heartbeat; the launcher prints "rank behind: 1" with
#       rank 1's longest silence, failure.json's max_silence_s (issue 29);
#   (c) the job restarts from the last checkpoint and finishes (exit 0, restarts 1);
#   (d) the stopped rank does not outlive the job.
# Then the same job on ONE rank, stopped past step 20: no collective can time out, so the
# launcher's heartbeat watch must see it (comm.timeout_s + 5 s of silence, checked every
# 5 s):
#   (e) attempts/1/failure.json says the job hung, naming rank 0's silence and rank 0 as the
#       rank behind, within comm.timeout_s + 15 s of the SIGSTOP; the job restarts and
#       finishes.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/hang.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init hang

readonly JOB_LIMIT_S=300 TIMEOUT_S=8 SLACK_S=10
job=$RP_TMP/job.yaml
cat >"$job" <<EOF
name: it-hang
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 1}
model: {name: bert-tiny, dropout: 0.1, seq_len: 64}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 100, optimizer: sgd, lr: 0.01, momentum: 0.9, seed: 7, threads_per_rank: 1,
        log_every_s: 60}
comm: {timeout_s: $TIMEOUT_S}
checkpoint: {every_steps: 10, keep: 2}
metrics: {enabled: false}
EOF

# stop_past_step20 RUN_DIR RANK: SIGSTOP that rank once its heartbeat is past step 20 of
# the first attempt; sets STOPPED_PID and STOP_S (empty when it never got there).
stop_past_step20() {
  local run_dir=$1 rank=$2 beat=$1/logs/rank-$2.heartbeat
  STOPPED_PID="" STOP_S=""
  for _ in $(seq 1 600); do
    if [[ -f $beat ]] && (($(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["step"])' "$beat" 2>/dev/null || echo 0) >= 20)); then
      STOPPED_PID=$(sed -n 's/.*pid \([0-9]*\), attempt 1).*/\1/p' "$run_dir/logs/rank-$rank.log" | head -n 1)
      if [[ -n $STOPPED_PID ]] && kill -STOP "$STOPPED_PID" 2>/dev/null; then
        STOP_S=$(date +%s.%N)
        rp_log "stopped rank $rank (pid $STOPPED_PID)"
      fi
      return 0
    fi
    sleep 0.1
  done
}

run=$RP_TMP/run
rp_run "$JOB_LIMIT_S" "$RP_TMP/out" "$run" "$job" &
runner=$!
stop_past_step20 "$run" 1
stopped_pid=$STOPPED_PID stop_s=$STOP_S
wait "$runner" || true
# rp_run ran in a subshell: its status is in the output's last lines, not RP_RC.
if [[ -z $stop_s ]]; then
  rp_row "setup" "rank 1 never reached step 20 (or its pid was not found)" FAIL
  rp_tail "$RP_TMP/out"
  rp_finish
fi

report=$run/attempts/1/failure.json
# Every log line: TIME LEVEL message (TIME ISO 8601, UTC, milliseconds).
fatal=$(grep -hE '^[0-9-]{10}T[0-9:.]{12}Z FATAL ' "$run"/logs/rank-0.log | head -n 1 || true)
if [[ $fatal == *"not complete after"*"comm.timeout_s"* ]]; then
  rp_row "(a) FATAL line" "${fatal#* FATAL }" PASS
else
  rp_row "(a) FATAL line" "rank-0.log has no timeout FATAL: '${fatal}'" FAIL
fi
if [[ -f $report ]]; then
  took=$(python3 -c 'import os,sys;print(round(os.path.getmtime(sys.argv[1]) - float(sys.argv[2]), 1))' "$report" "$stop_s")
  if python3 -c 'import sys;sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$took" "$((TIMEOUT_S + SLACK_S))"; then
    rp_row "(a) detected" "report ${took} s after SIGSTOP (timeout ${TIMEOUT_S} s)" PASS
  else
    rp_row "(a) detected" "report ${took} s after SIGSTOP (> ${TIMEOUT_S} + ${SLACK_S} s)" FAIL
  fi
  behind=$(rp_json "$report" rank_behind)
  ranks=$(python3 -c 'import json,sys;print(",".join(sorted(json.load(open(sys.argv[1]))["ranks"])))' "$report")
  if [[ $behind == 1 && $ranks == "0,1" ]]; then
    rp_row "(b) rank behind" "rank_behind 1, heartbeats of ranks $ranks" PASS
  else
    rp_row "(b) rank behind" "rank_behind '$behind', heartbeats of ranks '$ranks'" FAIL
  fi
else
  rp_row "(a) detected" "no $report" FAIL
fi
# The line names rank 1's longest silence, as its failure.json heartbeat has it (its last
# beat, written after mpirun's SIGCONT, is as recent as rank 0's).
silence=$(python3 -c 'import json,sys;print("%.1f" % json.load(open(sys.argv[1]))["ranks"]["1"]["max_silence_s"])' "$report" 2>/dev/null || echo missing)
want="ringpilot: rank behind: 1 (the others waited for it): silent for $silence s (its longest gap between heartbeats), last heard in "
if [[ $silence != missing ]] && ! rp_le "$silence" 3.0; then :; else
  # Killed before it could beat again: no long silence recorded, its last beat is old.
  want="ringpilot: rank behind: 1 (the others waited for it): last heard "
fi
line=$(grep -m1 'ringpilot: rank behind: 1 ' "$RP_TMP/out" || true)
if [[ $silence != missing && $line == "$want"* ]]; then
  rp_row "(b) launcher" "${line#ringpilot: }" PASS
else
  rp_row "(b) launcher" "want '$want...' (max_silence_s $silence), got '${line:-none}'" FAIL
fi
if [[ -s $run/summary.json ]] && [[ $(rp_json "$run/summary.json" restarts) == 1 ]]; then
  rp_row "(c) restarted and finished" "summary.json: restarts 1, resumed_from_step $(rp_json "$run/summary.json" resumed_from_step)" PASS
else
  rp_row "(c) restarted and finished" "no summary.json with restarts 1" FAIL
  rp_tail "$RP_TMP/out"
fi
if kill -0 "$stopped_pid" 2>/dev/null; then
  kill -KILL "$stopped_pid" 2>/dev/null || true
  rp_row "(d) no orphan" "the stopped rank (pid $stopped_pid) outlived the job" FAIL
else
  rp_row "(d) no orphan" "the stopped rank is gone" PASS
fi

# (e) one rank: only the launcher's heartbeat watch can see it stop.
solo=$RP_TMP/solo
rp_run "$JOB_LIMIT_S" "$RP_TMP/solo.out" "$solo" "$job" --set world.procs_per_node=1 &
runner=$!
stop_past_step20 "$solo" 0
solo_pid=$STOPPED_PID solo_stop_s=$STOP_S
wait "$runner" || true
solo_report=$solo/attempts/1/failure.json
if [[ -z $solo_stop_s ]]; then
  rp_row "(e) one rank: setup" "rank 0 never reached step 20 (or its pid was not found)" FAIL
  rp_tail "$RP_TMP/solo.out"
elif [[ -f $solo_report ]]; then
  took=$(python3 -c 'import os,sys;print(round(os.path.getmtime(sys.argv[1]) - float(sys.argv[2]), 1))' "$solo_report" "$solo_stop_s")
  hang=$(rp_json "$solo_report" hang)
  behind=$(rp_json "$solo_report" rank_behind)
  if [[ $hang == "rank 0 wrote no heartbeat for "* && $behind == 0 ]] &&
    python3 -c 'import sys;sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$took" "$((TIMEOUT_S + 15))"; then
    rp_row "(e) one rank: detected" "report ${took} s after SIGSTOP: hang '$hang', rank_behind 0" PASS
  else
    rp_row "(e) one rank: detected" "report ${took} s after SIGSTOP (limit $((TIMEOUT_S + 15)) s): hang '$hang', rank_behind '$behind'" FAIL
  fi
else
  rp_row "(e) one rank: detected" "no $solo_report" FAIL
  rp_tail "$RP_TMP/solo.out"
fi
if [[ -s $solo/summary.json ]] && [[ $(rp_json "$solo/summary.json" restarts) == 1 ]]; then
  rp_row "(e) one rank: restarted and finished" "summary.json: restarts 1" PASS
else
  rp_row "(e) one rank: restarted and finished" "no summary.json with restarts 1" FAIL
fi
if [[ -n $solo_pid ]] && kill -0 "$solo_pid" 2>/dev/null; then
  kill -KILL "$solo_pid" 2>/dev/null || true
  rp_row "(e) one rank: no orphan" "the stopped rank (pid $solo_pid) outlived the job" FAIL
fi

rp_finish
