#!/usr/bin/env bash
# Two jobs at once on one host, same metrics.port_base (the shipped examples' 18400 case,
# on a free base here): both run and serve.
#   (a) A and B start at the same moment: both `ringpilot run` checks find the same block
#       free, so one job's ranks find their ports taken and step up a block themselves;
#       both finish or serve, each job's prometheus-targets.json lists its own ports, no
#       port twice;
#   (b) C starts while A and B serve: its start-up line names the next free block and
#       says the lower ones are taken; its targets file lists that block; C exits 0;
#   (c) `ringpilot stop` ends A (exit 79).
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/two_jobs.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init two_jobs

readonly UP_WAIT_S=180
port_base=$(rp_free_ports 8)

# job NAME STEPS: a quickstart-like 2-rank CPU job (bert-tiny on synthetic tokens).
job() {
  cat >"$RP_TMP/$1.yaml" <<JOB
name: $1
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: $2, optimizer: sgd, lr: 0.01, threads_per_rank: 1, log_every_s: 1}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, bind: 127.0.0.1, port_base: $port_base}
JOB
}
# targets RUN_DIR: the ports its prometheus-targets.json lists, sorted, space-separated.
targets() {
  python3 - "$1/prometheus-targets.json" <<'PY' 2>/dev/null || true
import json, sys
ports = sorted(int(t.rsplit(":", 1)[1]) for g in json.load(open(sys.argv[1])) for t in g["targets"])
print(" ".join(map(str, ports)))
PY
}
# wait_targets RUN_DIR PID: until the run lists 2 targets (or it ended, or UP_WAIT_S).
wait_targets() {
  local deadline=$((SECONDS + UP_WAIT_S)) t
  while ((SECONDS < deadline)) && kill -0 "$2" 2>/dev/null; do
    t=$(targets "$1")
    [[ $(wc -w <<<"$t") -eq 2 ]] && { echo "$t"; return 0; }
    sleep 0.5
  done
  targets "$1"
}

job job-a 100000
job job-b 100000
job job-c 20

# (a) A and B at once.
timeout -k 20 600 "$RINGPILOT" run "$RP_TMP/job-a.yaml" --run-dir "$RP_TMP/run-a" >"$RP_TMP/a.out" 2>&1 &
apid=$!
timeout -k 20 600 "$RINGPILOT" run "$RP_TMP/job-b.yaml" --run-dir "$RP_TMP/run-b" >"$RP_TMP/b.out" 2>&1 &
bpid=$!
rp_on_exit "kill -TERM $apid $bpid 2>/dev/null; wait $apid $bpid 2>/dev/null || true"
ta=$(wait_targets "$RP_TMP/run-a" "$apid")
tb=$(wait_targets "$RP_TMP/run-b" "$bpid")
all="$ta $tb"
distinct=$(tr ' ' '\n' <<<"$all" | grep -c . || true)
unique=$(tr ' ' '\n' <<<"$all" | grep . | sort -u | wc -l)
if kill -0 "$apid" 2>/dev/null && kill -0 "$bpid" 2>/dev/null && ((distinct == 4 && unique == 4)); then
  rp_row "(a) at once" "both run: A on $ta, B on $tb (base $port_base)" PASS
else
  rp_row "(a) at once" "A '$ta', B '$tb'; A alive $(kill -0 "$apid" 2>/dev/null && echo yes || echo no), B alive $(kill -0 "$bpid" 2>/dev/null && echo yes || echo no)" FAIL
  rp_tail "$RP_TMP/a.out"
  rp_tail "$RP_TMP/b.out"
fi

# (b) C while A and B serve: the start-up line names the block it found.
highest=$(tr ' ' '\n' <<<"$all" | grep . | sort -n | tail -n 1)
c_first=$((port_base + 4))
[[ -n $highest ]] && ((highest + 1 > c_first)) && c_first=$((highest + 1))
timeout -k 20 600 "$RINGPILOT" run "$RP_TMP/job-c.yaml" --run-dir "$RP_TMP/run-c" >"$RP_TMP/c.out" 2>&1 &
cpid=$!
tc=$(wait_targets "$RP_TMP/run-c" "$cpid")
crc=0
wait "$cpid" || crc=$?
if ((crc == 0)) && [[ $tc == "$c_first $((c_first + 1))" ]] &&
  grep -q "^ringpilot: metrics on 127.0.0.1:$c_first-$((c_first + 1)) (a port per local rank, path /metrics; $port_base-$((c_first - 1)) are taken on this host" "$RP_TMP/c.out"; then
  rp_row "(b) next free block" "C exit 0 on $tc; its start-up line names them" PASS
else
  rp_row "(b) next free block" "C exit $crc, targets '$tc' (want $c_first $((c_first + 1))): $(grep '^ringpilot: metrics' "$RP_TMP/c.out")" FAIL
  rp_tail "$RP_TMP/c.out"
fi

# (c) stop A and B.
for x in a b; do
  "$RINGPILOT" stop "$RP_TMP/run-$x" --timeout 120 >"$RP_TMP/stop-$x.txt" 2>&1 || true
done
arc=0
wait "$apid" || arc=$?
brc=0
wait "$bpid" || brc=$?
if ((arc == 79 && brc == 79)); then
  rp_row "(c) stop" "A and B stopped: exit 79 each" PASS
else
  rp_row "(c) stop" "A exit $arc, B exit $brc (want 79)" FAIL
  rp_tail "$RP_TMP/a.out"
fi
rp_finish
