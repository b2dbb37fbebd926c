#!/usr/bin/env bash
# A full disk while checkpointing (issue 21): a 2-rank bert-tiny CPU job whose run directory
# is a 60 MB tmpfs, checkpoint every 5 steps. The step-5 checkpoint (~35 MB) fits, step 10's
# does not:
#   (a) the job fails with one FATAL line naming the file and "No space left on device"
#       (no crash, no backtrace), exit non-zero, first failing rank 0;
#   (b) the temporary checkpoint directory is removed and step-00000005 is intact
#       (manifest.json and state.pt, as its manifest says);
#   (c) failure.json is written (the removed temp directory left room for it);
#   (d) with space again (the tmpfs grown to 300 MB), the same command resumes at step 5
#       and finishes.
# Needs root (mounts a tmpfs; CI runs as root).
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/disk_full.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init disk_full
[[ $(id -u) -eq 0 ]] || rp_die "needs root to mount a tmpfs (run as root; CI does)"

readonly JOB_LIMIT_S=300
fs=$RP_TMP/fs
mkdir -p "$fs"
mount -t tmpfs -o size=60m ringpilot-disk-full "$fs" || rp_die "cannot mount a tmpfs on $fs"
# shellcheck disable=SC2317  # called from the EXIT trap (rp_on_exit)
unmount_fs() { umount "$fs" 2>/dev/null || umount -l "$fs" 2>/dev/null || true; }
rp_on_exit unmount_fs

job=$RP_TMP/job.yaml
cat >"$job" <<'EOF'
name: it-disk-full
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, dropout: 0.1, seq_len: 64}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 20, optimizer: sgd, lr: 0.01, momentum: 0.9, seed: 7, threads_per_rank: 1,
        log_every_s: 60}
checkpoint: {every_steps: 5, keep: 3}
metrics: {enabled: false}
EOF

run=$fs/run
rp_run "$JOB_LIMIT_S" "$RP_TMP/out1" "$run" "$job"
if [[ $RP_RC -ne 0 && $RP_RC -ne 124 && $RP_RC -ne 137 ]]; then
  rp_row "(a) exit" "exit $RP_RC (non-zero)" PASS
else
  rp_row "(a) exit" "exit $RP_RC, want a failure" FAIL
fi
# Every log line: TIME LEVEL message (TIME ISO 8601, UTC, milliseconds).
fatal=$(grep -hE '^[0-9-]{10}T[0-9:.]{12}Z FATAL ' "$run"/logs/rank-0.log 2>/dev/null | tail -n 1 || true)
if [[ $fatal == *"checkpoints/"*"No space left on device"* ]]; then
  rp_row "(a) FATAL line" "${fatal#* FATAL }" PASS
else
  rp_row "(a) FATAL line" "rank-0.log has no FATAL naming a checkpoint file and ENOSPC" FAIL
  rp_tail "$RP_TMP/out1"
fi
if grep -qE 'terminate called|Aborted|backtrace|frame #' "$RP_TMP/out1"; then
  rp_row "(a) no crash" "the rank crashed (terminate/abort in the output)" FAIL
else
  rp_row "(a) no crash" "no terminate/abort/backtrace" PASS
fi
leftover=$(find "$run/checkpoints" -maxdepth 1 -name '.tmp-*' | head -n 1)
if [[ -z $leftover ]]; then
  rp_row "(b) temp removed" "no .tmp-step-* left" PASS
else
  rp_row "(b) temp removed" "left: ${leftover#"$run"/}" FAIL
fi
ck=$run/checkpoints/step-00000005
if [[ -f $ck/manifest.json && -f $ck/state.pt ]] &&
  [[ $(stat -c %s "$ck/state.pt") == "$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["files"]["state.pt"]["bytes"])' "$ck/manifest.json")" ]]; then
  rp_row "(b) step 5 intact" "manifest.json and state.pt of the manifest's size" PASS
else
  rp_row "(b) step 5 intact" "step-00000005 missing or damaged" FAIL
fi
if [[ -s $run/failure.json ]]; then
  rp_row "(c) failure.json" "first_failing_rank $(rp_json "$run/failure.json" first_failing_rank)" PASS
else
  rp_row "(c) failure.json" "not written" FAIL
fi

mount -o remount,size=300m "$fs" || rp_die "cannot grow the tmpfs"
rp_run "$JOB_LIMIT_S" "$RP_TMP/out2" "$run" "$job"
if rp_expect_ok "(d) with space again" "$RP_TMP/out2" "$run"; then
  got=$(rp_json "$run/summary.json" resumed_from_step)
  if [[ $got == 5 ]]; then rp_row "(d) resumed" "resumed_from_step 5" PASS; else rp_row "(d) resumed" "resumed_from_step $got (want 5)" FAIL; fi
fi

rp_finish
