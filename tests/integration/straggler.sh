#!/usr/bin/env bash
# Online straggler attribution: 4 CPU ranks, rank 2 slowed by 150 ms per step
# (fault.straggler_rank/straggler_ms). Checks that
#   - rank 0's live /metrics names rank 2 (ringpilot_straggler_wait_seconds_total
#     {culprit_rank="2"} > 0) while the job runs, and the exposition passes promtool;
#   - every rank's logs/rank-N.stats.json has rank 2 as the culprit of most steps, with
#     the wait attributed to it per step within 20% of 150 ms. The delay is large next
#     to the ~10 ms by which ranks sharing 2 cores leave the all-reduce apart (they start
#     their steps that much apart, and the blame is an arrival gap), so the check holds
#     on a loaded CI host too;
#   - `ringpilot diagnose RUN_DIR --json` names rank 2;
#   - every rank wrote RUN_DIR/trace-rank-N.json (valid JSON, step phases and collectives),
#     and diagnose merged them into RUN_DIR/trace.json with one process per rank.
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/straggler.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init straggler

readonly STEPS=30 SLOW_RANK=2 SLOW_MS=150
command -v promtool >/dev/null || rp_die "'promtool' not found (Debian package prometheus)"
port_base=$(rp_free_ports 4)
run=$RP_TMP/run
job=$RP_TMP/job.yaml
cat >"$job" <<JOB
name: it-straggler
world: {nodes: 1, procs_per_node: 4, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, dropout: 0.0, seq_len: 16}
data: {kind: synthetic, batch_per_rank: 1}
train: {steps: $STEPS, optimizer: sgd, lr: 0.01, threads_per_rank: 1, log_every_s: 5}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, bind: 127.0.0.1, port_base: $port_base}
fault: {straggler_rank: $SLOW_RANK, straggler_ms: $SLOW_MS}
JOB

# Scrape rank 0 while the job runs, until the culprit series shows up.
scrape=$RP_TMP/rank0.prom
scrape_once() {
  python3 - "$port_base" "$scrape" <<'PY'
import sys, urllib.request
try:
    body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).read().decode()
except Exception:
    sys.exit(1)
ok = any(l.startswith("ringpilot_straggler_wait_seconds_total") and 'culprit_rank="2"' in l
         and float(l.rsplit(" ", 1)[1]) > 0 for l in body.splitlines())
if ok:
    open(sys.argv[2], "w").write(body)
sys.exit(0 if ok else 1)
PY
}
(
  for _ in $(seq 1 600); do
    if scrape_once; then exit 0; fi
    sleep 0.2
  done
  exit 1
) &
scraper=$!
rp_run 300 "$RP_TMP/run.log" "$run" "$job"
scraped=0
wait "$scraper" && scraped=1
rp_expect_ok "job" "$RP_TMP/run.log" "$run" || rp_finish
if ((scraped)); then
  rp_row "live metrics" 'rank 0 exports ringpilot_straggler_wait_seconds_total{culprit_rank="2"} > 0' PASS
  rp_check "promtool" "rank 0 exposition passes promtool check metrics" \
    sh -c "promtool check metrics < '$scrape' >/dev/null 2>&1"
else
  rp_row "live metrics" "culprit_rank=\"2\" series never seen on rank 0 /metrics" FAIL
fi

for r in 0 1 2 3; do
  stats=$run/logs/rank-$r.stats.json
  if [[ ! -s $stats ]]; then
    rp_row "rank $r stats" "$stats missing" FAIL
    continue
  fi
  read -r top share per_step <<<"$(python3 - "$stats" "$SLOW_RANK" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); slow = sys.argv[2]
c = d["straggler"]["culprit_steps"]; w = d["straggler"]["wait_by_culprit_seconds"]
top = max(c, key=c.get) if c else "none"
steps = sum(c.values())
per = w.get(slow, 0.0) / c[slow] * 1e3 if c.get(slow) else 0.0
print(top, f"{c.get(slow, 0)}/{steps}", f"{per:.1f}")
PY
)"
  if [[ $top == "$SLOW_RANK" ]]; then
    rp_row "rank $r culprit" "rank $SLOW_RANK is the culprit of $share steps" PASS
  else
    rp_row "rank $r culprit" "top culprit is rank $top ($share steps for rank $SLOW_RANK)" FAIL
  fi
  if [[ $r != "$SLOW_RANK" ]]; then
    within=$(python3 -c "print('yes' if abs($per_step-$SLOW_MS) <= 0.2*$SLOW_MS else 'no')")
    if [[ $within == yes ]]; then
      rp_row "rank $r wait" "${per_step} ms per culprit step blamed on rank $SLOW_RANK (injected ${SLOW_MS} ms, limit 20%)" PASS
    else
      rp_row "rank $r wait" "${per_step} ms per culprit step blamed on rank $SLOW_RANK, not within 20% of ${SLOW_MS} ms" FAIL
    fi
  fi
done

diag=$RP_TMP/diagnose.json
if "$RINGPILOT" diagnose "$run" --json >"$diag" 2>"$RP_TMP/diagnose.err"; then
  named=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['straggler']['rank'])" "$diag" 2>/dev/null || echo "?")
  if [[ $named == "$SLOW_RANK" ]]; then
    rp_row "diagnose" "ringpilot diagnose names rank $named" PASS
  else
    rp_row "diagnose" "ringpilot diagnose names rank $named, expected $SLOW_RANK" FAIL
  fi
else
  rp_row "diagnose" "ringpilot diagnose failed: $(head -c 300 "$RP_TMP/diagnose.err")" FAIL
fi
rp_check "traces" "trace-rank-0..3.json are valid traces with phases and collectives; diagnose \
merged them into trace.json, one process per rank" python3 - "$run" "$diag" <<'PY'
import json, sys
run, diag = sys.argv[1], sys.argv[2]
for r in range(4):
    ev = json.load(open(f"{run}/trace-rank-{r}.json"))["traceEvents"]
    cats = {e.get("cat") for e in ev if e["ph"] == "X" and e["pid"] == r}
    assert {"phase", "collective", "step"} <= cats, (r, cats)
assert json.load(open(diag))["trace"] == f"{run}/trace.json"
merged = json.load(open(f"{run}/trace.json"))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in merged if e["name"] == "process_name"}
assert sorted(names) == [0, 1, 2, 3] and all(n.startswith(f"rank {p} (") for p, n in names.items()), names
assert {e["pid"] for e in merged if e["ph"] == "X"} == {0, 1, 2, 3}
PY
rp_finish
