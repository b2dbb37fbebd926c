#!/usr/bin/env bash
# Live metrics of a running 4-rank bert-tiny CPU job, checked four ways:
#   - discovery: with metrics.port_base 0 every rank picks a free port, and
#     RUN_DIR/prometheus-targets.json (Prometheus file_sd) lists all four with the target
#     labels ringpilot_job and ringpilot_run; metrics.file_sd_dir holds a link to it;
#   - each rank's /metrics passes `promtool check metrics`, has at most 300 series (the
#     budget of docs/metrics.md), and has the documented series, labelled Hostname, rank,
#     local_rank and no `job`: step and collective histograms, samples, progress
#     (ringpilot_step, ringpilot_steps_target), the rank's own loss (set on every rank),
#     ringpilot_job_info, the process_* series, build info; and no false zeros: this job has
#     no data.val, no clipping, no image input and no topology model (CPU ranks), so no
#     ringpilot_eval_*, ringpilot_grad_norm, ringpilot_data_* or expected bus bandwidth;
#   - a real Prometheus server (loopback, temp storage, scrape_interval 1s, file_sd over
#     FILE_SD_DIR/*.json, no honor_labels) answers ringpilot_samples_total for every
#     rank with ringpilot_job/Hostname/rank and no exported_* label;
#   - SIGTERM to `ringpilot run` stops the job: exit 143, nothing left running, ports
#     closed, the targets file emptied (a job stopped on purpose is not "down").
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/metrics_live.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init metrics_live

readonly NRANKS=4 JOB_NAME=it-metrics-live JOB_LIMIT_S=400 UP_WAIT_S=120 PROM_WAIT_S=90 STOP_WAIT_S=60
for tool in promtool prometheus; do
  command -v "$tool" >/dev/null || rp_die "'$tool' not found (Debian packages prometheus, promtool)"
done

prom_port=$(rp_free_ports 1)
node=$(hostname)
run=$RP_TMP/runs/metrics-live
file_sd=$RP_TMP/file_sd
mkdir -p "$RP_TMP/runs"
rp_log "metrics ports picked by the ranks (port_base 0); prometheus on $prom_port"

job=$RP_TMP/job.yaml
cat >"$job" <<EOF
name: $JOB_NAME
world: {nodes: 1, procs_per_node: $NRANKS, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, dropout: 0.1}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 3000, optimizer: sgd, lr: 0.01, threads_per_rank: 1, log_every_s: 2}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, bind: 127.0.0.1, port_base: 0, file_sd_dir: $file_sd}
EOF

# fetch URL OUT: one HTTP GET with a short timeout; exit status 0 on HTTP 200.
fetch() {
  python3 - "$1" "$2" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=3) as r:
        data = r.read()
        if r.status != 200:
            sys.exit(1)
except Exception:
    sys.exit(1)
with open(sys.argv[2], "wb") as f:
    f.write(data)
EOF
}

# --- Prometheus server -------------------------------------------------------------------
prom_dir=$RP_TMP/prometheus
mkdir -p "$prom_dir/data"
cat >"$prom_dir/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: ringpilot
    file_sd_configs:
      - files: ['$file_sd/*.json']
        refresh_interval: 1s
EOF
prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$prom_dir/prometheus.log" 2>&1 &
prom_pid=$!
rp_on_exit "kill $prom_pid 2>/dev/null; wait $prom_pid 2>/dev/null || true"
prom_ready=0
for ((i = 0; i < 60; i++)); do
  if fetch "http://127.0.0.1:$prom_port/-/ready" "$prom_dir/ready"; then prom_ready=1 && break; fi
  kill -0 "$prom_pid" 2>/dev/null || break
  sleep 0.5
done
if ((prom_ready)); then
  rp_row "prometheus up" "127.0.0.1:$prom_port ready" PASS
else
  rp_tail "$prom_dir/prometheus.log"
  rp_die "Prometheus did not become ready on 127.0.0.1:$prom_port within 30 s"
fi

# --- the job -------------------------------------------------------------------------------
timeout -k 20 "$JOB_LIMIT_S" "$RINGPILOT" run "$job" --run-dir "$run" >"$RP_TMP/job.out" 2>&1 &
tpid=$!
rp_pid=""
for ((i = 0; i < 50; i++)); do
  rp_pid=$(pgrep -P "$tpid" -x ringpilot || true)
  [[ -n $rp_pid ]] && break
  sleep 0.1
done
[[ -n $rp_pid ]] || rp_die "could not find the 'ringpilot run' process under timeout (pid $tpid)"
# If the script stops early, the job must not outlive it.
rp_on_exit "kill -TERM $rp_pid 2>/dev/null || true; wait $tpid 2>/dev/null || true"
job_alive() { kill -0 "$tpid" 2>/dev/null; }

# Discovery: rank 0 writes every rank's address once all serve (before the model is built).
targets_file=$run/prometheus-targets.json
ports=()
deadline=$((SECONDS + UP_WAIT_S))
while ((SECONDS < deadline)) && job_alive; do
  if [[ -s $targets_file ]] && mapfile -t ports < <(python3 - "$targets_file" "$JOB_NAME" <<'EOF'
import json, sys
groups = json.load(open(sys.argv[1]))
assert len(groups) == 1 and groups[0]["labels"]["ringpilot_job"] == sys.argv[2]
assert groups[0]["labels"]["ringpilot_run"] == "metrics-live"
for t in groups[0]["targets"]:
    host, port = t.rsplit(":", 1)
    assert host == "127.0.0.1", t
    print(port)
EOF
  ) && ((${#ports[@]} == NRANKS)); then
    break
  fi
  ports=()
  sleep 0.5
done
if ((${#ports[@]} == NRANKS)) && [[ $(readlink "$file_sd/metrics-live.json") == "$targets_file" ]]; then
  rp_row "file_sd targets" "$targets_file: ${NRANKS} ranks on ports ${ports[*]}, labels ringpilot_job, ringpilot_run; linked from $file_sd/metrics-live.json" PASS
else
  rp_row "file_sd targets" "no valid $targets_file with $NRANKS targets (linked from $file_sd/metrics-live.json) within ${UP_WAIT_S} s: $(head -c 300 "$targets_file" 2>/dev/null | tr '\n' ' ')" FAIL
  rp_tail "$RP_TMP/job.out"
  rp_finish
fi

# Wait until every rank serves metrics and has trained a few steps.
rank_up=()
for ((r = 0; r < NRANKS; r++)); do rank_up[r]=0; done
all_up() {
  local r
  for ((r = 0; r < NRANKS; r++)); do ((rank_up[r])) || return 1; done
}
deadline=$((SECONDS + UP_WAIT_S))
while ((SECONDS < deadline)) && job_alive; do
  for ((r = 0; r < NRANKS; r++)); do
    ((rank_up[r])) && continue
    f=$RP_TMP/rank-$r.prom
    if fetch "http://127.0.0.1:${ports[r]}/metrics" "$f" &&
      awk '$1 ~ /^ringpilot_samples_total\{/ && $2 + 0 >= 4 {found = 1} END {exit !found}' "$f" &&
      awk '$1 ~ /^ringpilot_loss\{/ && $2 + 0 != 0 {found = 1} END {exit !found}' "$f"; then
      rank_up[r]=1
    fi
  done
  all_up && break
  sleep 1
done
for ((r = 0; r < NRANKS; r++)); do
  if ((rank_up[r])); then
    rp_row "rank $r /metrics" "serving on 127.0.0.1:${ports[r]}, samples_total >= 4, its loss set" PASS
  else
    rp_row "rank $r /metrics" "not up with samples_total >= 4 and a loss within ${UP_WAIT_S} s (job alive: $(job_alive && echo yes || echo no))" FAIL
  fi
done
if ! all_up; then
  rp_tail "$RP_TMP/job.out"
  rp_finish
fi

# --- exposition checks ---------------------------------------------------------------------
for ((r = 0; r < NRANKS; r++)); do
  f=$RP_TMP/rank-$r.prom
  if promtool check metrics <"$f" >"$f.promtool" 2>&1; then
    rp_row "rank $r promtool" "promtool check metrics: ok ($(wc -l <"$f") lines)" PASS
  else
    rp_row "rank $r promtool" "promtool check metrics: $(head -c 300 "$f.promtool" | tr '\n' ' ')" FAIL
  fi
  problems=$(python3 - "$f" "$JOB_NAME" "$node" "$r" <<'EOF'
import re, sys
import math
path, job, node, rank = sys.argv[1:5]
want_labels = {"Hostname": node, "rank": rank, "local_rank": rank}
samples = []  # (name, labels, value)
line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
for line in open(path):
    if line.startswith("#") or not line.strip():
        continue
    m = line_re.match(line)
    if not m:
        continue
    labels = dict(label_re.findall(m.group(3) or ""))
    samples.append((m.group(1), labels, float(m.group(4))))
checks = [
    ("ringpilot_step_seconds_bucket", {}, None),
    ("ringpilot_samples_total", {}, 4),
    ("ringpilot_step", {}, 1),
    ("ringpilot_steps_target", {}, 3000),
    ("ringpilot_collective_seconds_bucket", {"op": "allreduce"}, None),
    ("ringpilot_collective_seconds_count", {"op": "allreduce"}, 1),
    ("ringpilot_collective_bytes_total", {"op": "allreduce"}, 1),
    ("ringpilot_step_phase_seconds_count", {"phase": "backward"}, 1),
    ("ringpilot_build_info", {}, None),
    ("ringpilot_job_info", {"name": job, "world_size": "4"}, 1),
    ("ringpilot_restarts_total", {}, None),
    ("process_cpu_seconds_total", {}, None),
    ("process_resident_memory_bytes", {}, 1e6),
    ("process_open_fds", {}, 3),
    ("process_start_time_seconds", {}, 1.7e9),
]
problems = []
if len(samples) > 300:
    problems.append(f"{len(samples)} series, over the budget of 300")
with_job = sorted({s[0] for s in samples if "job" in s[1]})
if with_job:
    problems.append(f"a `job` label (Prometheus' own) on {with_job[:3]}")
loss = [s[2] for s in samples if s[0] == "ringpilot_loss"]
if not loss or not math.isfinite(loss[0]) or loss[0] <= 0:
    problems.append(f"ringpilot_loss {loss}: want this rank's finite loss")
# Series that mean nothing for this job must not exist (docs/metrics.md, "No false zeros").
for name in ("ringpilot_eval_top1_ratio", "ringpilot_eval_top5_ratio",
             "ringpilot_eval_mlm_accuracy_ratio", "ringpilot_eval_loss",
             "ringpilot_eval_samples", "ringpilot_grad_norm",
             "ringpilot_data_images_decoded_total", "ringpilot_data_bad_samples_total",
             "ringpilot_data_prefetch_batches",
             "ringpilot_expected_bus_bandwidth_bytes_per_second"):
    if any(s[0] == name for s in samples):
        problems.append(f"{name} exists without meaning here (a false zero)")
for name, extra, minimum in checks:
    same_name = [s for s in samples if s[0] == name]
    if not same_name:
        problems.append(f"no {name} series")
        continue
    want = dict(want_labels, **extra)
    hits = [s for s in same_name if all(s[1].get(k) == v for k, v in want.items())]
    if not hits:
        problems.append(f"{name}: no series with {want} (have {same_name[0][1]})")
        continue
    if minimum is not None and max(s[2] for s in hits) < minimum:
        problems.append(f"{name}{extra or ''} = {max(s[2] for s in hits)}, want >= {minimum}")
print("; ".join(problems))
EOF
  )
  if [[ -z $problems ]]; then
    rp_row "rank $r series" "$(grep -cv '^#' "$f") series; the documented ones, labelled Hostname=$node,rank,local_rank=$r, no job" PASS
  else
    rp_row "rank $r series" "$problems" FAIL
  fi
done

# --- Prometheus sees every rank --------------------------------------------------------------
prom_result=$RP_TMP/prom-query.json
prom_ok=0
deadline=$((SECONDS + PROM_WAIT_S))
while ((SECONDS < deadline)); do
  if fetch "http://127.0.0.1:$prom_port/api/v1/query?query=ringpilot_samples_total" "$prom_result" &&
    python3 - "$prom_result" "$JOB_NAME" "$node" "$NRANKS" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
ranks = set()
for s in d.get("data", {}).get("result", []):
    m = s["metric"]
    if any(k.startswith("exported_") for k in m):
        sys.exit(1)  # a label clash with the target's: what honor_labels used to hide
    if (m.get("ringpilot_job") == sys.argv[2] and m.get("ringpilot_run") == "metrics-live"
            and m.get("Hostname") == sys.argv[3] and m.get("job") == "ringpilot" and "rank" in m):
        ranks.add(m["rank"])
sys.exit(0 if d.get("status") == "success" and ranks >= {str(r) for r in range(int(sys.argv[4]))} else 1)
EOF
    prom_ok=1
    break
  fi
  job_alive || break
  sleep 1
done
if ((prom_ok)); then
  rp_row "prometheus query" "ringpilot_samples_total for ranks 0..$((NRANKS - 1)) with ringpilot_job=$JOB_NAME,Hostname=$node (file_sd), no exported_*" PASS
else
  rp_row "prometheus query" "no ringpilot_samples_total{ringpilot_job=$JOB_NAME,Hostname,rank=0..$((NRANKS - 1))} within ${PROM_WAIT_S} s: $(head -c 300 "$prom_result" 2>/dev/null | tr '\n' ' ')" FAIL
  rp_tail "$prom_dir/prometheus.log" 10
fi

# --- SIGTERM stops the job -------------------------------------------------------------------
finished_before=0
[[ -e $run/summary.json ]] && finished_before=1
kill -TERM "$rp_pid" 2>/dev/null || true
t0=$SECONDS
while job_alive && ((SECONDS - t0 < STOP_WAIT_S)); do sleep 0.2; done
if job_alive; then
  rp_row "SIGTERM" "'ringpilot run' still running ${STOP_WAIT_S} s after SIGTERM (hang)" FAIL
  kill -KILL "$rp_pid" 2>/dev/null || true
fi
rc=0
wait "$tpid" || rc=$?
stop_s=$((SECONDS - t0))
if [[ $rc -eq 143 ]]; then
  rp_row "SIGTERM" "exit 143 after ${stop_s} s" PASS
elif [[ $rc -eq 0 && $finished_before -eq 1 ]]; then
  rp_row "SIGTERM" "job had already finished (exit 0)" PASS
else
  rp_row "SIGTERM" "exit $rc after ${stop_s} s, want 143" FAIL
  rp_tail "$RP_TMP/job.out"
fi
if grep -q 'received SIGTERM' "$run/logs/launcher.log" 2>/dev/null; then
  rp_row "launcher.log" "records the SIGTERM" PASS
else
  rp_row "launcher.log" "no 'received SIGTERM' line" FAIL
fi
# Nothing of the job may survive it (bounded: ranks get a few seconds to exit).
left=""
for ((i = 0; i < 25; i++)); do
  left=$(pgrep -f -- "--run-dir $run" || true)
  [[ -z $left ]] && break
  sleep 0.2
done
if [[ -z $left ]]; then
  rp_row "no leftovers" "no process of the job left" PASS
else
  rp_row "no leftovers" "still running after 5 s: $(ps -o pid=,args= -p "${left//$'\n'/,}" | head -c 300 | tr '\n' ';')" FAIL
  for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
fi
closed=1
for ((r = 0; r < NRANKS; r++)); do
  fetch "http://127.0.0.1:${ports[r]}/metrics" "$RP_TMP/after-$r.prom" && closed=0
done
if ((closed)); then
  rp_row "ports closed" "${ports[*]} no longer answer" PASS
else
  rp_row "ports closed" "a metrics port still answers after the job ended" FAIL
fi
if [[ $(cat "$targets_file" 2>/dev/null) == "[]" ]]; then
  rp_row "targets withdrawn" "$targets_file is [] after the user stopped the job" PASS
else
  rp_row "targets withdrawn" "$targets_file still lists targets: $(head -c 200 "$targets_file" | tr '\n' ' ')" FAIL
fi

rp_finish
