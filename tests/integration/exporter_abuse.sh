#!/usr/bin/env bash
# The metrics exporter of a training rank under abuse (issue 21): a 2-rank bert-tiny CPU
# job with metrics on. Once rank 0 has trained a few steps, bench/scrape_load.py abuse
# holds 200 idle connections and 50 that trickle a request header one byte a second,
# sends garbage requests and one with a 1 MB header to rank 0's port, and scrapes it every
# 0.5 s for ABUSE_S seconds, as Prometheus would. Checks:
#   (a) every scrape during the abuse answers 200 with the metrics, each within 2 s;
#   (b) the 1 MB header is refused (431) and garbage gets an HTTP error or a closed
#       connection, never a hang;
#   (c) training goes on meanwhile (ringpilot_steps_total grows), and no rank fails;
#   (d) the idle connections are dropped by the exporter after its request timeout (10 s).
# How much a scraped exporter slows training is a benchmark (bench/scrape_load.sh), not
# asserted here.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/exporter_abuse.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init exporter_abuse

readonly JOB_LIMIT_S=400 ABUSE_S=20 PROBE_LIMIT_MS=2000
load=$RINGPILOT_SOURCE_DIR/bench/scrape_load.py
port=$(rp_free_ports 2)
job=$RP_TMP/job.yaml
cat >"$job" <<YAML
name: it-exporter-abuse
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, dropout: 0.1, seq_len: 64}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 100000, optimizer: sgd, lr: 0.01, threads_per_rank: 1, log_every_s: 60}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, bind: 127.0.0.1, port_base: $port}
YAML

run=$RP_TMP/run
out=$RP_TMP/out
# Started here rather than through rp_run: the test stops it (SIGTERM) when done.
timeout -k 20 "$JOB_LIMIT_S" "$RINGPILOT" run "$job" --run-dir "$run" >"$out" 2>&1 &
runner=$!
RP_JOB_PID=$runner # rp_cleanup stops it if the test ends early
# Rank 0 serving and past its first steps.
up=0
for _ in $(seq 1 1200); do
  kill -0 "$runner" 2>/dev/null || break
  steps=$(python3 "$load" scrape --ports "$port" --scrapers 1 --interval 0 --duration 0.05 2>/dev/null |
    python3 -c 'import json,sys; print(int(json.load(sys.stdin)["last_steps"].get(sys.argv[1], 0)))' "$port" || echo 0)
  if ((steps >= 5)); then
    up=1
    break
  fi
  sleep 0.2
done
if ((up == 0)); then
  rp_row "setup" "rank 0 never served ringpilot_steps_total >= 5 on port $port" FAIL
  rp_tail "$out"
  rp_finish
fi

result=$RP_TMP/abuse.json
python3 "$load" abuse --port "$port" --idle 200 --trickle 50 --duration "$ABUSE_S" \
  --probe-every 0.5 >"$result" 2>"$RP_TMP/abuse.err" || true
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$result" "$1"; }
cat "$result" >&2

probes=$(field probes)
failures=$(field probe_failures)
worst=$(field probe_max_ms)
if [[ $probes =~ ^[0-9]+$ ]] && ((probes >= 10)) && [[ $failures == 0 ]] && rp_le "$worst" "$PROBE_LIMIT_MS"; then
  rp_row "(a) scrapes answered" "$probes scrapes during ${ABUSE_S} s of abuse, all 200, slowest ${worst} ms" PASS
else
  rp_row "(a) scrapes answered" "$probes scrapes, $failures failed, slowest ${worst} ms (limit $PROBE_LIMIT_MS)" FAIL
  rp_tail "$RP_TMP/abuse.err"
fi

big=$(field big_header_status)
bad_garbage=$(python3 -c 'import json,sys
a = json.load(open(sys.argv[1]))["garbage_answers"]
print(" ".join(x for x in a if not (x.startswith("HTTP/") or x == "<closed>" or x == "<ConnectionResetError>")))' "$result")
if [[ $big == "HTTP/1.1 431 "* && -z $bad_garbage ]]; then
  rp_row "(b) 1 MB header, garbage" "'$big'; garbage: HTTP errors or closed" PASS
else
  rp_row "(b) 1 MB header, garbage" "1 MB header: '$big'; garbage answered: '$bad_garbage'" FAIL
fi

first=$(field steps_first)
last=$(field steps_last)
if rp_finite "$first" && rp_finite "$last" && python3 -c 'import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else 1)' "$first" "$last"; then
  rp_row "(c) training went on" "ringpilot_steps_total $first -> $last during the abuse" PASS
else
  rp_row "(c) training went on" "ringpilot_steps_total '$first' -> '$last'" FAIL
fi
closed=$(field idle_closed_by_server)
if [[ $closed == 200 ]]; then
  rp_row "(d) idle dropped" "all 200 idle connections closed by the exporter" PASS
else
  rp_row "(d) idle dropped" "$closed of 200 idle connections closed by the exporter after ${ABUSE_S} s" FAIL
fi

# The job trains on, unharmed: no rank failed. It is then stopped the way a user would
# (SIGTERM to `ringpilot run`, which timeout passes on).
if kill -0 "$runner" 2>/dev/null && ! grep -qs ' FATAL ' "$run"/logs/rank-*.log; then
  rp_row "(c) job" "still training after the abuse, no FATAL line" PASS
else
  rp_row "(c) job" "the job ended or a rank failed during the abuse (see $out)" FAIL
  rp_tail "$out"
fi
kill -TERM "$runner" 2>/dev/null || true
rc=0
wait "$runner" || rc=$?
RP_JOB_PID=""
rp_log "ringpilot run stopped: exit $rc"

rp_finish
