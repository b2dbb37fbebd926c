#!/usr/bin/env bash
# A real Slurm on one machine: munged on a private socket, slurmctld in the root network
# namespace on a bridge (10.214.0.254), and two slurmd, `n1` and `n2`, each in its own
# network + UTS namespace (10.214.0.1 and .2, host names n1 and n2). The jobs are the
# scripts `ringpilot slurm render` prints, submitted with sbatch; inside them `ringpilot
# run` (launch.backend slurm) runs mpirun over the allocation, and mpirun starts its
# daemon on n2 through Slurm (srun), as on a real cluster.
#
# The job files name no launch.backend: `slurm render` implies it.
# Phase 1: a 2-node x 2-rank CPU job completes: summary.json, checkpoints, rank logs on
#   n1 (ranks 0,1) and n2 (ranks 2,3); its slurm.directives reach Slurm (the job's
#   Comment) and its slurm.setup lines run in the batch script (an unset variable too).
# Phase 2: a longer job gets `scancel --signal=USR1 --batch` after a few steps: the ranks
#   checkpoint step K, the batch script requeues the job, and the rerun resumes from K
#   (not 0) and finishes every step. Meanwhile its ranks' metrics (metrics.bind left at
#   127.0.0.1, which the render makes 0.0.0.0) are scraped from the root namespace, i.e.
#   from another host, on both nodes' addresses; `ringpilot status` there says running on
#   n1, and finished at the end.
#
# Debian's slurmd accepts `-N NAME`, but two slurmd on one host would share one host
# name and network, so mpirun and the ranks could not tell the nodes apart; hence the
# namespaces (docs/slurm.md). Needs root and the slurm-wlm and munge packages
# (scripts/setup.sh). Everything started is stopped and removed on exit; leftovers of a
# killed earlier run are removed first.
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/slurm_cluster.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init slurm_cluster

readonly SUBNET=10.214.0.0/24 BRIDGE_IP=10.214.0.254
readonly NODE_IPS=(10.214.0.1 10.214.0.2) NODES=(n1 n2)
readonly NS=("rpsl-n1-$$" "rpsl-n2-$$")
readonly BR="rpslbr$$" VETH_HOST=("rpsl1h$$" "rpsl2h$$") VETH_NODE=("rpsl1n$$" "rpsl2n$$")
# Daemons of this run, listed for a later run to remove should this one be killed.
readonly PID_DIR=/run/ringpilot-it-slurm
readonly PID_LIST=$PID_DIR/$$.pids
readonly JOB1_LIMIT_S=150 JOB2_LIMIT_S=240 STEPS2=16 METRICS_BASE=9400

[[ $(id -u) -eq 0 ]] || rp_die "needs root (network namespaces, Slurm daemons); CI runs as root"
for tool in slurmctld slurmd sbatch scontrol squeue sinfo scancel munged mungekey ip nsenter \
  unshare hostname; do
  command -v "$tool" >/dev/null ||
    rp_die "'$tool' not found: install slurm-wlm and munge (scripts/setup.sh), iproute2, util-linux"
done

# --- leftovers of a killed earlier run ---------------------------------------------------
mkdir -p "$PID_DIR"
for f in "$PID_DIR"/*.pids; do
  [[ -e $f ]] || continue
  owner=$(basename "$f" .pids)
  if [[ $owner =~ ^[0-9]+$ ]] && kill -0 "$owner" 2>/dev/null; then continue; fi
  while read -r pid; do
    # Only the daemons that run recorded, and only if the pid still is one of them.
    if [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
      grep -qE '^(slurmctld|slurmd|munged|/usr/sbin/(slurmctld|slurmd|munged)) '; then
      rp_log "killing stale daemon $pid of an earlier run"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done <"$f"
  rm -f "$f"
done
rp_netns_clean_stale 'rpsl-n[12]-*' rpslbr

# --- teardown (EXIT trap) ------------------------------------------------------------------
SL=$RP_TMP/slurm
export SLURM_CONF=$SL/slurm.conf
# shellcheck disable=SC2317  # called from the EXIT trap (rp_on_exit)
teardown() {
  local pid f i
  if [[ -s $SLURM_CONF ]] && [[ -e $SL/slurmctld.pid ]]; then
    timeout 10 scancel --user=root >/dev/null 2>&1 || true
  fi
  for f in "$SL"/slurmd-n1.pid "$SL"/slurmd-n2.pid "$SL"/slurmctld.pid "$SL"/munge/munged.pid; do
    [[ -s $f ]] || continue
    pid=$(cat "$f")
    [[ $pid =~ ^[0-9]+$ ]] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for ((i = 0; i < 50; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rp_netns_teardown  # slurmstepd, orted and ranks still inside the namespaces go first
  rm -f "$PID_LIST"
}
rp_on_exit teardown

# On failure: the daemons' logs (the work directory is kept as well).
# shellcheck disable=SC2317  # called from rp_fail_logs
dump_logs() {
  local f
  for f in "$SL"/log/*.log; do [[ -e $f ]] && rp_tail "$f" 15; done
  return 0
}

# --- network: bridge in the root namespace, one namespace per node -----------------------
rp_netns_create

# --- munge and Slurm -------------------------------------------------------------------------
mkdir -p "$SL"/{munge,state,spool/n1,spool/n2,log} "$RP_TMP/runs"
chmod 700 "$SL/munge"
mungekey -c -k "$SL/munge/munge.key" >/dev/null 2>&1 || rp_die "mungekey failed"
chmod 400 "$SL/munge/munge.key"
munged --force --socket="$SL/munge/munge.sock" --key-file="$SL/munge/munge.key" \
  --pid-file="$SL/munge/munged.pid" --log-file="$SL/log/munged.log" \
  --seed-file="$SL/munge/munge.seed" || rp_die "munged did not start (see $SL/log/munged.log)"
cat "$SL/munge/munged.pid" >>"$PID_LIST"

ctld_port=$(rp_free_ports 1)
cat >"$SLURM_CONF" <<EOF
ClusterName=rpit
SlurmctldHost=$(hostname -s)($BRIDGE_IP)
SlurmctldPort=$ctld_port
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SL/munge/munge.sock
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool/%n
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd-%n.pid
SlurmctldLogFile=$SL/log/slurmctld.log
SlurmdLogFile=$SL/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobRequeue=1
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=n1 NodeAddr=${NODE_IPS[0]} CPUs=2 State=UNKNOWN
NodeName=n2 NodeAddr=${NODE_IPS[1]} CPUs=2 State=UNKNOWN
PartitionName=it Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
# -i: ignore saved state (a fresh cluster every run).
slurmctld -i -f "$SLURM_CONF" || { dump_logs; rp_die "slurmctld did not start"; }
for i in 0 1; do
  # nsenter --net (not `ip netns exec`, which remounts /sys and hides the cgroup mounts
  # slurmd initialises) and a UTS namespace of its own: jobs on it see host name nK.
  # shellcheck disable=SC2016  # expanded by the inner sh
  nsenter --net="/var/run/netns/${NS[i]}" unshare --uts \
    sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' slurmd "${NODES[i]}" "$SLURM_CONF" ||
    { dump_logs; rp_die "slurmd ${NODES[i]} did not start"; }
done
sleep 0.5
for f in "$SL"/slurmctld.pid "$SL"/slurmd-n1.pid "$SL"/slurmd-n2.pid; do
  [[ -s $f ]] && cat "$f" >>"$PID_LIST"
done
ready=0
for ((i = 0; i < 60; i++)); do
  states=$(timeout 10 sinfo -h -N -o '%N %T' 2>/dev/null | sort | tr '\n' ' ' || true)
  if [[ $states == "n1 idle n2 idle " ]]; then
    ready=1
    break
  fi
  sleep 0.5
done
if ((ready)); then
  rp_row "cluster" "slurmctld + slurmd n1 (${NODE_IPS[0]}), n2 (${NODE_IPS[1]}): idle" PASS
else
  dump_logs
  rp_die "nodes not idle after 30 s (sinfo: '${states:-none}')"
fi

# --- helpers -------------------------------------------------------------------------------
# job_field ID FIELD: one field of `scontrol show job` (e.g. JobState, Restarts).
job_field() {
  timeout 10 scontrol show job "$1" -o 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# wait_done ID LIMIT_S: wait for a final state; prints it.
wait_done() {
  local id=$1 limit=$2 t0=$SECONDS state=""
  while ((SECONDS - t0 < limit)); do
    state=$(job_field "$id" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
        echo "$state"
        return 0
        ;;
    esac
    sleep 1
  done
  echo "TIMEOUT_WAITING(${state:-unknown})"
}

# submit NAME YAML: render the script with ringpilot, check it, sbatch it; prints the id.
submit() {
  local yaml=$2 script=$RP_TMP/$1.sbatch
  "$RINGPILOT" slurm render "$yaml" >"$script" || return 1
  bash -n "$script" || return 1
  timeout 20 sbatch --parsable "$script" | cut -d';' -f1
}

# rank_nodes RUN_DIR: "" when ranks 0,1 ran on n1 and 2,3 on n2, else the problems.
rank_nodes() {
  local r want f problems=""
  for r in 0 1 2 3; do
    want=${NODES[r / 2]}
    f=$1/logs/rank-$r.log
    if [[ ! -s $f ]]; then
      problems+=" $r:no-log"
    elif ! grep -q "rank $r/4 on $want " "$f"; then
      problems+=" $r:not-on-$want"
    fi
  done
  echo "$problems"
}

common=$(
  cat <<EOF
world: {nodes: 2, procs_per_node: 2, device: cpu}
launch: {max_restarts: 0}
model: {name: resnet18-cifar}
data: {kind: synthetic, batch_per_rank: 2}
EOF
)

# --- phase 1: a job completes ----------------------------------------------------------------
cat >"$RP_TMP/job1.yaml" <<EOF
name: it-slurm
$common
train: {steps: 6, optimizer: sgd, lr: 0.01, seed: 0, threads_per_rank: 1, log_every_s: 60}
checkpoint: {every_steps: 3, keep: 2}
metrics: {enabled: false}
slurm:
  time: "00:10:00"
  signal_seconds: 60
  run_root: $RP_TMP/runs
  directives: ["--comment=ringpilot-it-directive"]
  setup: ['test -z "\$RP_IT_UNSET"', 'echo "ringpilot-it setup ran on \$(hostname)" >&2']
EOF
if ! id1=$(submit job1 "$RP_TMP/job1.yaml") || [[ ! $id1 =~ ^[0-9]+$ ]]; then
  dump_logs
  rp_die "ringpilot slurm render | sbatch failed (id '${id1:-}')"
fi
rp_log "phase 1: job $id1 submitted"
state1=$(wait_done "$id1" "$JOB1_LIMIT_S")
run1=$RP_TMP/runs/it-slurm-$id1
out1=$RP_TMP/runs/it-slurm-$id1.out
if [[ $state1 == COMPLETED && -s $run1/summary.json ]]; then
  rp_row "job $id1 (2x2, 6 steps)" "COMPLETED, summary.json written" PASS
else
  rp_row "job $id1 (2x2, 6 steps)" "state $state1, summary.json $([[ -s $run1/summary.json ]] && echo present || echo missing)" FAIL
  [[ -e $out1 ]] && rp_tail "$out1" 40
  dump_logs
fi
steps1=$(rp_json "$run1/summary.json" steps)
ws1=$(rp_json "$run1/summary.json" world_size)
if [[ $steps1 == 6 && $ws1 == 4 ]]; then
  rp_row "summary" "6 steps, world size 4" PASS
else
  rp_row "summary" "steps $steps1, world size $ws1 (want 6, 4)" FAIL
fi
if [[ -d $run1/checkpoints/step-00000006 && -d $run1/checkpoints/step-00000003 ]]; then
  rp_row "checkpoints" "step-00000003, step-00000006" PASS
else
  rp_row "checkpoints" "have: $(cd "$run1/checkpoints" 2>/dev/null && echo step-*)" FAIL
fi
problems=$(rank_nodes "$run1")
if [[ -z $problems ]]; then
  rp_row "nodes" "ranks 0,1 on n1 and 2,3 on n2 (rank logs)" PASS
else
  rp_row "nodes" "rank logs:$problems" FAIL
fi
if grep -qx 'n1 slots=2' "$run1/hostfile" 2>/dev/null && grep -qx 'n2 slots=2' "$run1/hostfile"; then
  rp_row "backend slurm" "ringpilot run built the hosts from the allocation (n1, n2)" PASS
else
  rp_row "backend slurm" "hostfile: $(tr '\n' ' ' <"$run1/hostfile" 2>/dev/null)" FAIL
fi
comment=$(job_field "$id1" Comment)
if [[ $comment == ringpilot-it-directive ]] && grep -q 'ringpilot-it setup ran on n1' "$out1"; then
  rp_row "directives, setup" "Comment=$comment (slurm.directives); setup lines ran on n1" PASS
else
  rp_row "directives, setup" "Comment='${comment}', setup lines in $out1: $(grep -c 'setup ran' "$out1" 2>/dev/null || true)" FAIL
fi

# --- phase 2: USR1 mid-run, checkpoint, requeue, resume ------------------------------------
# The straggler sleep makes each step take >= 0.3 s, so that the signal lands mid-run.
cat >"$RP_TMP/job2.yaml" <<EOF
name: it-slurm-usr1
$common
train: {steps: $STEPS2, optimizer: sgd, lr: 0.01, seed: 0, threads_per_rank: 1, log_every_s: 0.1}
checkpoint: {every_steps: 0, keep: 2}
metrics: {enabled: true, bind: 127.0.0.1, port_base: $METRICS_BASE}
fault: {straggler_rank: 3, straggler_ms: 300}
slurm: {time: "00:10:00", signal_seconds: 60, run_root: $RP_TMP/runs}
EOF
if ! id2=$(submit job2 "$RP_TMP/job2.yaml") || [[ ! $id2 =~ ^[0-9]+$ ]]; then
  rp_die "ringpilot slurm render | sbatch failed for phase 2 (id '${id2:-}')"
fi
rp_log "phase 2: job $id2 submitted"
run2=$RP_TMP/runs/it-slurm-usr1-$id2
out2=$RP_TMP/runs/it-slurm-usr1-$id2.out
# Scrape both nodes from here (the root namespace: another host to them) while the job
# runs, on any of the job's metrics ports (docs/metrics.md has the port rule).
python3 - "$RP_TMP/scrape.txt" "$METRICS_BASE" 4 90 "${NODE_IPS[@]}" <<'PY' &
import sys, time, urllib.request
out, base, nports, limit, ips = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
seen = {}
deadline = time.time() + limit
while time.time() < deadline and len(seen) < len(ips):
    for ip in ips:
        for port in range(base, base + nports):
            if ip in seen:
                break
            try:
                with urllib.request.urlopen(f"http://{ip}:{port}/metrics", timeout=0.5) as r:
                    if b"ringpilot_" in r.read():
                        seen[ip] = port
            except Exception:
                pass
    time.sleep(0.2)
with open(out, "w") as f:
    f.write(" ".join(f"{ip}:{port}" for ip, port in sorted(seen.items())) + "\n")
sys.exit(0 if len(seen) == len(ips) else 1)
PY
scrape_pid=$!
rp_on_exit "kill $scrape_pid 2>/dev/null || true"
# A few steps first (rank 0 logs "step N/30").
t0=$SECONDS
signalled=0
while ((SECONDS - t0 < 120)); do
  if grep -qE "step ([3-9]|1[0-9])/$STEPS2 " "$run2/logs/rank-0.log" 2>/dev/null; then
    "$RINGPILOT" status "$run2" >"$RP_TMP/status2-running.txt" 2>&1 || true
    timeout 10 scancel --signal=USR1 --batch "$id2" && signalled=1
    break
  fi
  [[ $(job_field "$id2" JobState) =~ ^(RUNNING|PENDING|CONFIGURING)$ ]] || break
  sleep 0.3
done
if ((signalled)); then
  rp_row "USR1" "scancel --signal=USR1 --batch $id2 after $(grep -oE "step [0-9]+/$STEPS2" "$run2/logs/rank-0.log" | tail -1)" PASS
else
  rp_row "USR1" "job $id2 did not reach step 3 in 120 s (state $(job_field "$id2" JobState))" FAIL
  [[ -e $out2 ]] && rp_tail "$out2" 40
  dump_logs
  rp_finish
fi
# Requeued: Slurm holds a requeued job until BeginTime (now + 2 min); start it sooner.
# Not at once: the slurmd revoke the old run's credential, and refuse a new one issued
# within the same second ("Job credential revoked"); so wait until both nodes are idle
# again, and 2 s more.
t0=$SECONDS
requeued=0
while ((SECONDS - t0 < 90)); do
  restarts=$(job_field "$id2" Restarts)
  state=$(job_field "$id2" JobState)
  if [[ ${restarts:-0} -ge 1 && $state == PENDING ]]; then
    requeued=1
    for ((i = 0; i < 60; i++)); do
      [[ $(timeout 10 sinfo -h -N -o '%N %T' 2>/dev/null | sort | tr '\n' ' ') == "n1 idle n2 idle " ]] && break
      sleep 0.5
    done
    sleep 2
    timeout 10 scontrol update JobId="$id2" StartTime=now || true
    break
  fi
  [[ $state =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT)$ ]] && break
  sleep 0.5
done
state2=$(wait_done "$id2" "$JOB2_LIMIT_S")
restarts=$(job_field "$id2" Restarts)
if ((requeued)) && [[ $state2 == COMPLETED && ${restarts:-0} == 1 ]]; then
  rp_row "requeue" "job $id2 requeued once (Restarts=1), then COMPLETED" PASS
else
  rp_row "requeue" "requeued=$requeued, Restarts=${restarts:-?}, final state $state2" FAIL
  [[ -e $out2 ]] && rp_tail "$out2" 60
  dump_logs
fi

# Every rank checkpointed the same step K and stopped.
ks=""
for r in 0 1 2 3; do
  k=$(grep -oE 'preempted: SIGUSR1 received; checkpoint of step [0-9]+' "$run2/logs/rank-$r.log" 2>/dev/null |
    grep -oE '[0-9]+$' | head -1 || true)
  ks+="${k:-none} "
done
read -r k0 _ <<<"$ks"
if [[ $k0 =~ ^[0-9]+$ && $ks == "$k0 $k0 $k0 $k0 " && $k0 -gt 0 && $k0 -lt $STEPS2 ]]; then
  rp_row "preemption checkpoint" "all 4 ranks stopped after step $k0; checkpoints/step-$(printf '%08d' "$k0")" PASS
else
  rp_row "preemption checkpoint" "steps per rank: $ks(want one K in 1..$((STEPS2 - 1)))" FAIL
  k0=-1
fi
if ((k0 > 0)) && grep -q "job preempted: the ranks checkpointed and stopped; exit 75" "$run2/logs/launcher.log" &&
  grep -q "checkpointed and stopped; requeueing it" "$out2"; then
  rp_row "exit 75 -> requeue" "ringpilot run exited 75 (preempted), the script requeued" PASS
else
  rp_row "exit 75 -> requeue" "no 'job preempted' in launcher.log or no requeue line in $out2" FAIL
fi
starts=$(grep -c "ringpilot: job $id2 start " "$out2" 2>/dev/null || true)
if [[ $starts == 2 ]] && grep -q "restart count 1)" "$out2"; then
  rp_row "two starts" "the job's output shows starts 0 and 1 (restart count)" PASS
else
  rp_row "two starts" "$starts start line(s) in $out2" FAIL
fi
resumed=$(rp_json "$run2/summary.json" resumed_from_step)
steps2=$(rp_json "$run2/summary.json" steps)
if ((k0 > 0)) && [[ $resumed == "$k0" && $steps2 == "$STEPS2" ]] &&
  grep -q "resumed from .*step-$(printf '%08d' "$k0") at step $k0" "$run2/logs/rank-0.log"; then
  rp_row "resume" "rerun resumed from step $k0 (not 0) and finished $STEPS2 steps" PASS
else
  rp_row "resume" "summary resumed_from_step $resumed, steps $steps2 (want $k0, $STEPS2)" FAIL
fi
scrape_rc=0
wait "$scrape_pid" || scrape_rc=$?
if ((scrape_rc == 0)) && grep -q 'bind: "0.0.0.0"' "$run2/slurm-job.yaml"; then
  rp_row "metrics from another host" "scraped $(cat "$RP_TMP/scrape.txt") (bind 0.0.0.0 in the rendered job)" PASS
else
  rp_row "metrics from another host" "scraped '$(cat "$RP_TMP/scrape.txt" 2>/dev/null)' of ${NODE_IPS[*]}; $(grep -m1 'bind:' "$run2/slurm-job.yaml" 2>/dev/null)" FAIL
fi
"$RINGPILOT" status "$run2" --json >"$RP_TMP/status2-done.json" 2>&1 || true
if grep -q '^state       running (launcher pid [0-9]* on n1 (not checked from this host))' "$RP_TMP/status2-running.txt" &&
  [[ $(rp_json "$RP_TMP/status2-done.json" state) == finished && $(rp_json "$RP_TMP/status2-done.json" step) == "$STEPS2" ]]; then
  rp_row "ringpilot status" "running on n1 (seen from here), then finished $STEPS2 steps" PASS
else
  rp_row "ringpilot status" "while running: '$(grep '^state' "$RP_TMP/status2-running.txt" 2>/dev/null)'; after: $(rp_json "$RP_TMP/status2-done.json" state)" FAIL
fi
if [[ ! -e $run2/failure.json ]]; then
  rp_row "no failure report" "preemption is not a failure: no failure.json" PASS
else
  rp_row "no failure report" "failure.json written for a preemption" FAIL
fi
problems=$(rank_nodes "$run2")
if [[ -z $problems ]]; then
  rp_row "nodes (phase 2)" "ranks 0,1 on n1 and 2,3 on n2" PASS
else
  rp_row "nodes (phase 2)" "rank logs:$problems" FAIL
fi

rp_finish
