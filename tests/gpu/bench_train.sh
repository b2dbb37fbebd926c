#!/usr/bin/env bash
# Training throughput: ringpilot vs stock PyTorch DDP (the peer, torch_ddp_bench.py)
# on the same machine in the same run, on 1 and 2 GPUs (any count the machine has).
#   tests/gpu/bench_train.sh [--what all|ringpilot|peer] [--worlds "1 2"]
#       [--models "bert-base resnet50"] [--steps 65] [--out FILE.jsonl] [--peer DIR]
#       [--each-gpu]   (also the 1-GPU ringpilot run on every other GPU, variant gpuK)
# ringpilot leaves the first 15 steps out of its rates and percentiles (train.timing_skip_steps,
# RP_WARMUP), as the peer times 50 steps after 15 warm-up ones. RP_PEER_IMPLS="eager compile"
# (default) picks which peer variants run; RP_GRAD_DTYPE=bf16 reduces gradients in bf16;
# RP_OVERLAP=false turns comm.overlap_optimizer off; RP_MIXED_LINEAR=false runs BERT's linear
# layers through at::linear under autocast (model.mixed_linear), RP_MIXED_ACCUMULATE=false lets
# autograd add weight gradients into .grad (model.mixed_linear_accumulate), RP_OPT_COPIES=false
# refreshes the bf16 weight copies before each forward instead of the optimizer writing them
# (model.mixed_linear_optimizer_copies); RP_MAXPOOL_KERNEL=false
# runs ResNet-50's stem max-pool by ATen (model.maxpool_kernel); RP_STEM_S2D=false its stem
# convolution as a plain 7x7 stride-2 one (model.stem_space_to_depth), RP_SHORTCUT_GEMM=false its
# bottlenecks' shortcut gradients summed by autograd (model.shortcut_in_gemm), RP_BN_ACCUMULATE=false
# its BatchNorm parameter gradients added by autograd (model.fused_batchnorm_accumulate);
# RP_FUSED_RESIDUAL=true|false
# sets BERT's model.fused_residual_norm (its default otherwise); RP_HOST_LEAD=N sets
# train.host_lead_steps, RP_CTA_POLICY=default|efficiency|zero comm.nccl_cta_policy,
# RP_COMM_HIGH_PRIORITY=true|false comm.high_priority_stream, RP_BACKWARD_CARVEOUT=N
# comm.backward_sm_carveout, RP_FIRST_BUCKET_MB=X comm.first_bucket_mb,
# RP_NCCL_REGISTRATION=none|register|symmetric comm.nccl_buffer_registration, RP_DATA="kind:
# image_folder, train: DIR" more data keys (bench/gpu_image_input.sh), RP_VOCAB=N BERT's
# model.vocab_size, RP_PEER_MLM_HEAD=masked the fair BERT peer (torch_ddp_bench.py --mlm-head
# masked: MLM logits of the masked tokens only; impl names end in -masked).
# Writes one JSON object per line (model, world, batch_per_gpu, impl, per_gpu_rate,
# step_ms, step_p99_ms, first_step_s, peak_mem_gb; sm_clock_mhz, power_w and
# power_capped_share from nvidia-smi during the run (tests/gpu/gpu_watch.py); ringpilot rows
# also comm_exposed_ms, comm_exposed_share and overlap_ratio from the GPU timeline, and
# nvml_power_limited_share, rank 0's stats file's gpu_clocks over the timed steps, and
# diagnose_warnings, `ringpilot diagnose --json`'s warnings on the run directory) and
# prints a table last, with the scaling of each impl relative to its 1-GPU row. Any GPU
# count: --worlds "1 2 4 8".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
WHAT=all WORLDS="1 2" MODELS="bert-base resnet50" STEPS=65 EACH_GPU=0
PEER_DIR="$ROOT/.carry/peers"
OUTFILE="$ROOT/bench/results/$(date +%F)-train.jsonl"
while (($#)); do
  case $1 in
    --what) WHAT=$2; shift 2 ;;
    --worlds) WORLDS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --out) OUTFILE=$2; shift 2 ;;
    --peer) PEER_DIR=$2; shift 2 ;;
    --each-gpu) EACH_GPU=1; shift ;;
    *) echo "bench_train: unknown argument $1" >&2; exit 2 ;;
  esac
done
GPUS=$(nvidia-smi -L | wc -l)
WORK=$(mktemp -d)
mkdir -p "$(dirname "$OUTFILE")"
: >>"$OUTFILE"
if [[ $WHAT != peer ]]; then [[ -x "$RP" ]] || gpu_build; fi

batch_of() { [[ $1 == resnet50 ]] && echo 256 || echo 64; }

# GPU clocks and power while each run goes (nvidia-smi every 200 ms), summarised into the
# row by gpu_watch.py: sm_clock_mhz, power_w, power_capped_share. A GPU at its power limit
# lowers its clocks, which costs multi-GPU runs more (NVLink traffic and NCCL's kernels
# draw power too).
CAP_FIELD=clocks_event_reasons.sw_power_cap
nvidia-smi --help-query-gpu | grep -q "$CAP_FIELD" || CAP_FIELD=clocks_throttle_reasons.sw_power_cap
gpu_watch_start() {  # file; prints the watcher's pid
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,clocks.sm,power.draw,$CAP_FIELD \
    --format=csv,noheader,nounits -lms 200 >"$1" 2>/dev/null &
  echo $!
}
used_gpus() {  # world: the physical GPU indices a run of that size uses
  if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then echo "${CUDA_VISIBLE_DEVICES//,/ }"; else seq -s ' ' 0 $(($1 - 1)); fi
}

bench_ringpilot() {  # model world
  local model=$1 world=$2 batch
  batch=$(batch_of "$model")
  local job="$WORK/rp-$model-$world.yaml"
  if [[ $model == resnet50 ]]; then
    cat >"$job" <<YAML
name: bench-$model-$world
world: {nodes: 1, procs_per_node: $world, device: cuda}
model: {name: resnet50, fused_batchnorm: ${RP_FUSED_BN:-true}, fused_batchnorm_accumulate: ${RP_BN_ACCUMULATE:-true}, maxpool_kernel: ${RP_MAXPOOL_KERNEL:-true}, stem_space_to_depth: ${RP_STEM_S2D:-true}, shortcut_in_gemm: ${RP_SHORTCUT_GEMM:-true}}
data: {batch_per_rank: $batch${RP_DATA:+, $RP_DATA}}
train: {steps: $STEPS, timing_skip_steps: ${RP_WARMUP:-15}, optimizer: sgd, lr: 0.1, momentum: 0.9, weight_decay: 5.0e-5, precision: bf16, channels_last: true, cuda_graphs: ${RP_GRAPHS_RESNET:-true}, log_every_s: 10${RP_HOST_LEAD:+, host_lead_steps: $RP_HOST_LEAD}}
comm: {bucket_mb: ${RP_BUCKET_MB:-25}, ${RP_FIRST_BUCKET_MB:+first_bucket_mb: $RP_FIRST_BUCKET_MB, }grad_dtype: ${RP_GRAD_DTYPE:-fp32}, overlap_optimizer: ${RP_OVERLAP:-true}${RP_CTA_POLICY:+, nccl_cta_policy: $RP_CTA_POLICY}${RP_COMM_HIGH_PRIORITY:+, high_priority_stream: $RP_COMM_HIGH_PRIORITY}${RP_BACKWARD_CARVEOUT:+, backward_sm_carveout: $RP_BACKWARD_CARVEOUT}${RP_NCCL_REGISTRATION:+, nccl_buffer_registration: $RP_NCCL_REGISTRATION}}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, port_base: 0}
YAML
  else
    cat >"$job" <<YAML
name: bench-$model-$world
world: {nodes: 1, procs_per_node: $world, device: cuda}
model: {name: bert-base, seq_len: 128, mixed_linear: ${RP_MIXED_LINEAR:-true}, mixed_linear_accumulate: ${RP_MIXED_ACCUMULATE:-true}${RP_OPT_COPIES:+, mixed_linear_optimizer_copies: $RP_OPT_COPIES}${RP_FUSED_RESIDUAL:+, fused_residual_norm: $RP_FUSED_RESIDUAL}${RP_VOCAB:+, vocab_size: $RP_VOCAB}}
data: {batch_per_rank: $batch${RP_DATA:+, $RP_DATA}}
train: {steps: $STEPS, timing_skip_steps: ${RP_WARMUP:-15}, optimizer: adamw, lr: 1.0e-4, precision: bf16, cuda_graphs: true, log_every_s: 10${RP_HOST_LEAD:+, host_lead_steps: $RP_HOST_LEAD}}
comm: {bucket_mb: ${RP_BERT_BUCKET_MB:-25}, ${RP_FIRST_BUCKET_MB:+first_bucket_mb: $RP_FIRST_BUCKET_MB, }grad_dtype: ${RP_GRAD_DTYPE:-fp32}, overlap_optimizer: ${RP_OVERLAP:-true}${RP_CTA_POLICY:+, nccl_cta_policy: $RP_CTA_POLICY}${RP_COMM_HIGH_PRIORITY:+, high_priority_stream: $RP_COMM_HIGH_PRIORITY}${RP_BACKWARD_CARVEOUT:+, backward_sm_carveout: $RP_BACKWARD_CARVEOUT}${RP_NCCL_REGISTRATION:+, nccl_buffer_registration: $RP_NCCL_REGISTRATION}}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: true, port_base: 0}
YAML
  fi
  # One run directory per variant: `ringpilot run` into an existing one resumes it.
  local dir="$WORK/rp-$model-$world${RP_VARIANT:+-$RP_VARIANT}"
  echo "bench_train: ringpilot $model x$world: $RP run $job" >&2
  local watcher rc=0
  watcher=$(gpu_watch_start "$dir.smi")
  "$RP" run "$job" --run-dir "$dir" >"$dir.log" 2>&1 || rc=$?
  kill "$watcher" 2>/dev/null
  if ((rc)); then
    echo "bench_train: ringpilot $model x$world failed:" >&2
    tail -25 "$dir.log" >&2
    return 0
  fi
  # What `ringpilot diagnose` says of the run (every rank: power-limited GPUs, stragglers,
  # input-bound ranks, exposed communication), kept in the row.
  "$RP" diagnose --json "$dir" >"$dir.diagnose.json" 2>/dev/null || rm -f "$dir.diagnose.json"
  python3 - "$dir/summary.json" "$model" "$world" "$batch" "$dir/logs/rank-0.stats.json" \
    <<'PY' | python3 "$ROOT/tests/gpu/gpu_watch.py" merge "$dir.smi" "$(used_gpus "$world")" >>"$OUTFILE"
import json, os, sys
s = json.load(open(sys.argv[1]))
world = int(sys.argv[3])
row = {"model": sys.argv[2], "world": world, "batch_per_gpu": int(sys.argv[4]),
       "impl": "ringpilot", "per_gpu_rate": s["samples_per_second"] / world,
       "step_ms": s["step_seconds_p50"] * 1e3, "step_p99_ms": s["step_seconds_p99"] * 1e3,
       "first_step_s": s["first_step_s"], "peak_mem_gb": s["peak_mem_gb"],
       "data_ms_p50": s.get("data_seconds_p50", 0) * 1e3, "final_loss": s.get("final_loss"),
       "variant": os.environ.get("RP_VARIANT", "")}
# The rank's input lines (which decoder and why; where the GPU pipeline's time went).
log = os.path.join(os.path.dirname(sys.argv[5]), "rank-0.log")
if os.path.exists(log):
    for line in open(log, errors="replace"):
        if "input: " in line:
            row.setdefault("input", []).append(line.split("input: ", 1)[1].strip())
# Exposed communication (GPU timeline, timed steps only): the wait for gradient
# all-reduces after backward, per step and as a share of the median step.
if os.path.exists(sys.argv[5]):
    st = json.load(open(sys.argv[5]))
    steps = max(st.get("steps", 0), 1)
    exposed = st["phase_seconds_total"].get("comm_exposed", 0) / steps * 1e3
    row["comm_exposed_ms"] = exposed
    row["comm_exposed_share"] = exposed / row["step_ms"] if row["step_ms"] else None
    row["overlap_ratio"] = st.get("overlap_ratio")
    # NVML's exact count of the time the power limit held rank 0's clocks down over the
    # timed steps (gpu_clocks), beside gpu_watch.py's nvidia-smi polls of every GPU.
    clocks = st.get("gpu_clocks") or {}
    if clocks.get("seconds") and clocks.get("power_limited_seconds") is not None:
        row["nvml_power_limited_share"] = min(1.0, clocks["power_limited_seconds"] / clocks["seconds"])
diagnosis = os.path.dirname(os.path.dirname(sys.argv[5])) + ".diagnose.json"
if os.path.exists(diagnosis):
    row["diagnose_warnings"] = json.load(open(diagnosis)).get("warnings", [])
print(json.dumps(row))
PY
}

bench_peer() {  # model world impl [compile mode]
  local model=$1 world=$2 impl=$3 mode=${4:-} batch
  batch=$(batch_of "$model")
  local args=(--model "$model" --batch "$batch")
  [[ -n $mode ]] && args+=(--compile "$mode")
  # The fair BERT peer computes the MLM logits of the masked tokens only, as ringpilot does.
  if [[ $model == bert* && -n ${RP_PEER_MLM_HEAD:-} ]]; then
    args+=(--mlm-head "$RP_PEER_MLM_HEAD")
    impl="$impl-$RP_PEER_MLM_HEAD"
  fi
  echo "bench_train: peer $impl $model x$world" >&2
  local log="$WORK/peer-$impl-$model-$world.log" watcher rc=0
  watcher=$(gpu_watch_start "$log.smi")
  python3 -m torch.distributed.run --standalone --nproc_per_node="$world" \
    "$PEER_DIR/torch_ddp_bench.py" "${args[@]}" >"$log" 2>&1 || rc=$?
  kill "$watcher" 2>/dev/null
  if ((rc)); then
    echo "bench_train: peer $impl $model x$world failed:" >&2
    tail -15 "$log" >&2
    return 0
  fi
  grep -h '^PEER ' "$log" | tail -1 | sed 's/^PEER //' |
    python3 -c "import json,sys;d=json.load(sys.stdin);d['impl']='$impl';print(json.dumps(d))" |
    python3 "$ROOT/tests/gpu/gpu_watch.py" merge "$log.smi" "$(used_gpus "$world")" >>"$OUTFILE"
}

for model in $MODELS; do
  for world in $WORLDS; do
    ((world <= GPUS)) || { echo "bench_train: skipping world $world (only $GPUS GPUs)" >&2; continue; }
    if [[ $WHAT != peer ]]; then bench_ringpilot "$model" "$world"; fi
    # --each-gpu: the 1-GPU run again on every other GPU (a synchronised multi-GPU step
    # goes at the slowest GPU's pace; rows tagged variant gpuK).
    if [[ $WHAT != peer && $world == 1 && $EACH_GPU == 1 ]]; then
      for ((k = 1; k < GPUS; k++)); do
        CUDA_VISIBLE_DEVICES=$k RP_VARIANT=gpu$k bench_ringpilot "$model" 1
      done
    fi
    if [[ $WHAT != ringpilot ]]; then
      [[ " ${RP_PEER_IMPLS:-eager compile} " == *" eager "* ]] && bench_peer "$model" "$world" peer-eager
      if [[ " ${RP_PEER_IMPLS:-eager compile} " != *" compile "* ]]; then
        :
      elif [[ $model == resnet50 ]]; then
        bench_peer "$model" "$world" peer-compile-default default
      else
        bench_peer "$model" "$world" peer-compile-reduce-overhead reduce-overhead
      fi
    fi
  done
done
python3 - "$OUTFILE" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# Scaling: per-GPU rate relative to the same model and impl on 1 GPU (same file).
# The baseline is the first 1-GPU row of the model and impl, not one of --each-gpu's gpuK.
one = {}
for r in rows:
    if r["world"] == 1 and not str(r.get("variant", "")).startswith("gpu"):
        one.setdefault((r["model"], r["impl"]), r["per_gpu_rate"])
def fmt(v, spec):
    return "-" if v is None else format(v, spec)
print(f"{'model':10} {'world':>5} {'batch':>5} {'impl':30} {'per_gpu_rate':>12} {'scaling':>8} {'step_ms':>8} "
      f"{'p99_ms':>8} {'exposed':>8} {'first_s':>7} {'mem_gb':>7} {'sm_mhz':>6} {'capped':>6}")
for r in rows:
    base = one.get((r["model"], r["impl"]))
    scaling = f"{100 * r['per_gpu_rate'] / base:.1f}%" if base else "-"
    share = r.get("comm_exposed_share")
    exposed = f"{100 * share:.1f}%" if share is not None else "-"
    impl = r["impl"] + (f"/{r['variant']}" if r.get("variant") else "")
    print(f"{r['model']:10} {r['world']:>5} {r['batch_per_gpu']:>5} {impl:30} {r['per_gpu_rate']:>12.1f} "
          f"{scaling:>8} {r['step_ms']:>8.2f} {r['step_p99_ms']:>8.2f} {exposed:>8} {r['first_step_s']:>7.1f} "
          f"{r['peak_mem_gb']:>7.2f} {fmt(r.get('sm_clock_mhz'), '.0f'):>6} "
          f"{fmt(r.get('power_capped_share'), '.0%'):>6}")
PY
