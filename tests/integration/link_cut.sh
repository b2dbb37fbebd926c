#!/usr/bin/env bash
# The network link between two "nodes" cut mid-run (issue 21). Two network namespaces
# rp-lc1-PID and rp-lc2-PID joined by a bridge in the root namespace (bridge
# 10.215.0.254/24, nodes 10.215.0.1 and .2), mpirun in the root namespace reaching them
# through an rsh agent (tests/integration/lib.sh). A 2-node x 1-rank bert-tiny CPU job
# (launch.backend mpi, comm.timeout_s 8, launch.abort_grace_s 10, launch.start_timeout_s
# 20, checkpoint every 10 steps, launch.max_restarts 6). Once rank 1 is past step 20, node
# 2's cable is pulled: its bridge-side veth goes down (`ip link set down`), so packets to
# and from node 2 are lost without an error, as on a dead switch port. It comes back after
# DOWN_S (75 s; LINK_DOWN_S overrides). Checks:
#   (a) detected: a rank gives up within comm.timeout_s + a few seconds, with a FATAL line
#       naming the collective and comm.timeout_s;
#   (b) reported: attempts/1/failure.json within comm.timeout_s + abort_grace_s + SLACK_S
#       of the cut (mpirun itself waits for the unreachable host; ringpilot stops it), naming
#       the FATAL line, both ranks as timed out and lost_contact (no rank behind);
#   (c) restarted while the link is down: the attempts that start then cannot reach node 2
#       and are stopped after launch.start_timeout_s, each reported; none hangs;
#   (d) the link comes back: an attempt resumes from the last checkpoint (step >= 20) and
#       the job finishes (exit 0, summary.json with restarts >= 1);
#   (e) nothing of the job is left running in either namespace once it finished (stale
#       daemons on node 2 end when they find their mpirun gone; given up to STALE_S).
#
# Needs root (CI runs as root). Everything created is removed on exit.
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/link_cut.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init link_cut

readonly JOB_LIMIT_S=600 TIMEOUT_S=8 ABORT_GRACE_S=10 START_TIMEOUT_S=20 SLACK_S=6 CUT_STEP=20
readonly DOWN_S=${LINK_DOWN_S:-75} STALE_S=60
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
  max_restarts: 6
  abort_grace_s: $ABORT_GRACE_S
  start_timeout_s: $START_TIMEOUT_S
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
# In the background and waited for; its subshell leaves the exit status in a file.
(
  rp_run "$JOB_LIMIT_S" "$out" "$run" "$job"
  echo "$RP_RC" >"$RP_TMP/rc"
) &
runner=$!
beat_step() { # beat_step RANK: the step in RANK's heartbeat (0 when none yet)
  python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["step"])
except Exception: print(0)' "$run/logs/rank-$1.heartbeat"
}
since() { python3 -c 'import sys,time;print(round(time.time()-float(sys.argv[1]),1))' "$1"; }
mtime_after() { python3 -c 'import os,sys;print(round(os.path.getmtime(sys.argv[1]) - float(sys.argv[2]), 1))' "$1" "$2"; }
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

# The link stays down for DOWN_S while the launcher detects, reports and restarts.
while rp_le "$(since "$cut_s")" "$DOWN_S"; do
  kill -0 "$runner" 2>/dev/null || break
  sleep 0.5
done
link_up
up_s=$(date +%s.%N)
rp_log "link up again after $(since "$cut_s") s"
wait "$runner" || true
job_rc=$(cat "$RP_TMP/rc" 2>/dev/null || echo "?")

# (a) detected
# Every log line: TIME LEVEL message (TIME ISO 8601, UTC, milliseconds: sorts as time).
fatal=$(grep -hE '^[0-9-]{10}T[0-9:.]{12}Z FATAL ' "$run"/logs/rank-*.log 2>/dev/null | sort | head -n 1 || true)
fatal_s=$(python3 -c 'import datetime,sys
try:
    t = datetime.datetime.strptime(sys.argv[1], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    print(round(t.timestamp() - float(sys.argv[2]), 1))
except ValueError:
    print("nan")' "${fatal%% *}" "$cut_s")
if [[ $fatal == *"not complete after"*"comm.timeout_s"* ]] && rp_le "$fatal_s" "$((TIMEOUT_S + SLACK_S))"; then
  rp_row "(a) detected" "FATAL ${fatal_s} s after the cut: ${fatal#* FATAL }" PASS
else
  rp_row "(a) detected" "first FATAL ${fatal_s} s after the cut: '${fatal}'" FAIL
fi

# (b) reported
report=$run/attempts/1/failure.json
if [[ -f $report ]]; then
  report_s=$(mtime_after "$report" "$cut_s")
  if rp_le "$report_s" "$((TIMEOUT_S + ABORT_GRACE_S + SLACK_S))"; then
    rp_row "(b) reported" "attempts/1/failure.json ${report_s} s after the cut (timeout $TIMEOUT_S + abort grace $ABORT_GRACE_S s)" PASS
  else
    rp_row "(b) reported" "attempts/1/failure.json only ${report_s} s after the cut" FAIL
  fi
  diagnosis=$(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
print("timed_out_ranks=%s lost_contact=%s rank_behind=%s stopped=%s" % (
    r.get("timed_out_ranks"), r.get("lost_contact", False), r.get("rank_behind", "none"),
    "yes" if r.get("mpirun_stopped_because") else "no"))' "$report")
  if [[ $diagnosis == "timed_out_ranks=[0, 1] lost_contact=True rank_behind=none stopped=yes" ]]; then
    rp_row "(b) diagnosis" "$diagnosis" PASS
  else
    rp_row "(b) diagnosis" "$diagnosis (want both ranks timed out, lost contact, none behind, mpirun stopped)" FAIL
  fi
else
  rp_row "(b) reported" "no attempts/1/failure.json" FAIL
fi

# (c) restarts while the link was down: each failed attempt is reported, none hangs
down_reports=0 slow=""
for f in "$run"/attempts/*/failure.json; do
  [[ -f $f && $f != "$report" ]] || continue
  n=$(basename "$(dirname "$f")")
  at=$(mtime_after "$f" "$up_s")
  if rp_le "$at" 0; then down_reports=$((down_reports + 1)); fi
  why=$(rp_json "$f" mpirun_stopped_because)
  [[ $why == *"launch.start_timeout_s"* ]] || slow+=" attempt $n: ${why}"
done
if ((down_reports >= 1)) && [[ -z $slow ]]; then
  rp_row "(c) restarts while down" "$down_reports attempt(s) started while the link was down, each stopped after start_timeout_s ($START_TIMEOUT_S s) and reported" PASS
else
  rp_row "(c) restarts while down" "$down_reports attempt(s) reported while down;$slow" FAIL
fi
grep 'ringpilot: ' "$out" | grep -Ev 'checkpoint |placement|cluster|probe|host memory|^ringpilot:   ' |
  sed 's/^/    /' >&2 || true

# (d) finished after the link came back
if [[ $job_rc == 0 && -s $run/summary.json ]]; then
  restarts=$(rp_json "$run/summary.json" restarts)
  resumed=$(rp_json "$run/summary.json" resumed_from_step)
  if [[ $restarts =~ ^[0-9]+$ ]] && ((restarts >= 1)) && [[ $resumed =~ ^[0-9]+$ ]] && ((resumed >= CUT_STEP)); then
    rp_row "(d) resumed and finished" "exit 0 $(since "$up_s") s after the link came back; restarts $restarts, resumed_from_step $resumed" PASS
  else
    rp_row "(d) resumed and finished" "restarts '$restarts', resumed_from_step '$resumed' (want >= 1, >= $CUT_STEP)" FAIL
  fi
else
  rp_row "(d) resumed and finished" "exit '${job_rc}' (see $out)" FAIL
  rp_tail "$out"
fi

# (e) nothing left running in the namespaces
left=""
for ((i = 0; i < STALE_S; i++)); do
  left=""
  for ns in "${NS[@]}"; do
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    [[ -n $pids ]] && left+=" $ns: $(ps -o pid=,comm= -p "$(tr ' ' ',' <<<"${pids% }")" 2>/dev/null | tr -s ' \n' ' ')"
  done
  [[ -z $left ]] && break
  sleep 1
done
if [[ -z $left ]]; then
  rp_row "(e) no orphan" "nothing left in either namespace ($i s after the job ended)" PASS
else
  rp_row "(e) no orphan" "still running ${STALE_S} s after the job ended:$left" FAIL
fi

rp_finish
