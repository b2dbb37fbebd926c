#!/usr/bin/env bash
# Step time of a CPU training job while its metrics exporters are scraped hard.
#
#   bench/scrape_load.sh [--model bert-tiny|resnet18-cifar] [--steps N] [--batch B]
#                        [--scrapers K] [--interval S[,S...]] [--repeat R] [--keep DIR]
#
# A 2-rank CPU job (one intra-op thread per rank, metrics on) runs back to back, R times
# each: without scrapers ("quiet"), then for every interval S with K scrapers (threads of
# bench/scrape_load.py), each scraping GET /metrics of both ranks, one new connection per
# scrape, then sleeping S seconds (0: back to back). Defaults: bert-tiny, batch 16, 300
# steps, K = 50, S = 1 and 0, R = 2 (about 8 minutes on 2 idle cores). The scrapers start
# once both exporters answer and stop when the job has written summary.json. The table
# shows each mode's best run (noise on a shared host only slows a run down): step time
# p50/p99 and samples/s from summary.json, their change against quiet, the scrapes served
# and their latency, and the CPU the scrapers themselves used (they run on the same host,
# so at S = 0 part of the slowdown is theirs, not the exporter's).
# Prints the table last; every run's output is kept under DIR (default: a new temp dir).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RINGPILOT="${RINGPILOT:-$ROOT/build/bin/ringpilot}"
LOAD="$ROOT/bench/scrape_load.py"

model=bert-tiny steps=300 batch=16 scrapers=50 intervals=1,0 repeat=2 keep=""
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="${2:?}"; shift 2 ;;
    --steps) steps="${2:?}"; shift 2 ;;
    --batch) batch="${2:?}"; shift 2 ;;
    --scrapers) scrapers="${2:?}"; shift 2 ;;
    --interval) intervals="${2:?}"; shift 2 ;;
    --repeat) repeat="${2:?}"; shift 2 ;;
    --keep) keep="${2:?}"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "scrape_load.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
for v in steps batch scrapers repeat; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "scrape_load.sh: --$v must be a positive integer" >&2; exit 2; }
done
[[ $intervals =~ ^[0-9.]+(,[0-9.]+)*$ ]] || { echo "scrape_load.sh: --interval takes seconds, comma-separated" >&2; exit 2; }
[[ $model == bert-tiny || $model == resnet18-cifar ]] ||
  { echo "scrape_load.sh: --model must be bert-tiny or resnet18-cifar" >&2; exit 2; }
[[ -x $RINGPILOT ]] || { echo "scrape_load.sh: $RINGPILOT not built (scripts/build.sh)" >&2; exit 2; }

out="${keep:-$(mktemp -d /tmp/ringpilot-scrape-load.XXXXXX)}"
mkdir -p "$out"
echo "scrape_load: results in $out; $(nproc) cores, ringpilot $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"

free_ports() {  # a base port P with P and P+1 free on 127.0.0.1, below the ephemeral range
  # (the scrapers' own connections take ephemeral ports, and one may land on a port
  # chosen here before the job binds it)
  python3 -c 'import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
while True:
    p = random.randint(10000, max(low - 2, 10001)); ok = True
    for q in (p, p + 1):
        s = socket.socket()
        try: s.bind(("127.0.0.1", q))
        except OSError: ok = False
        finally: s.close()
    if ok: print(p); break'
}

# run TAG INTERVAL|-: one job; with an interval, scrapers run while it trains.
run() {
  local tag=$1 interval=$2 dir="$out/$1" port
  rm -rf "$dir" "$dir".*
  port=$(free_ports)
  cat >"$dir.yaml" <<YAML
name: scrape-load-$tag
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: $model}
data: {kind: synthetic, batch_per_rank: $batch}
train: {steps: $steps, optimizer: sgd, lr: 0.01, momentum: 0.9, threads_per_rank: 1, seed: 0, log_every_s: 60}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, bind: 127.0.0.1, port_base: $port}
YAML
  if [[ $interval == - ]]; then
    echo "== $tag: no scrapers"
  else
    echo "== $tag: $scrapers scrapers, $interval s between a scraper's scrapes"
  fi
  "$RINGPILOT" run "$dir.yaml" --run-dir "$dir" >"$dir.out" 2>&1 &
  local job=$!
  if [[ $interval != - ]]; then
    # Both exporters up (the first steps are still warm-up), then load until the end.
    for _ in $(seq 1 600); do
      python3 "$LOAD" scrape --ports "$port,$((port + 1))" --scrapers 1 --interval 0 --duration 0.1 2>/dev/null |
        python3 -c 'import json,sys; sys.exit(0 if len(json.load(sys.stdin)["last_steps"]) == 2 else 1)' && break
      kill -0 "$job" 2>/dev/null || break
      sleep 0.2
    done
    python3 "$LOAD" scrape --ports "$port,$((port + 1))" --scrapers "$scrapers" \
      --interval "$interval" --duration 100000 --stop-when-exists "$dir/summary.json" \
      >"$dir.scrapes.json" 2>"$dir.scrapes.err" &
    local load=$!
  fi
  local rc=0
  wait "$job" || rc=$?
  if [[ $interval != - ]]; then
    # A failed job writes no summary.json, which its scrapers would wait for forever.
    ((rc == 0)) || kill "$load" 2>/dev/null || true
    wait "$load" || true
  fi
  ((rc == 0)) || { echo "   job failed (exit $rc): see $dir.out" >&2; tail -5 "$dir.out" >&2; }
}

for ((r = 1; r <= repeat; r++)); do
  run "quiet-$r" -
  IFS=, read -r -a list <<<"$intervals"
  for s in "${list[@]}"; do run "scraped-s$s-$r" "$s"; done
done

python3 - "$out" "$scrapers" <<'PY'
import glob, json, os, sys
out, k = sys.argv[1], sys.argv[2]
def runs(prefix):
    rows = []
    for d in sorted(glob.glob(f"{out}/{prefix}-*/summary.json")):
        tag = os.path.basename(os.path.dirname(d))
        s = json.load(open(d))
        row = {"p50": s["step_seconds_p50"] * 1e3, "p99": s["step_seconds_p99"] * 1e3,
               "sps": s["samples_per_second"]}
        if os.path.exists(f"{out}/{tag}.scrapes.json"):
            row.update(json.load(open(f"{out}/{tag}.scrapes.json")))
            row["cpu"] = row.get("cpu_percent", 0)
        rows.append(row)
    return rows
quiet = runs("quiet")
if not quiet:
    sys.exit("scrape_load: no quiet run finished")
base = min(quiet, key=lambda r: r["p50"])
modes = sorted({os.path.basename(p).rsplit("-", 1)[0] for p in glob.glob(f"{out}/scraped-s*-*") if os.path.isdir(p)})
print("| mode | step p50 ms | step p99 ms | samples/s | p50 change | scrapes/s | scrape p50 / p99 / max ms | errors | scrapers' CPU |")
print("|---|---|---|---|---|---|---|---|---|")
print(f"| no scrapers | {base['p50']:.1f} | {base['p99']:.1f} | {base['sps']:.1f} | - | - | - | - | - |")
for m in modes:
    rows = runs(m)
    if not rows:
        continue
    b = min(rows, key=lambda r: r["p50"])
    interval = m[len("scraped-s"):]
    print(f"| {k} scrapers, {'back to back' if float(interval) == 0 else interval + ' s apart'} | "
          f"{b['p50']:.1f} | {b['p99']:.1f} | {b['sps']:.1f} | {100 * (b['p50'] / base['p50'] - 1):+.1f}% | "
          f"{b.get('scrapes_per_s', 0):.0f} | {b.get('latency_p50_ms') or 0:.1f} / {b.get('latency_p99_ms') or 0:.1f} / "
          f"{b.get('latency_max_ms') or 0:.0f} | {b.get('errors', '?')} | {b.get('cpu', 0):.0f}% of a core |")
print(f"(best of {len(quiet)} run(s) per mode; 2 ranks, one thread each, on {os.cpu_count()} cores)")
PY
