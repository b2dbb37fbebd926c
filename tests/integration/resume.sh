#!/usr/bin/env bash
# Checkpoint/resume and supervision on a 2-rank bert-tiny CPU job (dropout 0.1, so the
# per-rank dropout RNG state must be restored too), checkpoint every 5 steps, keep 3:
#   (a) 20 steps straight == 10 steps, then `ringpilot run` again on the same run dir with
#       train.steps=20 (resumes at step 10): identical param_sha256; the 10-step summary
#       kept as summary.json.prev; a third run with nothing left to train is refused
#       (exit 2) and leaves summary.json as it was.
#       The rank's counters continue across the two runs (logs/rank-N.counters.json, the
#       journal ringpilot_steps_total starts from): 20 steps, 40 samples. Each run numbers
#       its attempts from 1: the first run's attempts/ is kept as attempts.prev (its
#       attempt 1: steps 1-10), the second's attempts/1/summary.json says steps 11-20, and
#       summary.json covers both runs (runs 2, steps 1-20, 20 trained).
#   (b) rank 1 crashes at step 13 (fault injection), launch.max_restarts=1: exit 0,
#       restarts 1, resumed_from_step 10, the straight run's param_sha256, and
#       logs/launcher.log tells of the restart; the counters continue from the step-10
#       checkpoint: 20 steps, ringpilot_restarts_total 1. Every attempt is in the history:
#       attempts/1/summary.json (steps 1-10 at its last checkpoint, failed per
#       attempts/1/failure.json), attempts/2/summary.json (completed, steps 11-20), and
#       summary.json covers both (2 attempts, failed_attempts [1], steps 1-20 distinct,
#       steps_trained - steps_redone = 20); `ringpilot diagnose` says "attempts: 2".
#   (c) the same crash with max_restarts=0: non-zero exit, failure.json names
#       first_failing_rank 1, no summary.json; `ringpilot diagnose` reports its one attempt
#       as failed. Then the same directory run again without the fault (a requeue): it
#       resumes from step 10 and finishes, and summary.json covers both runs (runs 2,
#       first_step 1, last_step 20, steps_trained >= 20, run 1's attempt failed per the
#       failure.json it left); `ringpilot diagnose` lists run 1 attempt 1 (failed) and run
#       2 attempt 1 (completed).
#   (d) a finished 10-step run whose newest checkpoint (step 10) has flipped bytes in
#       state.pt, resumed to 20: the trainer warns, resumes from step 5 and still reaches
#       the straight run's param_sha256.
#   (e) nothing already written is lost: the corrupt checkpoint's bytes are still in the
#       run directory afterwards (left in place or set aside), as keep (10 here) prunes
#       nothing in that run.
#   (f) another world size: the 2-rank run's step-10 checkpoint resumed on 1 rank to step
#       20: exit 0, resumed_from_step 10, a WARN line saying the random streams restart.
#   (g) failures that repeat are not retried (max_restarts 2): resuming that checkpoint
#       as another model ends after 1 attempt with exit 78 and "not restarting" in
#       launcher.log; a metrics port already in use is no failure: the ranks take the next
#       free block (prometheus-targets.json), one attempt, exit 0.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/resume.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init resume

readonly JOB_LIMIT_S=300

job=$RP_TMP/job.yaml
cat >"$job" <<'EOF'
name: it-resume
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, dropout: 0.1, seq_len: 64}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 20, optimizer: sgd, lr: 0.01, momentum: 0.9, seed: 7, threads_per_rank: 1,
        log_every_s: 60}
checkpoint: {every_steps: 5, keep: 3}
metrics: {enabled: false}
EOF

sha_of() { rp_json "$1/summary.json" param_sha256; }

# The reference weights must be real numbers: equal hashes of NaN weights prove nothing.
check_finite() {
  local name=$1 dir=$2 key v bad=""
  for key in param_norm param_abs_sum final_loss; do
    v=$(rp_json "$dir/summary.json" "$key")
    rp_finite "$v" || bad+=" $key=$v"
  done
  if [[ -z $bad ]]; then
    rp_row "$name" "param_norm $(rp_json "$dir/summary.json" param_norm)" PASS
  else
    rp_row "$name" "not finite:$bad" FAIL
  fi
}

same_sha() {
  local name=$1 dir=$2 got
  got=$(sha_of "$dir")
  if [[ -n $sha_a && $got == "$sha_a" ]]; then
    rp_row "$name" "param_sha256 ${got:0:16}... == straight run" PASS
  else
    rp_row "$name" "param_sha256 ${got:0:16}... != straight run's ${sha_a:0:16}..." FAIL
  fi
}

# counter RUN_DIR RANK NAME: the value of an unlabelled counter in the rank's journal.
counter() {
  python3 - "$1/logs/rank-$2.counters.json" "$3" <<'PY'
import json, sys
try:
    series = json.load(open(sys.argv[1])).get(sys.argv[2], [])
    print(next(s["value"] for s in series if not s["labels"]))
except Exception:
    print("missing")
PY
}

# attempt_steps FILE: "first_step,last_step,outcome" of an attempts/N/summary.json.
attempt_steps() {
  echo "$(rp_json "$1" first_step),$(rp_json "$1" last_step),$(rp_json "$1" outcome)"
}

# runs_coverage FILE: "runs,first_step,last_step,steps_trained" of a combined summary.json.
runs_coverage() {
  echo "$(rp_json "$1" runs),$(rp_json "$1" first_step),$(rp_json "$1" last_step),$(rp_json "$1" steps_trained)"
}

expect_eq() {  # expect_eq NAME WHAT GOT WANT
  if [[ $3 == "$4" ]]; then rp_row "$1" "$2 $3" PASS; else rp_row "$1" "$2 $3 (want $4)" FAIL; fi
}

# --- (a) straight vs interrupted-and-resumed -------------------------------------------
a=$RP_TMP/a-straight
rp_run "$JOB_LIMIT_S" "$a.out" "$a" "$job"
sha_a=""
if rp_expect_ok "(a) 20 steps straight" "$a.out" "$a"; then
  sha_a=$(sha_of "$a")
  check_finite "(a) straight weights finite" "$a"
fi

b=$RP_TMP/b-resumed
rp_run "$JOB_LIMIT_S" "$b.out1" "$b" "$job" --set train.steps=10
if rp_expect_ok "(a) first 10 steps" "$b.out1" "$b"; then
  rp_run "$JOB_LIMIT_S" "$b.out2" "$b" "$job" --set train.steps=20
  if rp_expect_ok "(a) rerun to 20 steps" "$b.out2" "$b"; then
    expect_eq "(a) resumed" "resumed_from_step" "$(rp_json "$b/summary.json" resumed_from_step)" 10
    same_sha "(a) resumed == straight" "$b"
    expect_eq "(a) history" "summary.json.prev steps" "$(rp_json "$b/summary.json.prev" steps)" 10
    expect_eq "(a) first run's attempt" "attempts.prev/1 first_step,last_step,outcome" \
      "$(attempt_steps "$b/attempts.prev/1/summary.json")" "1,10,completed"
    expect_eq "(a) second run's attempt" "attempts/1 first_step,last_step,outcome" \
      "$(attempt_steps "$b/attempts/1/summary.json")" "11,20,completed"
    expect_eq "(a) both runs" "runs,first_step,last_step,steps_trained" \
      "$(runs_coverage "$b/summary.json")" "2,1,20,20"
    for r in 0 1; do
      expect_eq "(a) rank $r counters" "ringpilot_steps_total,samples_total" \
        "$(counter "$b" $r ringpilot_steps_total),$(counter "$b" $r ringpilot_samples_total)" "20.0,40.0"
    done
    # Nothing left to train: refused, the results untouched.
    before=$(sha256sum "$b/summary.json")
    rp_run "$JOB_LIMIT_S" "$b.out3" "$b" "$job" --set train.steps=20
    if [[ $RP_RC -eq 2 && $(sha256sum "$b/summary.json") == "$before" ]] &&
      grep -q "already finished 20 steps (summary.json); raise train.steps" "$b.out3"; then
      rp_row "(a) finished run rerun" "exit 2, one line, summary.json untouched" PASS
    else
      rp_row "(a) finished run rerun" "exit $RP_RC; summary.json changed or no 'already finished' line" FAIL
      rp_tail "$b.out3"
    fi
  fi
fi

# --- (b) crash at step 13, one restart --------------------------------------------------
c=$RP_TMP/c-crash-restart
rp_run "$JOB_LIMIT_S" "$c.out" "$c" "$job" --set fault.crash_rank=1 --set fault.crash_step=13 \
  --set launch.max_restarts=1
if rp_expect_ok "(b) crash + 1 restart" "$c.out" "$c"; then
  expect_eq "(b) restarts" "restarts" "$(rp_json "$c/summary.json" restarts)" 1
  expect_eq "(b) resumed" "resumed_from_step" "$(rp_json "$c/summary.json" resumed_from_step)" 10
  same_sha "(b) restarted == straight" "$c"
  expect_eq "(b) rank 1 counters" "ringpilot_steps_total,restarts_total" \
    "$(counter "$c" 1 ringpilot_steps_total),$(counter "$c" 1 ringpilot_restarts_total)" "20.0,1.0"
  # The crash came at step 13, after the step-10 checkpoint: attempt 1's record says 10.
  expect_eq "(b) attempt 1" "attempts/1 first_step,last_step,outcome" \
    "$(attempt_steps "$c/attempts/1/summary.json")" "1,10,running"
  expect_eq "(b) attempt 2" "attempts/2 first_step,last_step,outcome" \
    "$(attempt_steps "$c/attempts/2/summary.json")" "11,20,completed"
  coverage=$(python3 - "$c/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(len(s["attempts"]), s["failed_attempts"], s["attempts"][0]["outcome"], s["first_step"],
      s["last_step"], s["steps_trained"] - s["steps_redone"], s["steps_trained"] >= 20)
PY
  )
  expect_eq "(b) combined summary" "attempts,failed,first outcome,first,last,distinct,trained>=20" \
    "$coverage" "2 [1] failed 1 20 20 True"
  if "$RINGPILOT" diagnose "$c" 2>&1 | grep -q '^attempts: 2 (finished; failed: 1)'; then
    rp_row "(b) diagnose" "attempts: 2 (finished; failed: 1)" PASS
  else
    rp_row "(b) diagnose" "no 'attempts: 2 (finished; failed: 1)' line" FAIL
  fi
fi
if grep -q 'restarting from the last checkpoint' "$c/logs/launcher.log" 2>/dev/null; then
  rp_row "(b) launcher.log" "mentions the restart" PASS
else
  rp_row "(b) launcher.log" "no 'restarting from the last checkpoint' line" FAIL
fi

# --- (c) the same crash without restarts ------------------------------------------------
d=$RP_TMP/d-crash-final
rp_run "$JOB_LIMIT_S" "$d.out" "$d" "$job" --set fault.crash_rank=1 --set fault.crash_step=13 \
  --set launch.max_restarts=0
if [[ $RP_RC -ne 0 && $RP_RC -ne 124 && $RP_RC -ne 137 ]]; then
  rp_row "(c) crash, no restart" "exit $RP_RC (non-zero)" PASS
else
  rp_row "(c) crash, no restart" "exit $RP_RC, want a non-zero job status" FAIL
  rp_tail "$d.out"
fi
if [[ -s $d/failure.json ]]; then
  expect_eq "(c) failure.json" "first_failing_rank" "$(rp_json "$d/failure.json" first_failing_rank)" 1
else
  rp_row "(c) failure.json" "missing" FAIL
fi
if [[ -e $d/summary.json ]]; then
  rp_row "(c) no summary" "summary.json written by a failed job" FAIL
else
  rp_row "(c) no summary" "no summary.json" PASS
fi
# A failed run is diagnosed too: its one attempt, failed, steps 1-12 (heartbeats).
if "$RINGPILOT" diagnose "$d" 2>&1 | grep -q '^attempts: 1 (failed; failed: 1)'; then
  rp_row "(c) diagnose" "attempts: 1 (failed; failed: 1)" PASS
else
  rp_row "(c) diagnose" "no 'attempts: 1 (failed; failed: 1)' line" FAIL
fi
# Run again (a requeue): resumes from the step-10 checkpoint, and the history covers both.
rp_run "$JOB_LIMIT_S" "$d.out2" "$d" "$job"
if rp_expect_ok "(c) rerun to 20 steps" "$d.out2" "$d"; then
  expect_eq "(c) rerun resumed" "resumed_from_step" "$(rp_json "$d/summary.json" resumed_from_step)" 10
  rows=$(python3 - "$d/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(s["runs"], s["first_step"], s["last_step"], s["steps_trained"] >= 20, s["failed_attempts"],
      " ".join(f'{r["run"]}.{r["attempt"]}:{r["outcome"]}' for r in s["attempts"]))
PY
  )
  expect_eq "(c) both runs" "runs,first,last,trained>=20,failed_attempts,rows" \
    "$rows" "2 1 20 True [] 1.1:failed 2.1:completed"
  "$RINGPILOT" diagnose "$d" >"$d.diagnose" 2>&1 || true
  if grep -q '^attempts: 2 in 2 runs (finished; failed: run 1 attempt 1)' "$d.diagnose" &&
    grep -q '^  run 1 attempt 1: failed, steps 1-1[0-2][, ]' "$d.diagnose" &&
    grep -q '^  run 2 attempt 1: completed, steps 11-20' "$d.diagnose"; then
    rp_row "(c) diagnose both runs" "run 1 attempt 1 failed, run 2 attempt 1 completed" PASS
  else
    rp_row "(c) diagnose both runs" "no 'attempts: 2 in 2 runs' section with both runs" FAIL
    rp_tail "$d.diagnose"
  fi
fi

# --- (d) corrupt newest checkpoint, resume from the older one ---------------------------
e=$RP_TMP/e-corrupt
rp_run "$JOB_LIMIT_S" "$e.out1" "$e" "$job" --set train.steps=10 --set checkpoint.keep=10
bad_ckpt=$e/checkpoints/step-00000010
bad_sha=""
if rp_expect_ok "(d) first 10 steps" "$e.out1" "$e" && [[ -f $bad_ckpt/state.pt ]]; then
  # Flip 64 bytes in the middle: same size, different content.
  python3 - "$bad_ckpt/state.pt" <<'EOF'
import os, sys
path = sys.argv[1]
size = os.path.getsize(path)
with open(path, "r+b") as f:
    f.seek(size // 2)
    chunk = f.read(64)
    f.seek(size // 2)
    f.write(bytes(b ^ 0xFF for b in chunk))
EOF
  bad_sha=$(sha256sum "$bad_ckpt/state.pt" | cut -d' ' -f1)
  rp_run "$JOB_LIMIT_S" "$e.out2" "$e" "$job" --set train.steps=20 --set checkpoint.keep=10
  if rp_expect_ok "(d) resume past corrupt checkpoint" "$e.out2" "$e"; then
    expect_eq "(d) resumed" "resumed_from_step" "$(rp_json "$e/summary.json" resumed_from_step)" 5
    same_sha "(d) resumed == straight" "$e"
  fi
  if grep -E 'WARN .*step-00000010.*state\.pt' "$e/logs/rank-0.log" | grep -qi 'skipping'; then
    rp_row "(d) warning" "rank-0.log warns about step-00000010/state.pt" PASS
  else
    rp_row "(d) warning" "no WARN line about the corrupt step-00000010/state.pt in rank-0.log" FAIL
  fi
  if grep -q 'resumed from .*step-00000005 at step 5' "$e/logs/rank-0.log"; then
    rp_row "(d) resume point" "rank-0.log: resumed from step-00000005" PASS
  else
    rp_row "(d) resume point" "rank-0.log has no 'resumed from ...step-00000005 at step 5'" FAIL
  fi
  # --- (e) the corrupt checkpoint is not destroyed ---
  if [[ -d $bad_ckpt ]]; then
    rp_row "(e) step-00000010 exists" "directory present after the resume" PASS
  else
    rp_row "(e) step-00000010 exists" "directory gone after the resume" FAIL
  fi
  kept=$(find "$e" -type f -name 'state.pt*' -exec sha256sum {} + | awk -v s="$bad_sha" '$1 == s {print $2}' |
    head -n 1 || true)
  if [[ -n $kept ]]; then
    rp_row "(e) corrupt bytes kept" "at ${kept#"$e"/}" PASS
  else
    rp_row "(e) corrupt bytes kept" "the corrupt state.pt (sha ${bad_sha:0:12}...) was deleted/overwritten" FAIL
  fi
else
  rp_row "(d) corrupt checkpoint" "$bad_ckpt/state.pt not written by the 10-step run" FAIL
fi

# --- (f) resume on another world size -------------------------------------------------------
if [[ -d $b/checkpoints/step-00000010 ]]; then
  f=$RP_TMP/f-world
  mkdir -p "$f"
  cp -r "$b/checkpoints" "$f/"
  rm -rf "$f"/checkpoints/step-00000015 "$f"/checkpoints/step-00000020
  rp_run "$JOB_LIMIT_S" "$f.out" "$f" "$job" --set world.procs_per_node=1
  if rp_expect_ok "(f) 2 ranks -> 1 rank" "$f.out" "$f"; then
    expect_eq "(f) resumed" "resumed_from_step" "$(rp_json "$f/summary.json" resumed_from_step)" 10
    check_finite "(f) weights finite" "$f"
    if grep -q 'WARN .*written by 2 ranks, this run has 1' "$f/logs/rank-0.log"; then
      rp_row "(f) warning" "rank-0.log says the world size changed" PASS
    else
      rp_row "(f) warning" "no 'written by 2 ranks, this run has 1' WARN line" FAIL
    fi
  fi

  # --- (g) permanent failures: another model, a port in use -----------------------------
  g=$RP_TMP/g-model
  mkdir -p "$g"
  cp -r "$b/checkpoints" "$g/"
  rp_run "$JOB_LIMIT_S" "$g.out" "$g" "$job" --set model.name=resnet18-cifar \
    --set launch.max_restarts=2
  expect_eq "(g) another model" "exit" "$RP_RC" 78
  if grep -q 'not restarting: the failure repeats' "$g/logs/launcher.log" 2>/dev/null &&
    ! grep -q 'restarting from the last checkpoint' "$g/logs/launcher.log"; then
    rp_row "(g) another model" "one attempt, launcher.log says why" PASS
  else
    rp_row "(g) another model" "restarted, or no 'not restarting' line" FAIL
    rp_tail "$g.out"
  fi
else
  rp_row "(f) another world size" "no step-10 checkpoint from (a)" FAIL
fi
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
python3 -c 'import socket,sys,time;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(("0.0.0.0",int(sys.argv[1])));s.listen();time.sleep(600)' "$port" &
holder=$!
sleep 0.5
h=$RP_TMP/h-port
rp_run "$JOB_LIMIT_S" "$h.out" "$h" "$job" --set metrics.enabled=true \
  --set metrics.port_base="$port" --set launch.max_restarts=2
kill "$holder" 2>/dev/null || true
# A taken metrics port is no failure any more: the ranks take the next free block, and
# the start-up lines say so (the one the launcher announces, the one rank 0 serves).
expect_eq "(g) port in use" "exit" "$RP_RC" 0
served=$(grep -oE 'metrics on http://[^ ]*:[0-9]+/metrics' "$h.out" | head -n 1 | grep -oE ':[0-9]+/' | tr -dc 0-9 || true)
if grep -qE "metrics on [^ ]+:[0-9]+-[0-9]+ .*are taken on this host" "$h.out" &&
  [[ -n $served && $served != "$port" ]] &&
  ! grep -q 'restarting from the last checkpoint' "$h/logs/launcher.log" 2>/dev/null; then
  rp_row "(g) port in use" "one attempt, rank 0 served on $served beside the taken $port" PASS
else
  rp_row "(g) port in use" "restarted, or no 'are taken' notice, or served on '${served}' (taken $port)" FAIL
  rp_tail "$h.out"
fi

rp_finish
