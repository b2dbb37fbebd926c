#!/usr/bin/env bash
# Run directories that cannot be corrupted (issue 29), on 1-rank CPU jobs:
#   (a) two `ringpilot run` of one new directory started at once: one trains, the other
#       exits 1 at once with "DIR is in use by ringpilot run (pid N on HOST since T);
#       ringpilot stop it first" (N the winner's), and the rank log has one attempt;
#   (b) a second `ringpilot run` (another train.lr) while a job runs: the same line, from
#       the lock record, and job.yaml and launcher.log untouched; `status` names the holder;
#   (c) the running launcher killed with SIGKILL: its mpirun and rank stop too, `status`
#       says the lock is stale, and the next run takes it over with a notice and finishes;
#   (d) a CIFAR-10 data_batch_1.bin of 5,000 records: exit 78, the FATAL line names the file
#       and both counts; `diagnose` of that run (failed before its first step) exits 0 with
#       the attempt, its exit, the rank and the line;
#   (e) a 5,000-record subset under its own name trains: "data.train: 5000 samples in 1
#       file" in the rank-0 log and summary.json; a stale .tmp-step-* is removed and the
#       corrupt-step-* beyond checkpoint.keep 2 are removed, each named in the log;
#   (f) job file errors: 800 unknown keys give 20 lines and "... and 780 more" with the known
#       keys once; a --set with text after its value and a nesting too deep are one line each.
# (The hang line naming the silent rank's longest silence is checked by hang.sh.)
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/run_dir_guard.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init run_dir_guard

readonly JOB_LIMIT_S=180 UP_WAIT_S=90
readonly TIME_RE='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
host=$(hostname)
job=$RP_TMP/job.yaml
cat >"$job" <<EOF
name: it-run-dir-guard
world: {nodes: 1, procs_per_node: 1, device: cpu}
launch: {backend: local, max_restarts: 0, preflight: false}
model: {name: bert-tiny}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 4, optimizer: sgd, lr: 0.01, threads_per_rank: 1, log_every_s: 1}
checkpoint: {every_steps: 0, keep: 2}
metrics: {enabled: false}
EOF

# lock_field DIR KEY: a field of DIR/run.lock ("" when none).
lock_field() {
  python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))[sys.argv[2]])
except Exception: print("")' "$1/run.lock" "$2"
}
# wait_running DIR PID: until DIR's rank 0 has logged a step (PID, the job, still alive).
wait_running() {
  local deadline=$((SECONDS + UP_WAIT_S))
  while ((SECONDS < deadline)) && kill -0 "$2" 2>/dev/null; do
    grep -qE 'step [0-9]+/' "$1/logs/rank-0.log" 2>/dev/null && return 0
    sleep 0.3
  done
  return 1
}

# --- (a) simultaneous start ----------------------------------------------------------------
a=$RP_TMP/together
"$RINGPILOT" run "$job" --run-dir "$a" >"$RP_TMP/a1.out" 2>&1 &
p1=$!
"$RINGPILOT" run "$job" --run-dir "$a" >"$RP_TMP/a2.out" 2>&1 &
p2=$!
rc1=0 rc2=0
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
if ((rc1 == 0 && rc2 != 0)); then
  winner=$p1 loser_out=$RP_TMP/a2.out loser_rc=$rc2
else
  winner=$p2 loser_out=$RP_TMP/a1.out loser_rc=$rc1
fi
want_re="^ringpilot: $a is in use by ringpilot run \(pid $winner on $host since $TIME_RE\); ringpilot stop it first\$"
attempts=$(grep -c ', attempt 1)' "$a/logs/rank-0.log" || true)
if (((rc1 == 0) != (rc2 == 0))) && ((loser_rc == 1)) && [[ $(wc -l <"$loser_out") -eq 1 ]] &&
  grep -qE "$want_re" "$loser_out" && [[ $attempts == 1 && -s $a/summary.json ]]; then
  rp_row "(a) simultaneous start" "$(cat "$loser_out")" PASS
else
  rp_row "(a) simultaneous start" "exits $rc1/$rc2, rank-0.log attempts $attempts, loser: $(head -c 300 "$loser_out")" FAIL
  rp_tail "$RP_TMP/a1.out" 10
  rp_tail "$RP_TMP/a2.out" 10
fi

# --- (b) a second run while one runs --------------------------------------------------------
b=$RP_TMP/busy
timeout -k 20 "$JOB_LIMIT_S" "$RINGPILOT" run "$job" --run-dir "$b" --set train.steps=100000 \
  >"$RP_TMP/b-long.out" 2>&1 &
long=$!
rp_on_exit "kill -TERM $long 2>/dev/null || true"
wait_running "$b" "$long" || rp_die "the long job did not reach a step within ${UP_WAIT_S} s"
holder=$(lock_field "$b" pid) since=$(lock_field "$b" started)
yaml_before=$(sha256sum <"$b/job.yaml")
t0=$SECONDS
rc=0
"$RINGPILOT" run "$job" --run-dir "$b" --set train.steps=100000 --set train.lr=0.05 \
  >"$RP_TMP/b-second.out" 2>&1 || rc=$?
want="ringpilot: $b is in use by ringpilot run (pid $holder on $host since $since); ringpilot stop it first"
if ((rc == 1)) && [[ $(cat "$RP_TMP/b-second.out") == "$want" ]] && ((SECONDS - t0 <= 5)) &&
  [[ $(sha256sum <"$b/job.yaml") == "$yaml_before" ]] &&
  [[ $(grep -c "ringpilot: run directory $b " "$b/logs/launcher.log") == 1 ]] &&
  ! grep -q 'in use' "$b/logs/launcher.log"; then
  rp_row "(b) start during a run" "exit 1 in $((SECONDS - t0)) s: ${want#ringpilot: }" PASS
else
  rp_row "(b) start during a run" "exit $rc: $(head -c 300 "$RP_TMP/b-second.out") (want '$want')" FAIL
fi
"$RINGPILOT" status "$b" >"$RP_TMP/b-status.txt" 2>&1 || true
rp_check "(b) status names the holder" "$(grep '^lock' "$RP_TMP/b-status.txt" || echo 'no lock row')" \
  grep -qF "lock        held by ringpilot run (pid $holder on $host since $since) (run.lock)" "$RP_TMP/b-status.txt"

# --- (c) the launcher killed with SIGKILL ---------------------------------------------------
mpirun_pid=$(pgrep -P "$holder" | head -n 1 || true)
kill -KILL "$holder"
gone=0
for _ in $(seq 1 100); do
  if [[ -z $mpirun_pid ]] || ! kill -0 "$mpirun_pid" 2>/dev/null; then gone=1 && break; fi
  sleep 0.2
done
wait "$long" 2>/dev/null || true
rp_check "(c) mpirun ends with its launcher" "mpirun pid ${mpirun_pid:-none} gone: $gone" test "$gone" = 1
"$RINGPILOT" status "$b" >"$RP_TMP/c-status.txt" 2>&1 || true
rp_check "(c) status: stale lock" "$(grep '^lock' "$RP_TMP/c-status.txt" || echo 'no lock row')" \
  grep -qF "lock        stale: ringpilot run (pid $holder on $host since $since) no longer runs" "$RP_TMP/c-status.txt"
rp_run "$JOB_LIMIT_S" "$RP_TMP/c.out" "$b" "$job" --set train.steps=3
want="ringpilot: $b: the lock of ringpilot run (pid $holder on $host since $since) is stale (pid $holder no longer runs); taking it over"
if ((RP_RC == 0)) && grep -qxF "$want" "$RP_TMP/c.out" && [[ $(rp_json "$b/summary.json" steps) == 3 ]]; then
  rp_row "(c) stale lock taken over" "${want#ringpilot: }" PASS
else
  rp_row "(c) stale lock taken over" "exit $RP_RC; want '$want'" FAIL
  rp_tail "$RP_TMP/c.out"
fi

# --- (d) a CIFAR batch cut on a record boundary; diagnose of a failure before step 1 ----------
fashion=$RP_TMP/fashion
python3 "$(dirname "${BASH_SOURCE[0]}")/../data/make_cifar_fashion.py" "$fashion" --train 5000 \
  --test 20 >&2
mkdir -p "$RP_TMP/cut"
cp "$fashion/data_batch_fashion.bin" "$RP_TMP/cut/data_batch_1.bin"
cifar=(--set model.name=resnet18-cifar --set model.num_classes=10 --set data.kind=cifar
  --set data.batch_per_rank=4 --set train.steps=2)
d=$RP_TMP/cut-run
rp_run "$JOB_LIMIT_S" "$RP_TMP/d.out" "$d" "$job" "${cifar[@]}" --set "data.train=\"$RP_TMP/cut\""
msg="$RP_TMP/cut/data_batch_1.bin: 5000 records, but CIFAR-10's data_batch_1.bin holds 10000 (cut short? a file of other records must not have a distribution name)"
# The trainer adds where it ran: "MSG (rank 0 on HOST)".
line=$(grep -m1 '^ringpilot: first failing rank: ' "$RP_TMP/d.out" || true)
if ((RP_RC == 78)) && [[ $line == "ringpilot: first failing rank: 0: $msg (rank 0 on "*")" ]]; then
  rp_row "(d) CIFAR count checked" "exit 78: ${msg#"$RP_TMP"/}" PASS
else
  rp_row "(d) CIFAR count checked" "exit $RP_RC, want 78 and '$msg'" FAIL
  rp_tail "$RP_TMP/d.out"
fi
rc=0
"$RINGPILOT" diagnose "$d" >"$RP_TMP/d-diagnose.txt" 2>&1 || rc=$?
want="failure: attempt 1 failed before its first step (exit 78): rank 0: $msg (rank 0 on "
line=$(grep -m1 '^failure: ' "$RP_TMP/d-diagnose.txt" || true)
if ((rc == 0)) && [[ $line == "$want"*") (failure.json)" ]]; then
  rp_row "(d) diagnose before step 1" "exit 0: ${want%%: rank 0*}: rank 0: ..." PASS
else
  rp_row "(d) diagnose before step 1" "exit $rc: $(head -c 300 "$RP_TMP/d-diagnose.txt")" FAIL
fi

# --- (e) data counted; checkpoint housekeeping ----------------------------------------------
e=$RP_TMP/counted
mkdir -p "$e/checkpoints/.tmp-step-00000002-4242" "$e/checkpoints/corrupt-step-00000001-100" \
  "$e/checkpoints/corrupt-step-00000002-200" "$e/checkpoints/corrupt-step-00000003-300"
touch -d '1 hour ago' "$e/checkpoints/.tmp-step-00000002-4242"
rp_run "$JOB_LIMIT_S" "$RP_TMP/e.out" "$e" "$job" "${cifar[@]}" \
  --set "data.train=\"$fashion/data_batch_fashion.bin\""
samples=$(python3 -c 'import json,sys;d=json.load(open(sys.argv[1]))["data"];print(d["train_samples"], d["train_files"])' "$e/summary.json" 2>/dev/null || echo missing)
if ((RP_RC == 0)) && grep -q ' INFO data.train: 5000 samples in 1 file$' "$e/logs/rank-0.log" &&
  [[ $samples == "5000 1" ]]; then
  rp_row "(e) data.train counted" "data.train: 5000 samples in 1 file; summary.json data $samples" PASS
else
  rp_row "(e) data.train counted" "exit $RP_RC, summary.json data: $samples" FAIL
  rp_tail "$RP_TMP/e.out"
fi
ck=$e/checkpoints
tidy_ok=1
for line in "removed $ck/.tmp-step-00000002-4242 (an unfinished save of an earlier attempt)" \
  "removed $ck/corrupt-step-00000001-100 (a corrupt checkpoint; checkpoint.keep 2 newer ones are kept)" \
  "kept $ck/corrupt-step-00000002-200 (a corrupt checkpoint set aside; delete it once looked at)" \
  "kept $ck/corrupt-step-00000003-300 (a corrupt checkpoint set aside; delete it once looked at)"; do
  grep -qF " INFO checkpoints: $line" "$e/logs/rank-0.log" || { tidy_ok=0 && rp_log "missing: $line"; }
done
left=$(cd "$ck" && find . -mindepth 1 -maxdepth 1 ! -name 'step-*' -printf '%f\n' | sort | tr '\n' ' ')
rp_check "(e) housekeeping" "left: $left" test "$tidy_ok/$left" = "1/corrupt-step-00000002-200 corrupt-step-00000003-300 "

# --- (f) bounded, exact job file errors -----------------------------------------------------
many=$RP_TMP/many.yaml
{
  printf 'name: x\nmodel: {name: bert-tiny}\ntrain:\n'
  for i in $(seq 1 800); do printf '  zz%dq: 1\n' "$i"; done
} >"$many"
rc=0
"$RINGPILOT" validate "$many" >"$RP_TMP/f.out" 2>&1 || rc=$?
lists=$(grep -c '(known: ' "$RP_TMP/f.out" || true)
if ((rc == 2)) && [[ $(wc -l <"$RP_TMP/f.out") == 21 && $(tail -n 1 "$RP_TMP/f.out") == "... and 780 more" ]] &&
  ((lists == 1)) && (($(wc -c <"$RP_TMP/f.out") < 4000)); then
  rp_row "(f) 800 unknown keys" "21 lines, $(wc -c <"$RP_TMP/f.out") bytes, known keys once, '... and 780 more'" PASS
else
  rp_row "(f) 800 unknown keys" "exit $rc, $(wc -l <"$RP_TMP/f.out") lines, known lists $lists" FAIL
fi
rc=0
"$RINGPILOT" validate "$job" --set 'train={steps: 5} junk' >"$RP_TMP/f-set.out" 2>&1 || rc=$?
want="--set[1]:1:18: train: text after the value: an override is one YAML value (quote text meant as one string)"
if ((rc == 2)) && [[ $(cat "$RP_TMP/f-set.out") == "$want" ]]; then
  rp_row "(f) --set trailing text" "$want" PASS
else
  rp_row "(f) --set trailing text" "exit $rc: $(head -c 300 "$RP_TMP/f-set.out")" FAIL
fi
deep=$RP_TMP/deep.yaml
{
  printf 'name: x\nmodel: {name: bert-tiny}\ntrain: '
  head -c 3000 /dev/zero | tr '\0' '['
  printf '\n'
} >"$deep"
rc=0
"$RINGPILOT" validate "$deep" >"$RP_TMP/f-deep.out" 2>&1 || rc=$?
if ((rc == 2)) && [[ $(wc -l <"$RP_TMP/f-deep.out") == 1 ]] &&
  grep -qE "^$deep:[0-9]+:[0-9]+: <yaml>: nested deeper than [0-9]+ levels\$" "$RP_TMP/f-deep.out"; then
  rp_row "(f) nesting too deep" "$(sed "s|$RP_TMP/||" "$RP_TMP/f-deep.out")" PASS
else
  rp_row "(f) nesting too deep" "exit $rc: $(head -c 300 "$RP_TMP/f-deep.out")" FAIL
fi

rp_finish
