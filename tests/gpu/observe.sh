#!/usr/bin/env bash
# GPU acceptance of topology, doctor, metrics and traces, on every GPU of the machine
# (2 or more; one rank per GPU). Prints a table
# last; exit 1 on any failure. Usage: tests/gpu/observe.sh [OUT_DIR]
#   topo      `ringpilot topo --json`: GPUs, NVLink count and rate, NUMA/CPU affinity as
#             `nvidia-smi topo -m` prints them
#   doctor    `doctor --json --device cuda`: PASS or WARN everywhere (WARNs listed)
#   busbw-g   BERT-base on all GPUs, CUDA graphs on (collectives timed by GPU timestamps
#             inside the replay): busbw of the largest all-reduce size class within 10% of
#             `bench comm` at the same size
#   busbw     the same with CUDA graphs off (timed by CUDA events), for information: eager
#             BERT-base is host-bound, the ranks launch their last bucket at different
#             times, and a collective's time includes waiting for the later rank
#   phases    with CUDA graphs on: forward/backward/optimizer/exposed-comm phases from the
#             GPU timeline, overlap ratio, collective sequence numbers advancing
#   straggler CUDA graphs on, fault.straggler_rank=LAST straggler_ms=50: rank 0's wait is
#             blamed on the last rank, within 20% of 50 ms per step; diagnose names it
#   series    ringpilot_gpu_* (clock-limited seconds included), ringpilot_nccl_transport_info,
#             dcgm-exporter's UUID/gpu/pci_bus_id labels, a series count within 300
#   trace     every trace-rank-N.json and diagnose's merged trace.json are valid JSON
#   overhead  step time with metrics on vs off (CUDA graphs on), median of 3 runs each
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ -x "$RP" ]] || gpu_build
OUT="${1:-$(mktemp -d)}"
NGPU=$(nvidia-smi -L | wc -l)
((NGPU >= 2)) || { echo "observe: needs 2 or more GPUs, found $NGPU" >&2; exit 2; }
mkdir -p "$OUT"
rows=()
fail=0
row() {  # name, status, detail
  rows+=("$(printf '%-10s %-5s %s' "$1" "$2" "$3")")
  [[ $2 != FAIL ]] || fail=1
}
py() { python3 - "$@"; }

# ---- topology --------------------------------------------------------------------------
"$RP" topo --json >"$OUT/topo.json"
"$RP" topo >"$OUT/topo.txt"
nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1 || true
res=$(py "$OUT/topo.json" "$OUT/nvidia-smi-topo.txt" "$NGPU" <<'PY'
import json, re, sys
# Any GPU count: the GPU list, the NVLink count of every pair and each GPU's CPU affinity
# must be what `nvidia-smi topo -m` prints (NV<k> cells; CPU Affinity column).
t = json.load(open(sys.argv[1]))
smi = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[2]).read())
want_gpus = int(sys.argv[3])
gpus = t.get("gpus", [])
links = {tuple(sorted(l["gpus"])): l for l in t.get("gpu_links", t.get("links", [])) if "gpus" in l}
problems = []
if len(gpus) != want_gpus: problems.append(f"{len(gpus)} GPUs, nvidia-smi -L lists {want_gpus}")
smi_nv, aff = {}, {}
for line in smi.splitlines():
    m = re.match(r"\s*GPU(\d+)\s+(.*)", line)
    if not m: continue
    i, cells = int(m.group(1)), m.group(2).split()
    for j, cell in enumerate(cells[:want_gpus]):
        nv = re.fullmatch(r"NV(\d+)", cell)
        if nv and i < j: smi_nv[(i, j)] = int(nv.group(1))
    cpu = next((c for c in cells[want_gpus:] if re.fullmatch(r"[0-9,\-]+", c) and ("-" in c or "," in c)), None)
    if cpu: aff[i] = cpu
ours = {k: l.get("nvlink_count", l.get("nvlinks", 0)) for k, l in links.items() if l.get("nvlink_count", l.get("nvlinks", 0))}
if ours != smi_nv: problems.append(f"NVLink counts {ours} vs nvidia-smi {smi_nv}")
per = sorted({round(l.get("nvlink_bytes_per_second_per_link", 0) / 1e9, 2) for l in links.values() if l.get("nvlink_count", 0)})
numa = {n["id"]: n["cpus"] for n in t.get("numa_nodes", [])}
for g in gpus:
    cpus = numa.get(g.get("numa_node"), "?")
    if aff.get(g["index"]) and aff[g["index"]] != cpus:
        problems.append(f"GPU{g['index']} CPUs {cpus} vs nvidia-smi {aff[g['index']]}")
print(("FAIL " + "; ".join(problems)) if problems else
      f"PASS {len(gpus)} GPUs, NVLink pairs {smi_nv} at {per} GB/s per link, CPUs as nvidia-smi {aff}")
PY
)
row topo "${res%% *}" "${res#* }"

# ---- doctor ----------------------------------------------------------------------------
drc=0
"$RP" doctor --json --device cuda >"$OUT/doctor.json" 2>"$OUT/doctor.err" || drc=$?
res=$(py "$OUT/doctor.json" "$drc" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [c for c in d["checks"] if c["status"] == "FAIL"]
warn = [c["name"] + ": " + c["detail"][:80] for c in d["checks"] if c["status"] == "WARN"]
n = {s: sum(c["status"] == s for c in d["checks"]) for s in ("PASS", "WARN", "FAIL", "SKIP")}
print(("FAIL " if bad or sys.argv[2] != "0" else "PASS ") + f"exit {sys.argv[2]}, {n}" +
      ("; FAIL " + ", ".join(c["name"] for c in bad) if bad else "") +
      ("; WARN " + " | ".join(warn) if warn else ""))
PY
)
row doctor "${res%% *}" "${res#* }"

# ---- a BERT-base job: metrics scraped live, traces, busbw --------------------------------
job() {  # name, then --set args
  local name=$1; shift
  local set=()
  for kv in "$@"; do set+=(--set "$kv"); done
  cat >"$OUT/$name.yaml" <<YAML
name: $name
world: {nodes: 1, procs_per_node: $NGPU, device: cuda}
model: {name: bert-base}
data: {batch_per_rank: 64}
train: {steps: 60, optimizer: adamw, lr: 1.0e-4, precision: bf16, cuda_graphs: true, log_every_s: 30}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, port_base: 18400, gpu_sample_seconds: 1}
YAML
  rm -rf "${OUT:?}/$name"  # an existing run directory would be resumed
  "$RP" run "$OUT/$name.yaml" --run-dir "$OUT/$name" "${set[@]}" >"$OUT/$name.log" 2>&1
}
scrape() {  # port, file: keep the last non-empty exposition until the job ends
  while true; do
    python3 -c "import urllib.request,sys;sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$1/metrics',timeout=2).read().decode())" \
      >"$2.tmp" 2>/dev/null && [[ -s $2.tmp ]] && mv "$2.tmp" "$2"
    sleep 1
  done
}
busbw_row() {  # job name, row name, status when off by more than 10%
  local name=$1 label=$2 off=${3:-FAIL}
  [[ -f $OUT/$name/logs/rank-0.stats.json ]] || { row "$label" FAIL "no stats from $name"; return; }
  size=$(py "$OUT/$name/logs/rank-0.stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = [c for c in s["collectives"] if c["op"] == "allreduce" and c["count"]]
big = max(c, key=lambda c: c["bytes_total"] / c["count"])
print(int(big["bytes_total"] / big["count"]) // 4 * 4)
PY
)
  "$RP" bench comm --device cuda --np "$NGPU" --op allreduce --min-bytes "$size" --max-bytes "$size" \
    --iters 50 --warmup 10 --json >"$OUT/bench-at-$name.json" 2>"$OUT/bench-at-$name.err"
  res=$(py "$OUT/$name/logs/rank-0.stats.json" "$OUT/bench-at-$name.json" "$OUT/metrics-$name.txt" "$off" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
c = [c for c in s["collectives"] if c["op"] == "allreduce" and c["count"]]
big = max(c, key=lambda c: c["bytes_total"] / c["count"])
train = big["busbw_bytes_per_second"] / 1e9
b = json.load(open(sys.argv[2]))["results"][0]
metric = None
for line in open(sys.argv[3]):
    if line.startswith("ringpilot_collective_bus_bandwidth_bytes_per_second") and 'op="allreduce"' in line:
        metric = float(line.rsplit(" ", 1)[1]) / 1e9
r = train / b["busbw_gbps"]
print(("PASS " if abs(r - 1) <= 0.10 else sys.argv[4] + " ") +
      f"largest bucket class {big['size_bucket']} avg {big['bytes_total']/big['count']/2**20:.1f} MiB "
      f"x{big['count']}: training {train:.1f} GB/s (metric {metric}), bench comm {b['busbw_gbps']:.1f} GB/s, ratio {r:.3f}")
PY
)
  row "$label" "${res%% *}" "${res#* }"
}
scrape 18400 "$OUT/metrics-busbw.txt" & sp=$!
job busbw train.cuda_graphs=false train.steps=80 || row busbw FAIL "job failed: $(tail -3 "$OUT/busbw.log")"
kill "$sp" 2>/dev/null || true
cp "$OUT/metrics-busbw.txt" "$OUT/metrics-rank0.txt" 2>/dev/null || true
"$RP" diagnose "$OUT/busbw" --json >"$OUT/diagnose.json" 2>"$OUT/diagnose.err" || true
busbw_row busbw busbw INFO
scrape 18400 "$OUT/metrics-graphs.txt" & sp=$!
job graphs train.steps=80 || row busbw-g FAIL "job failed: $(tail -3 "$OUT/graphs.log")"
kill "$sp" 2>/dev/null || true
busbw_row graphs busbw-g

res=$(py "$OUT/graphs/logs/rank-0.stats.json" "$OUT/metrics-graphs.txt" "$OUT/graphs/trace-rank-0.json" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
ph = s["phase_seconds_total"]
text = open(sys.argv[2]).read()
seq = {k: float(v) for k, v in re.findall(r'^ringpilot_collective_last_(started|completed)_seq\{[^}]*\} (\S+)', text, re.M)}
tr = json.load(open(sys.argv[3]))["traceEvents"]
names = {e.get("name") for e in tr if e.get("cat") in ("phase", "collective")}
ok = all(ph.get(k, 0) > 0 for k in ("forward", "backward", "optimizer")) and ph.get("comm_exposed", -1) >= 0 \
    and 0 <= s["overlap_ratio"] <= 1 and seq.get("completed", 0) > 100 and {"forward", "allreduce"} <= names
steps = s["steps"]
print(("PASS " if ok else "FAIL ") + "per step ms: " +
      ", ".join(f"{k} {1e3 * v / max(steps, 1):.2f}" for k, v in ph.items()) +
      f"; overlap {s['overlap_ratio']:.3f}; seq {seq}; trace names {sorted(n for n in names if n)}")
PY
) || res="FAIL no phase data"
row phases "${res%% *}" "${res#* }"

job straggler train.steps=40 fault.straggler_rank=$((NGPU - 1)) fault.straggler_ms=50 ||
  row straggler FAIL "job failed: $(tail -3 "$OUT/straggler.log")"
"$RP" diagnose "$OUT/straggler" --json >"$OUT/diagnose-straggler.json" 2>/dev/null || true
res=$(py "$OUT/straggler/logs/rank-0.stats.json" "$OUT/diagnose-straggler.json" "$((NGPU - 1))" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
st = s["straggler"]
last = int(sys.argv[3])
steps = st["culprit_steps"].get(str(last), 0)
wait = st["wait_by_culprit_seconds"].get(str(last), 0)
per = 1e3 * wait / max(steps, 1)
d = json.load(open(sys.argv[2]))
named = d.get("straggler", {}).get("rank")
ok = steps >= 30 and abs(per - 50) <= 10 and named == last
print(("PASS " if ok else "FAIL ") + f"rank 0 blamed rank {last} in {steps} steps, {per:.1f} ms per step; "
      f"diagnose names rank {named}")
PY
) || res="FAIL no straggler data"
row straggler "${res%% *}" "${res#* }"

res=$(py "$OUT/metrics-rank0.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read() if __import__("os").path.exists(sys.argv[1]) else ""
need = ["ringpilot_gpu_utilization_ratio", "ringpilot_gpu_power_watts", "ringpilot_gpu_memory_used_bytes",
        "ringpilot_gpu_sm_clock_hertz", "ringpilot_gpu_nvlink_bytes_total", "ringpilot_nccl_transport_info",
        "ringpilot_step_seconds_bucket", "ringpilot_build_info", "ringpilot_gpu_clock_limited_seconds_total"]
missing = [n for n in need if not re.search("^" + n + "[{ ]", text, re.M)]
limited = dict(re.findall(r'^ringpilot_gpu_clock_limited_seconds_total\{[^}]*cause="(\w+)"[^}]*\} (\S+)', text, re.M))
labels = bool(re.search(r'^ringpilot_step_seconds_count\{UUID="GPU-[^"]+"[^}]*gpu="\d+"[^}]*pci_bus_id="[^"]+"', text, re.M))
series = len([l for l in text.splitlines() if l and not l.startswith("#")])
tr = sorted(set(re.findall(r'ringpilot_nccl_transport_info\{[^}]*transport="([^"]+)"', text)))
print(("PASS " if not missing and labels and series <= 300 else "FAIL ") +
      (f"missing {missing}; " if missing else "") + f"UUID/gpu/pci_bus_id labels {labels}; {series} series; transports {tr}; "
      f"clock-limited seconds {limited}")
PY
)
row series "${res%% *}" "${res#* }"

res=$(py "$OUT/busbw" "$NGPU" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
files = sorted(glob.glob(os.path.join(d, "trace-rank-*.json")))
bad, events = [], 0
for f in files + [os.path.join(d, "trace.json")]:
    try:
        j = json.load(open(f)); events += len(j["traceEvents"]) if f.endswith("trace.json") else 0
    except Exception as e:
        bad.append(f"{os.path.basename(f)}: {e}")
ok = len(files) == int(sys.argv[2]) and not bad and events > 0
print(("PASS " if ok else "FAIL ") + f"{len(files)} rank traces; merged trace.json {events} events" +
      (f"; {bad}" if bad else ""))
PY
)
row trace "${res%% *}" "${res#* }"

# ---- exporter overhead: metrics on vs off, CUDA graphs on -------------------------------
for i in 1 2 3; do
  job "on$i" metrics.enabled=true train.steps=100 || true
  job "off$i" metrics.enabled=false train.steps=100 || true
done
res=$(py "$OUT" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
def p50(kind):
    v = []
    for i in (1, 2, 3):
        f = os.path.join(d, f"{kind}{i}", "summary.json")
        if os.path.exists(f): v.append(json.load(open(f))["step_seconds_p50"] * 1e3)
    return v
on, off = p50("on"), p50("off")
if len(on) < 3 or len(off) < 3:
    print(f"FAIL runs missing: on {on} off {off}"); sys.exit()
r = statistics.median(on) / statistics.median(off)
print(("PASS " if r <= 1.01 else "FAIL ") +
      f"step p50 ms on {['%.2f' % x for x in on]} off {['%.2f' % x for x in off]}: median ratio {r:.4f}")
PY
)
row overhead "${res%% *}" "${res#* }"

echo
printf '%-10s %-5s %s\n' check status detail
printf '%s\n' "${rows[@]}"
exit "$fail"
