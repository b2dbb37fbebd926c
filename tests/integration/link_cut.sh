#!/usr/bin/env bash
# The network link between two "nodes" cut mid-run (issue 21). Two network namespaces
# rp-lc1-PID and rp-lc2-PID joined by a bridge in the root namespace (bridge
# 10.215.0.254/24, nodes 10.215.0.1 and .2), mpirun in the root namespace reaching them
# through an rsh agent (tests/integration/lib.sh). A 2-node x 1-rank bert-tiny CPU job
# (launch.backend mpi, comm.timeout_s 8, checkpoint every 10 steps, launch.max_restarts 3).
# Once rank 1 is past step 20, node 2's cable is pulled: its bridge-side veth goes down
# (`ip link set down`), so packets to and from node 2 are lost without an error, as on a
# dead switch port. Then:
#   (a) detected: a rank gives up within comm.timeout_s + a few seconds with a FATAL line
#       naming the collective and comm.timeout_s;
#   (b) reported: the attempt's report (attempts/1/failure.json) is written within
#       comm.timeout_s + SLACK_S of the cut and names the FATAL line;
#   (c) while the link stays down (DOWN_S), restart attempts fail and are reported (none
#       hangs);
#   (d) the link comes back: the next attempt resumes from the last checkpoint (step >= 20)
#       and the job finishes (exit 0, summary.json with restarts >= 1);
#   (e) nothing of the job is left running in either namespace.
#
# Needs root (CI runs as root). Everything created is removed on exit.
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/link_cut.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init link_cut

readonly JOB_LIMIT_S=600 TIMEOUT_S=8 SLACK_S=12 DOWN_S=${LINK_DOWN_S:-45} CUT_STEP=20
readonly SUBNET=10.215.0.0/24 BRIDGE_IP=10.215.0.254
readonly NODE_IPS=(10.215.0.1 10.215.0.2)
readonly NS=("rp-lc1-$$" "rp-lc2-$$")
readonly BR="rplcbr$$" VETH_HOST=("rplc1h$$" "rplc2h$$") VETH_NODE=("rplc1n$$" "rplc2n$$")

[[ $(id -u) -eq 0 ]] || rp_die "needs root to create network namespaces (run as root; CI does)"
for tool in ip unshare hostname; do
  command -v "$tool" >/dev/null || rp_die "'$tool' not found (iproute2, util-linux)"
done
rp_netns_clean_stale 'rp-lc[12]-*' rplcbr
rp_on_exit rp_netns_teardown
rp_netns_create
if ! rp_netns_tcp_probe "${NS[0]}" "${NS[1]}" "${NODE_IPS[1]}" ||
  ! rp_netns_tcp_probe - "${NS[1]}" "${NODE_IPS[1]}"; then
  rp_die "no TCP between the namespaces (a FORWARD DROP firewall policy on bridged traffic?)"
fi
rp_row "network" "${NS[0]}=${NODE_IPS[0]}, ${NS[1]}=${NODE_IPS[1]}, bridge $BR" PASS
agent=$RP_TMP/agent.sh
rp_netns_agent "$agent" "$RP_TMP/agent.log"

# A link left down by an interrupted test would break the next one: bring it up on exit.
link_up() { ip link set "${VETH_HOST[1]}" up 2>/dev/null || true; }
rp_on_exit link_up

job=$RP_TMP/job.yaml
cat >"$job" <<YAML
name: it-link-cut
world: {nodes: 2, procs_per_node: 1, device: cpu}
launch:
  backend: mpi
  max_restarts: 3
  hosts: ["${NODE_IPS[0]}:1", "${NODE_IPS[1]}:1"]
  mpirun_args: [--mca, plm_rsh_agent, "$agent", --mca, plm_rsh_no_tree_spawn, "1",
                --mca, oob_tcp_if_include, "$SUBNET", --mca, btl_tcp_if_include, "$SUBNET",
                --mca, btl, "self,vader,tcp"]
model: {name: bert-tiny, dropout: 0.1, seq_len: 64}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 120, optimizer: sgd, lr: 0.01, momentum: 0.9, seed: 7, threads_per_rank: 1,
        log_every_s: 60}
comm: {timeout_s: $TIMEOUT_S}
checkpoint: {every_steps: 10, keep: 2}
metrics: {enabled: false}
YAML

run=$RP_TMP/run
out=$RP_TMP/out
rp_run "$JOB_LIMIT_S" "$out" "$run" "$job" &
runner=$!
beat_step() { # beat_step RANK: the step in RANK's heartbeat (0 when none yet)
  python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["step"])
except Exception: print(0)' "$run/logs/rank-$1.heartbeat"
}
since() { python3 -c 'import sys,time;print(round(time.time()-float(sys.argv[1]),1))' "$1"; }
cut_s=""
for _ in $(seq 1 1800); do
  kill -0 "$runner" 2>/dev/null || break
  if (($(beat_step 1) >= CUT_STEP)); then
    ip link set "${VETH_HOST[1]}" down
    cut_s=$(date +%s.%N)
    rp_log "link of ${NS[1]} cut (${VETH_HOST[1]} down) at rank 1 step $(beat_step 1)"
    break
  fi
  sleep 0.1
done
if [[ -z $cut_s ]]; then
  rp_row "setup" "rank 1 never reached step $CUT_STEP" FAIL
  rp_tail "$out"
  wait "$runner" || true
  rp_finish
fi

# Keep the link down for DOWN_S, watching what the launcher does meanwhile.
report=$run/attempts/1/failure.json
report_s=""
while rp_le "$(since "$cut_s")" "$DOWN_S"; do
  if [[ -z $report_s && -f $report ]]; then
    report_s=$(python3 -c 'import os,sys;print(round(os.path.getmtime(sys.argv[1]) - float(sys.argv[2]), 1))' "$report" "$cut_s")
    rp_log "attempt 1 reported ${report_s} s after the cut"
  fi
  kill -0 "$runner" 2>/dev/null || break
  sleep 0.5
done
link_up
attempts_down=$(find "$run/attempts" -name failure.json 2>/dev/null | wc -l || true)
rp_log "link up again after $(since "$cut_s") s; $attempts_down attempt report(s) so far"
wait "$runner" || true

# (a) detected
# Every log line: TIME LEVEL message (TIME ISO 8601, UTC, milliseconds: sorts as time).
fatal=$(grep -hE '^[0-9-]{10}T[0-9:.]{12}Z FATAL ' "$run"/logs/rank-*.log 2>/dev/null | sort | head -n 1 || true)
if [[ $fatal == *"not complete after"*"comm.timeout_s"* ]]; then
  rp_row "(a) FATAL line" "${fatal#* FATAL }" PASS
else
  rp_row "(a) FATAL line" "no timeout FATAL in the rank logs: '${fatal}'" FAIL
fi
# (b) reported
if [[ -n $report_s ]] && rp_le "$report_s" "$((TIMEOUT_S + SLACK_S))"; then
  rp_row "(b) reported" "attempts/1/failure.json ${report_s} s after the cut (comm.timeout_s $TIMEOUT_S)" PASS
elif [[ -n $report_s ]]; then
  rp_row "(b) reported" "attempts/1/failure.json only ${report_s} s after the cut (> $TIMEOUT_S + $SLACK_S s)" FAIL
else
  rp_row "(b) reported" "no attempts/1/failure.json while the link was down (${DOWN_S} s)" FAIL
fi
if [[ -f $report ]]; then
  fm=$(rp_json "$report" fatal_message)
  if [[ $fm == *"comm.timeout_s"* ]]; then
    rp_row "(b) report names it" "fatal_message: $fm" PASS
  else
    rp_row "(b) report names it" "fatal_message '$fm'" FAIL
  fi
fi
# (c) attempts while the link was down
rp_row "(c) attempts while down" "$attempts_down failed attempt(s) reported in ${DOWN_S} s" INFO
grep 'ringpilot: ' "$out" | sed 's/^/    /' >&2 || true
# (d) finished after the link came back
if rp_expect_ok "(d) finished" "$out" "$run"; then
  restarts=$(rp_json "$run/summary.json" restarts)
  resumed=$(rp_json "$run/summary.json" resumed_from_step)
  if [[ $restarts =~ ^[0-9]+$ ]] && ((restarts >= 1)) && [[ $resumed =~ ^[0-9]+$ ]] && ((resumed >= CUT_STEP)); then
    rp_row "(d) resumed" "restarts $restarts, resumed_from_step $resumed" PASS
  else
    rp_row "(d) resumed" "restarts '$restarts', resumed_from_step '$resumed' (want >= 1, >= $CUT_STEP)" FAIL
  fi
fi
# (e) nothing left running in the namespaces
left=""
for ns in "${NS[@]}"; do
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  [[ -n $pids ]] && left+=" $ns: $pids"
done
if [[ -z $left ]]; then
  rp_row "(e) no orphan" "nothing left in either namespace" PASS
else
  rp_row "(e) no orphan" "still running:$left" FAIL
fi

rp_finish
