#!/usr/bin/env bash
# Placement plan and CPU binding (docs/topology.md): a 2-rank CPU job on this node.
# Checks that
#   - every rank logs its plan ("placement: rank R node H local R gpu - nic - cpus C (...)")
#     and the affinity it has after binding, and that they match;
#   - /proc/<pid>/status Cpus_allowed_list of each live rank (pid from its log) matches
#     its plan while the job runs;
#   - the two ranks' CPU sets are disjoint and within the CPUs this test may use; on a
#     machine with one NUMA node they are the two halves of those CPUs (2 cores: 0 and 1);
#   - rank 0 logs the cluster view and the table of both ranks, and exports no
#     ringpilot_expected_bus_bandwidth_bytes_per_second (CPU ranks on one node have no
#     topology model: no series rather than a false zero, docs/metrics.md);
#   - with --set placement.bind=none the ranks keep the full affinity.
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/placement_affinity.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init placement_affinity

allowed=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
numa_nodes=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' 2>/dev/null | wc -l)
((numa_nodes > 0)) || numa_nodes=1
(($(tr ',' '\n' <<<"$allowed" | wc -l) >= 2)) || rp_die "needs 2 CPUs, this test may use $allowed"
port_base=$(rp_free_ports 2)
job=$RP_TMP/job.yaml
cat >"$job" <<JOB
name: it-placement
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, dropout: 0.0, seq_len: 16}
data: {kind: synthetic, batch_per_rank: 1}
train: {steps: 15, optimizer: sgd, lr: 0.01, log_every_s: 5}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, bind: 127.0.0.1, port_base: $port_base}
fault: {straggler_rank: 1, straggler_ms: 200}
JOB

# While the job runs: each rank's Cpus_allowed_list (pid from its log), and rank 0's
# /metrics.
watch_job() {
  local run=$1 r pid
  for _ in $(seq 1 600); do
    for r in 0 1; do
      [[ -s $RP_TMP/live-$r ]] && continue
      pid=$(sed -n 's/.*placement: affinity .* (pid \([0-9]*\))$/\1/p' "$run/logs/rank-$r.log" \
        2>/dev/null | tail -n 1 || true)
      [[ -n $pid ]] || continue
      awk '/^Cpus_allowed_list:/ {print $2}' "/proc/$pid/status" >"$RP_TMP/live-$r" 2>/dev/null ||
        true
    done
    if [[ ! -s $RP_TMP/rank0.prom ]]; then
      python3 - "$port_base" "$RP_TMP/rank0.prom" <<'PY' || true
import sys, urllib.request
try:
    body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).read()
    open(sys.argv[2], "wb").write(body)
except Exception:
    pass
PY
    fi
    [[ -s $RP_TMP/live-0 && -s $RP_TMP/live-1 && -s $RP_TMP/rank0.prom ]] && return 0
    sleep 0.2
  done
}

run=$RP_TMP/run
watch_job "$run" &
watcher=$!
rp_run 300 "$RP_TMP/run.log" "$run" "$job"
wait "$watcher" || true
rp_expect_ok "job" "$RP_TMP/run.log" "$run" || rp_finish

# Plan and reported affinity per rank, as Python-normalized CPU lists.
cpus_of() { # LOG -> "PLAN_CPUS AFFINITY" (cpulist text)
  python3 - "$1" <<'PY'
import re, sys
plan = aff = "?"
for line in open(sys.argv[1]):
    m = re.search(r"placement: rank \d+ node \S+ local \d+ gpu (\S+) nic (\S+) cpus (\S+) \(", line)
    if m: plan = m.group(3)
    m = re.search(r"placement: affinity (\S+) \(pid", line)
    if m: aff = m.group(1)
print(plan, aff)
PY
}
expand() { # cpulist -> sorted comma list
  python3 -c '
import sys
out = []
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    out += range(int(a), int(b or a) + 1)
print(",".join(map(str, sorted(out))))' "$1"
}

declare -A plan
for r in 0 1; do
  read -r p a <<<"$(cpus_of "$run/logs/rank-$r.log")"
  plan[$r]=$p
  if [[ $p != "?" && $p == "$a" ]]; then
    rp_row "rank $r plan" "plan cpus $p, sched_getaffinity after binding $a" PASS
  else
    rp_row "rank $r plan" "plan cpus '$p' vs affinity '$a'" FAIL
  fi
  live=$(cat "$RP_TMP/live-$r" 2>/dev/null || echo "not read")
  rp_check "rank $r live" "/proc/<pid>/status Cpus_allowed_list '$live' = plan" \
    test "$live" == "$p"
done

p0=$(expand "${plan[0]}") p1=$(expand "${plan[1]}")
rp_check "disjoint" "rank 0 {$p0} and rank 1 {$p1} share no CPU, within {$allowed}" \
  python3 -c '
import sys
a, b, allowed = (set(map(int, s.split(","))) for s in sys.argv[1:4])
sys.exit(0 if a and b and not a & b and a | b <= allowed else 1)' "$p0" "$p1" "$allowed"
if ((numa_nodes == 1)); then
  want=$(python3 -c '
import sys
c = list(map(int, sys.argv[1].split(","))); h = len(c) // 2
print(",".join(map(str, c[:h])) + " " + ",".join(map(str, c[h:])))' "$allowed")
  rp_check "split" "one NUMA node: halves of {$allowed} = $want" test "$p0 $p1" == "$want"
fi

log0=$run/logs/rank-0.log
rp_check "cluster view" "rank 0 logs 'cluster: 1 node(s), 2 rank(s), 0 GPU(s)'" \
  grep -q "cluster: 1 node(s), 2 rank(s), 0 GPU(s)" "$log0"
rp_check "plan table" "rank 0 logs the plan of both ranks" \
  sh -c "grep -A2 'placement plan (placement.bind auto):' '$log0' | grep -c '  rank [01] node ' |
         grep -qx 2"
if [[ -s $RP_TMP/rank0.prom ]] && grep -q '^ringpilot_' "$RP_TMP/rank0.prom" &&
  ! grep -q '^ringpilot_expected_bus_bandwidth_bytes_per_second' "$RP_TMP/rank0.prom"; then
  rp_row "metric" "rank 0 exports no expected bus bandwidth (no topology model on CPU)" PASS
else
  rp_row "metric" "rank 0's scrape is empty, or has an expected bus bandwidth without a model" FAIL
fi

# placement.bind=none: nobody binds.
run_none=$RP_TMP/run-none
rp_run 300 "$RP_TMP/run-none.log" "$run_none" "$job" --set placement.bind=none \
  --set train.steps=2 --set fault.straggler_rank=-1
rp_expect_ok "job (bind none)" "$RP_TMP/run-none.log" "$run_none" || rp_finish
# shellcheck disable=SC2317  # called through rp_check
unbound() { [[ $1 == "-" && $2 == "$3" ]]; }
for r in 0 1; do
  read -r p a <<<"$(cpus_of "$run_none/logs/rank-$r.log")"
  [[ $a == "?" ]] && a_list="?" || a_list=$(expand "$a")
  rp_check "rank $r unbound" "bind none: plan cpus '$p', affinity {$a_list} = {$allowed}" \
    unbound "$p" "$a_list" "$allowed"
done
rp_finish
