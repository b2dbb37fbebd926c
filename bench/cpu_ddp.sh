#!/usr/bin/env bash
# CPU data-parallel throughput: ringpilot vs stock PyTorch DDP (gloo), 2 ranks on this host.
#
#   bench/cpu_ddp.sh [--model resnet18-cifar|bert-tiny|both] [--steps N] [--batch B]
#                    [--repeat R] [--world1] [--quiet-wait S] [--keep DIR]
#   bench/cpu_ddp.sh --report DIR      # the table of an earlier run kept in DIR
#
# For each model, back to back: ringpilot with the metrics exporter off, ringpilot with it
# on, and the peer (bench/peer_cpu_ddp.py under torchrun). Same model (parameter counts are
# checked), same batch per rank, same optimizer and lr, one intra-op thread per rank, 25 MiB
# gradient buckets (1 MiB first bucket) on both sides. ringpilot counts its first step as
# warm-up, so the peer runs 1 warm-up step and N-1 timed ones. --steps N sets N for every
# model; by default N is 30 for resnet18-cifar and 200 for bert-tiny (batch 16: about 6
# minutes in all on 2 idle cores). --world1 also runs both with one rank (compute alone, no
# all-reduce). --repeat R runs the whole set R times, interleaved; the table shows each
# side's best run (noise on a shared host only ever slows a run down). Before every run the
# script waits up to S seconds (default 120; 0: not at all) for the host to go idle, and
# after it reports the CPU time other processes took meanwhile ("foreign CPU").
# RP_SET=KEY=VALUE adds one `--set` to every ringpilot run (e.g.
# RP_SET='launch.mpirun_args=[--mca, btl_vader_single_copy_mechanism, cma]').
# Prints a table last; the raw output of every run is kept under the run directory
# (--keep DIR, default a fresh temporary directory, printed; runs are added to those an
# earlier invocation left there, with the same build snapshot, and the table covers all).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RINGPILOT="${RINGPILOT:-$ROOT/build/bin/ringpilot}"
PY="${PEER_PYTHON:-$ROOT/.venv/bin/python}"
PEER="$ROOT/bench/peer_cpu_ddp.py"

model=both steps="" batch=16 world1=0 keep="" repeat=1 quiet_wait=120 report=""
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="${2:?}"; shift 2 ;;
    --steps) steps="${2:?}"; shift 2 ;;
    --batch) batch="${2:?}"; shift 2 ;;
    --repeat) repeat="${2:?}"; shift 2 ;;
    --world1) world1=1; shift ;;
    --quiet-wait) quiet_wait="${2:?}"; shift 2 ;;
    --keep) keep="${2:?}"; shift 2 ;;
    --report) report="${2:?}"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "cpu_ddp.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
case "$model" in
  both) models=(resnet18-cifar bert-tiny) ;;
  resnet18-cifar|bert-tiny) models=("$model") ;;
  *) echo "cpu_ddp.sh: --model must be resnet18-cifar, bert-tiny or both (got '$model')" >&2; exit 2 ;;
esac
[[ "$batch" =~ ^[1-9][0-9]*$ ]] || { echo "cpu_ddp.sh: --batch must be a positive integer" >&2; exit 2; }
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || { echo "cpu_ddp.sh: --repeat must be a positive integer" >&2; exit 2; }
[[ "$quiet_wait" =~ ^[0-9]+$ ]] || { echo "cpu_ddp.sh: --quiet-wait must be seconds (integer)" >&2; exit 2; }
[[ -z "$steps" || "$steps" =~ ^[1-9][0-9]*$ && "$steps" -ge 3 ]] ||
  { echo "cpu_ddp.sh: --steps must be an integer >= 3" >&2; exit 2; }
[[ -x "$PY" ]] || { echo "cpu_ddp.sh: no python at $PY (scripts/setup.sh)" >&2; exit 2; }

table() {  # DIR: print the table of the runs kept there
  "$PY" - "$1" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
batch = int(open(f"{out}/batch").read())
models = [m for m in ("resnet18-cifar", "bert-tiny") if glob.glob(f"{out}/{m}-w*-peer-*.foreign")]
def foreign(tag):
    f, wall = map(float, open(f"{out}/{tag}.foreign").read().split())
    return 100 * f / wall
def run(tag, world):
    if "-peer-" in tag:
        p = json.load(open(f"{out}/{tag}.json"))
        return p["steps_per_second"], p["samples_per_second"], p["step_ms_p50"], foreign(tag)
    s = json.load(open(f"{out}/{tag}/summary.json"))
    return (s["samples_per_second"] / (world * batch), s["samples_per_second"],
            s["step_seconds_p50"] * 1e3, foreign(tag))
def best(m, world, impl):
    tags = sorted(os.path.basename(p)[:-len(".foreign")]
                  for p in glob.glob(f"{out}/{m}-w{world}-{impl}-*.foreign"))
    runs = [run(t, world) for t in tags]
    return max(runs), len(runs)
noisy = False
names = {"rp": "ringpilot", "rp_metrics": "ringpilot (metrics on)", "peer": "peer (torch DDP, gloo)"}
lines = ["| model | world | impl | steps/s | samples/s | step p50 ms | ratio (ringpilot/peer) | host noise |",
         "|---|---|---|---|---|---|---|---|"]
for m in models:
    for world in (2, 1):
        if not glob.glob(f"{out}/{m}-w{world}-peer-*.foreign"):
            continue
        base, _ = best(m, world, "peer")
        for impl in ("rp", "rp_metrics", "peer"):
            if not glob.glob(f"{out}/{m}-w{world}-{impl}-*.foreign"):
                continue
            (sps, smp, p50, noise), n = best(m, world, impl)
            # Other processes slow a run down once they need more than the cores it
            # leaves idle (a one-rank run leaves one of two cores free).
            spare = 100 * max(0, (os.cpu_count() or world) - world)
            flag = " NOISY" if max(noise, base[3]) > spare + 10 else ""
            noisy = noisy or bool(flag)
            lines.append(f"| {m} | {world} | {names[impl]} | {sps:.3f} | {smp:.1f} | {p50:.1f} | "
                         f"{sps / base[0]:.2f}x{flag} | {noise:.0f}% (best of {n}) |")
print("\n".join(lines))
print("(each row: the best of that side's runs; host noise: CPU time other processes took"
      " during that run, in % of one core)")
if noisy:
    print("NOISY: that row or its peer row ran while other processes took more than 10% of a"
          " core beyond the cores the run left idle; add runs (--keep DIR --repeat R) until the"
          " best runs are quiet")
EOF
}

if [[ -n "$report" ]]; then
  [[ -f "$report/batch" ]] || { echo "cpu_ddp.sh: $report holds no cpu_ddp.sh run" >&2; exit 2; }
  table "$report"
  exit 0
fi

out="${keep:-$(mktemp -d /tmp/ringpilot-cpu-ddp.XXXXXX)}"
mkdir -p "$out/bin"
echo "cpu_ddp: results in $out"
# Snapshot the binaries, so that a rebuild while the benchmark runs changes nothing (their
# RUNPATH is absolute, so the copies find the same libraries).
if [[ -x "$out/bin/ringpilot-trainer" ]]; then
  # Adding runs to a kept directory: they measure the build its earlier runs measured.
  echo "cpu_ddp: adding runs to $out, with the build snapshot kept there:"
  [[ "$(cat "$out/batch")" == "$batch" ]] ||
    { echo "cpu_ddp: $out holds runs with --batch $(cat "$out/batch")" >&2; exit 2; }
  cat "$out/versions"
else
  trainer="${RINGPILOT_TRAINER:-$(dirname "$RINGPILOT")/ringpilot-trainer}"
  for f in "$RINGPILOT" "$trainer"; do
    [[ -x "$f" ]] || { echo "cpu_ddp: $f not built (scripts/build.sh)" >&2; exit 2; }
  done
  cp "$RINGPILOT" "$out/bin/ringpilot"
  cp "$trainer" "$out/bin/ringpilot-trainer"
  echo "$batch" >"$out/batch"
  {
    echo "cpu_ddp: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
      "torch $("$PY" -c 'import torch; print(torch.__version__)')," \
      "$(mpirun --version 2>/dev/null | head -1), $(gcc --version 2>/dev/null | head -1)"
    echo "cpu_ddp: ringpilot $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')," \
      "trainer built $(stat -c %y "$trainer" | cut -d. -f1)," \
      "sha256 $(sha256sum "$trainer" | cut -c1-12)"
  } | tee "$out/versions"
fi
# Allocator settings in the environment reach both sides (ringpilot then leaves malloc as
# they set it instead of applying train.retain_host_memory): say so with every table.
malloc_env=$(env | grep -E '^(MALLOC_[A-Z_]+_|GLIBC_TUNABLES|LD_PRELOAD)=' | sort | tr '\n' ' ' || true)
echo "cpu_ddp: malloc settings given to both sides: ${malloc_env:-none (ringpilot: train.retain_host_memory; peer: glibc defaults)}"
RINGPILOT="$out/bin/ringpilot"
export RINGPILOT_TRAINER="$out/bin/ringpilot-trainer"

json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d$2)" "$1"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# Host noise. This host may be shared: busy time of all cores (/proc/stat) minus what this
# script's children used (bash `times`) is CPU time other processes took.
busy_s() { awk '/^cpu /{printf "%.2f", ($2+$3+$4+$7+$8+$9)/100}' /proc/stat; }
kids_s() {  # sets $kids: CPU seconds of finished children (`times` must run in this shell)
  times >"$out/.times"
  kids=$(tail -1 "$out/.times" | awk '{split($1,a,/[ms]/); split($2,b,/[ms]/); printf "%.2f", a[1]*60+a[2]+b[1]*60+b[2]}')
}
wait_quiet() {  # until other processes use < 10% of one core over 2 s, at most $quiet_wait s
  local waited=0 b0 b1
  while (( waited < quiet_wait )); do
    b0=$(busy_s); sleep 2; b1=$(busy_s)
    awk -v a="$b0" -v b="$b1" 'BEGIN{exit !((b-a)/2 < 0.10)}' && return 0
    waited=$((waited + 2))
  done
  (( quiet_wait == 0 )) || echo "   (host still busy after ${quiet_wait} s; running anyway)"
}
mark() { wait_quiet; kids_s; mark_t=$(date +%s.%N) mark_busy=$(busy_s) mark_kids=$kids; }
foreign() {  # $1: file to write "foreign CPU seconds, wall seconds" to; prints one line
  kids_s
  local t1; t1=$(date +%s.%N)
  awk -v b0="$mark_busy" -v b1="$(busy_s)" -v k0="$mark_kids" -v k1="$kids" -v t0="$mark_t" \
    -v t1="$t1" 'BEGIN{f=(b1-b0)-(k1-k0); if (f<0) f=0; printf "%.1f %.1f\n", f, t1-t0}' >"$1"
  awk '{printf "   foreign CPU %.1f s in %.1f s wall (%.0f%% of one core)\n", $1, $2, 100*$1/$2}' "$1"
}

# run_ringpilot MODEL WORLD METRICS TAG N -> $out/TAG/{summary.json,logs/}, $out/TAG.*
run_ringpilot() {
  local m="$1" world="$2" metrics="$3" tag="$4" n="$5" opt lr
  if [[ "$m" == resnet18-cifar ]]; then opt=sgd lr=0.02; else opt=adamw lr=0.0001; fi
  local dir="$out/$tag"
  rm -rf "$dir"; mkdir -p "$dir"
  cat >"$dir.yaml" <<EOF
name: cpu-ddp-$tag
world: {nodes: 1, procs_per_node: $world, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: $m}
data: {kind: synthetic, batch_per_rank: $batch}
train: {steps: $n, optimizer: $opt, lr: $lr, momentum: 0.9, weight_decay: 0, precision: fp32, threads_per_rank: 1, seed: 0, log_every_s: 60}
comm: {bucket_mb: 25, first_bucket_mb: 1, grad_dtype: fp32}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: $metrics, bind: 127.0.0.1, port_base: 0}
EOF
  echo "== $tag: ringpilot $m world=$world metrics=$metrics steps=$n (load before: $(load))"
  mark
  local extra=()
  [[ -n ${RP_SET:-} ]] && extra=(--set "$RP_SET")
  "$RINGPILOT" run "$dir.yaml" --run-dir "$dir" "${extra[@]}" >"$dir.out" 2>&1 || {
    echo "cpu_ddp: ringpilot failed ($dir.out):" >&2; tail -20 "$dir.out" >&2; exit 1; }
  foreign "$dir.foreign"
  grep -o '([0-9]* parameters)' "$dir/logs/rank-0.log" | head -1 | tr -dc 0-9 >"$dir.params"
  echo "   $(json "$dir/summary.json" "['samples_per_second']") samples/s," \
    "p50 $(json "$dir/summary.json" "['step_seconds_p50']") s, final loss" \
    "$(json "$dir/summary.json" "['final_loss']"), $(cat "$dir.params") parameters;" \
    "$(grep -o 'checkpoint .*' "$dir/logs/rank-0.log" | tail -1 | sed 's/.*(/final checkpoint (in the timed span) /')"
}

# run_peer MODEL WORLD TAG N -> $out/TAG.json, $out/TAG.*
run_peer() {
  local m="$1" world="$2" tag="$3" n="$4"
  echo "== $tag: peer $m world=$world steps=1+$((n - 1)) (load before: $(load))"
  mark
  (cd "$ROOT" && "$PY" -m torch.distributed.run --standalone --nproc-per-node "$world" \
     "$PEER" --model "$m" --batch "$batch" --warmup 1 --steps $((n - 1)) --phases) \
     >"$out/$tag.out" 2>&1 || {
    echo "cpu_ddp: peer failed ($out/$tag.out):" >&2; tail -20 "$out/$tag.out" >&2; exit 1; }
  foreign "$out/$tag.foreign"
  sed -n 's/^PEER //p' "$out/$tag.out" | tail -1 >"$out/$tag.json"
  echo "   $(cat "$out/$tag.json")"
}

for m in "${models[@]}"; do
  if [[ -n "$steps" ]]; then n=$steps; elif [[ "$m" == resnet18-cifar ]]; then n=30; else n=200; fi
  # Runs are numbered on from those already in the directory (--keep DIR adds to it).
  first=1
  while [[ -e "$out/$m-w2-peer-$first.foreign" ]]; do first=$((first + 1)); done
  for ((r = first; r < first + repeat; r++)); do
    run_ringpilot "$m" 2 false "$m-w2-rp-$r" "$n"
    run_ringpilot "$m" 2 true "$m-w2-rp_metrics-$r" "$n"
    run_peer "$m" 2 "$m-w2-peer-$r" "$n"
    rp_params=$(cat "$out/$m-w2-rp-$r.params")
    peer_params=$(json "$out/$m-w2-peer-$r.json" "['parameters']")
    if [[ "$rp_params" != "$peer_params" ]]; then
      echo "cpu_ddp: $m parameter counts differ: ringpilot $rp_params, peer $peer_params" >&2
      exit 1
    fi
    echo "   parameters: ringpilot $rp_params, peer $peer_params (match)"
    if [[ $world1 == 1 ]]; then
      run_ringpilot "$m" 1 false "$m-w1-rp-$r" "$n"
      run_peer "$m" 1 "$m-w1-peer-$r" "$n"
    fi
  done
done

echo
table "$out"
