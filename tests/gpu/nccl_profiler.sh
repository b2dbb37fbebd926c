#!/usr/bin/env bash
# GPU check of the NCCL profiler plugin (docs/nccl-profiler.md). Stock PyTorch DDP
# (tests/gpu/nccl_profiler_ddp.py) runs under `mpirun ringpilot exec`, one rank per GPU;
# each rank scrapes its own port while it trains. On a machine with one GPU, two ranks
# share it: NCCL runs a 1-rank communicator's collectives as a local copy that never
# reaches the profiler, and refuses two ranks on one GPU of one host, so each rank gets its
# own NCCL_HOSTID (NCCL then sees two hosts and talks over sockets on loopback).
#   loaded    every rank's plugin serves: API v5 (NCCL 2.28) or v4, GPU timing, the rank
#             label is the rank, and no "ringpilot-nccl-profiler: disabled" line
#   bytes     all-reduce bytes the plugin counted per step == the model's gradient bytes
#   seq       collective sequence numbers started == completed after the steps, > 0;
#             every all-reduce has a GPU time and a bus bandwidth
#   stall     the last rank waits 3 s before one more all-reduce: the others, stuck in it,
#             show it on their own port (in flight, op allreduce, age >= 1 s, started =
#             completed + 1)
#   overhead  median step time with the plugin vs `--no-nccl-metrics`, same call, 5 runs
#             of 500 steps each, interleaved (printed; FAIL above 1% slower, the target).
#             Batch 2048 makes the step GPU-bound (~9.5 ms on two H200s): at the default
#             batch it is ~3.5 ms of Python launches whose run-to-run spread (+-7%) hides 1%
#   inspector NCCL's Inspector plugin (.carry/multi, scripts/carry_multi_gpu.sh) loaded
#             instead, 3 runs like the overhead runs: its all-reduce records (message sizes,
#             bus bandwidth) beside our plugin's bytes and bandwidth of the first run, and
#             its step time beside the plugin-off runs (tests/gpu/inspector_summary.py);
#             SKIP without the carry
# Prints a table last; exit 1 on any failure.
# Usage: source tests/gpu/env.sh; gpu_build; bash tests/gpu/nccl_profiler.sh [OUT_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ -x "$RP" ]] || gpu_build
PLUGIN="$(dirname "$RP")/libringpilot-nccl-profiler.so"
[[ -f "$PLUGIN" ]] || { echo "nccl_profiler: $PLUGIN missing (gpu_build builds it)" >&2; exit 2; }
OUT="${1:-$(mktemp -d)}"
mkdir -p "$OUT"
NGPU=$(nvidia-smi -L | wc -l)
NRANKS=$NGPU
FORWARD=(-x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE -x RINGPILOT_METRICS_PORT_BASE)
DDP=(python3 "$ROOT/tests/gpu/nccl_profiler_ddp.py" --steps 60)
if ((NGPU == 1)); then
  NRANKS=2
  export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
  FORWARD+=(-x NCCL_SOCKET_IFNAME -x NCCL_IB_DISABLE)
  # shellcheck disable=SC2016  # $RANK is the rank's, expanded by the rank's shell
  DDP=(sh -c 'NCCL_HOSTID="ringpilot-rank-$RANK" exec "$0" "$@"' "${DDP[@]}")
fi
rows=()
fail=0
row() {  # name, status, detail
  rows+=("$(printf '%-9s %-5s %s' "$1" "$2" "$3")")
  [[ $2 != FAIL ]] || fail=1
}

# run NAME [exec flags...]: one DDP run on all GPUs (extra DDP arguments in DDP_EXTRA);
# rank lines in OUT/NAME.out.
DDP_EXTRA=()
run() {
  local name=$1
  shift
  RINGPILOT_METRICS_PORT_BASE=$((19400 + RANDOM % 1000)) \
    mpirun --allow-run-as-root --oversubscribe -np "$NRANKS" --bind-to none \
    "${FORWARD[@]}" "$RP" exec "$@" -- "${DDP[@]}" "${DDP_EXTRA[@]}" >"$OUT/$name.out" 2>"$OUT/$name.err" ||
    { echo "nccl_profiler: run $name failed:" >&2; tail -20 "$OUT/$name.err" >&2; return 1; }
}

run on
res=$(python3 - "$OUT/on.out" "$OUT/on.err" "$NRANKS" <<'PY'
import json, sys
lines = [json.loads(l.split(" ", 1)[1]) for l in open(sys.argv[1]) if l.startswith("NCCLPROF ")]
err = open(sys.argv[2]).read()
n = int(sys.argv[3])
out = {}
p = []
if len(lines) != n: p.append(f"{len(lines)} rank lines, want {n}")
if "ringpilot-nccl-profiler:" in err:
    p.append("plugin said: " + next(l for l in err.splitlines() if "ringpilot-nccl-profiler:" in l))
for r in lines:
    if r["api_versions"] not in (["5"], ["4"]): p.append(f"rank {r['rank']}: api {r['api_versions']}")
    if r["timing"] != ["gpu"]: p.append(f"rank {r['rank']}: timing {r['timing']}")
    if r["rank_label"] != [str(r["rank"])]: p.append(f"rank {r['rank']}: rank label {r['rank_label']}")
out["loaded"] = ("FAIL" if p else "PASS",
                 "; ".join(p) or f"{n} ranks, API v{lines[0]['api_versions'][0]}, GPU timing")
b = []
for r in lines:
    if abs(r["allreduce_bytes_per_step"] - r["grad_bytes"]) > 0.5:
        b.append(f"rank {r['rank']}: {r['allreduce_bytes_per_step']:.0f} B/step vs gradients {r['grad_bytes']} B")
r0 = lines[0] if lines else {}
out["bytes"] = ("FAIL" if b or not lines else "PASS", "; ".join(b) or
                f"{r0.get('allreduce_bytes_per_step', 0):.0f} B/step = gradient bytes, "
                f"{r0.get('allreduce_ops_per_step', 0):.1f} all-reduces/step")
s = []
for r in lines:
    if not (r["seq_started"] == r["seq_completed"] > 0):
        s.append(f"rank {r['rank']}: started {r['seq_started']} completed {r['seq_completed']}")
    if r["allreduce_busbw"] <= 0 or r["allreduce_seconds_count"] <= 0:
        s.append(f"rank {r['rank']}: no all-reduce time")
out["seq"] = ("FAIL" if s or not lines else "PASS", "; ".join(s) or
              f"seq {r0.get('seq_started', 0):.0f} started = completed, all-reduce busbw "
              f"{r0.get('allreduce_busbw', 0) / 1e9:.1f} GB/s")
t = []
for r in lines:
    if r["rank"] == n - 1:
        continue
    st_ = r.get("stall")
    if not st_:
        t.append(f"rank {r['rank']}: no stall scrape")
        continue
    ages = [a for op, a in st_["oldest"] if op == "allreduce"]
    if st_["inflight"] < 1 or not ages or ages[0] < 1.0 or st_["started"] != st_["completed"] + 1:
        t.append(f"rank {r['rank']}: {st_}")
first = next((r["stall"] for r in lines if r.get("stall")), None)
out["stall"] = ("FAIL" if t or not first else "PASS", "; ".join(t) or
                f"{first['inflight']:.0f} in flight, oldest allreduce "
                f"{[a for op, a in first['oldest'] if op == 'allreduce'][0]:.2f} s, seq "
                f"{first['started']:.0f} started / {first['completed']:.0f} completed")
for k, (st, d) in out.items():
    print(f"{k}\t{st}\t{d}")
PY
)
while IFS=$'\t' read -r name status detail; do row "$name" "$status" "$detail"; done <<<"$res"

# Overhead: interleaved, so clock and thermal drift hit both sides alike.
DDP_EXTRA=(--stall-seconds 0 --steps 500 --batch 2048)
for i in 1 2 3 4 5; do
  run "on-$i"
  run "off-$i" --no-nccl-metrics
done
res=$(python3 - "$OUT" <<'PY'
import json, statistics, sys
def median_step(name):
    ms = [json.loads(l.split(" ", 1)[1])["step_ms_median"]
          for l in open(f"{sys.argv[1]}/{name}.out") if l.startswith("NCCLPROF ")]
    return max(ms)  # the slowest rank sets the step
on = [median_step(f"on-{i}") for i in range(1, 6)]
off = [median_step(f"off-{i}") for i in range(1, 6)]
m_on, m_off = statistics.median(on), statistics.median(off)
ratio = m_on / m_off
st = "PASS" if ratio <= 1.01 else "FAIL"
print(f"overhead\t{st}\tstep {m_on:.3f} ms with plugin vs {m_off:.3f} ms without "
      f"({100 * (ratio - 1):+.1f}%; runs on {', '.join(f'{x:.3f}' for x in on)}; "
      f"off {', '.join(f'{x:.3f}' for x in off)})")
PY
)
while IFS=$'\t' read -r name status detail; do row "$name" "$status" "$detail"; done <<<"$res"

# NCCL's own Inspector plugin (carried by scripts/carry_multi_gpu.sh) loaded instead of ours,
# the same job: its records of the all-reduces (sizes, bus bandwidth) beside what our
# plugin counted in the "on" run, and its step time beside the "off" runs. `ringpilot exec`
# leaves a caller's NCCL_PROFILER_PLUGIN alone.
INSPECTOR="$ROOT/.carry/multi/libnccl-profiler-inspector.so"
if [[ -f $INSPECTOR ]]; then
  saved=("${FORWARD[@]}")
  for i in 1 2 3; do
    rm -rf "${OUT:?}/inspector-$i"
    FORWARD=("${saved[@]}" -x "NCCL_PROFILER_PLUGIN=$INSPECTOR" -x NCCL_INSPECTOR_ENABLE=1
             -x NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=100
             -x "NCCL_INSPECTOR_DUMP_DIR=$OUT/inspector-$i")
    run "inspector-$i" || row inspector FAIL "run inspector-$i failed"
  done
  FORWARD=("${saved[@]}")
  res=$(python3 "$ROOT/tests/gpu/inspector_summary.py" "$OUT" "$NRANKS")
  while IFS=$'\t' read -r name status detail; do row "$name" "$status" "$detail"; done <<<"$res"
else
  row inspector SKIP "no .carry/multi/libnccl-profiler-inspector.so (scripts/carry_multi_gpu.sh)"
fi

echo "nccl_profiler: $NRANKS ranks on $NGPU GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)), output in $OUT"
printf '%s\n' "${rows[@]}"
exit "$fail"
