#!/usr/bin/env bash
# The multi-GPU scaling runs (issue #7) in parts that each fit one device call (<= 10 min),
# on any GPU count: worlds 1, 2, 4, 8 up to the GPUs present.
#   tests/gpu/scaling_suite.sh [--out DIR] PART...
# Parts:
#   facts          nvidia-smi topology and links, versions, `ringpilot topo` (text, JSON
#                  snapshot, dot) and `ringpilot doctor`                         (~20 s)
#   comm           `ringpilot bench comm --device cuda` on all GPUs: every collective
#                  1 KiB-1 GiB in and out of place, all-reduce 64 KiB-2 GiB, the pairwise
#                  matrix; nccl-tests (carried in .carry/multi/nccl-tests.tgz, built by
#                  scripts/carry_multi_gpu.sh; one process per GPU under mpirun) on the
#                  same sizes (all-reduce also with both tools' loops in CUDA graphs:
#                  `bench comm --graphs 10` against nccl-tests -G 10);
#                  the busbw of each against nccl-tests', size by size           (~3 min)
#   train-resnet50, train-bert-base
#                  bench_train.sh --what all at every world: ringpilot and the fair peer
#                  (torch.compile; BERT with the masked MLM head), RP_PEER_IMPLS overrides
#                  the peer variants                                             (~5 min)
#   grad-dtype     comm.grad_dtype bf16 against fp32 on real images (Fashion-MNIST in the
#                  CIFAR layout, carried in .carry/multi/fashion.tgz): resnet18-cifar on all
#                  GPUs, deterministic, the held-out loss and top-1 every 50 of 400 steps
#                  side by side                                                  (~2 min)
#   profile        where the all-GPU step loses against the 1-GPU one: tests/gpu/profile_step.sh
#                  (eager, traced) of RP_PROFILE_MODEL (default bert-base) on 1 GPU and
#                  on all, and tests/gpu/kernel_diff.py of rank 0's traces       (~1 min)
#   profiler       tests/gpu/nccl_profiler.sh on all GPUs, with NCCL's Inspector plugin
#                  (.carry/multi/libnccl-profiler-inspector.so) beside ours      (~4 min)
#   compile        the compiled peers of both models at 1 GPU and all GPUs          (~6 min)
#   overlap        ringpilot at all GPUs with comm.overlap_optimizer off and on, and
#                  the 1-GPU run on every GPU (--each-gpu), both models          (~4 min)
#   observe        tests/gpu/observe.sh on all GPUs (its table; run dirs left out) (~3 min)
#   options        the newest model options against the defaults, ringpilot on 1 and 2
#                  GPUs: model.fused_residual_norm on and off (BERT-base),
#                  model.maxpool_kernel off (ResNet-50); rates and final losses  (~3 min)
#   contention     what the all-GPU step loses beside NCCL (issue 3's scaling and p99):
#                  ringpilot on all GPUs, BERT-base 200 and ResNet-50 100 timed steps,
#                  with comm.nccl_cta_policy efficiency / zero, comm.high_priority_stream
#                  false, train.host_lead_steps 2, 10 MB buckets and
#                  comm.backward_sm_carveout 16 / 32 (BERT-base) against the
#                  defaults                                                       (~8 min)
#   verify         what has not yet run on a GPU since it changed: the unit tests whose
#                  CUDA cases skip on CPU machines (device timeline, fused BatchNorm,
#                  fused linear + cross-entropy, gradient update order, MixedLinear,
#                  LayerNorm, max-pool, residual dropout + add + LayerNorm), then
#                  tests/gpu/correctness.sh (2 GPUs x B == 1 GPU x 2B, graphs on == off,
#                  dropout run resumed == straight)
#                  with the optimizer overlap on, as by default                 (~6 min)
# Results go to DIR (default $OUT/scaling when $OUT is set, the device tool's result
# folder, else a temporary directory), one tarball per part, scaling-PART.tgz, because
# the device tool drops results that are many files; a part's last lines are printed.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
DEST="${OUT:+$OUT/scaling}"
PARTS=()
while (($#)); do
  case $1 in
    --out) DEST=$2; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) PARTS+=("$1"); shift ;;
  esac
done
((${#PARTS[@]})) || { echo "scaling_suite: name at least one part (--help)" >&2; exit 2; }
for part in "${PARTS[@]}"; do  # before any device time goes
  case $part in
    facts|comm|train-resnet50|train-bert-base|grad-dtype|profile|profiler|compile|overlap|observe|verify|options|contention) ;;
    *) echo "scaling_suite: unknown part '$part' (--help lists them)" >&2; exit 2 ;;
  esac
done
DEST="${DEST:-$(mktemp -d)}"
mkdir -p "$DEST"
GPUS=$(nvidia-smi -L | wc -l)
WORLDS=""
for w in 1 2 4 8; do ((w <= GPUS)) && WORLDS="$WORLDS $w"; done
WORLDS="${WORLDS# }"
[[ -x "$RP" ]] || gpu_build >/dev/null || { echo "scaling_suite: build failed" >&2; exit 1; }
T0=$(date +%s)
say() { echo "scaling_suite +$(($(date +%s) - T0))s: $*"; }

part_facts() {  # dir
  local d=$1
  {
    nvidia-smi -L
    nvidia-smi topo -m
    nvidia-smi nvlink -s
    nvidia-smi --query-gpu=index,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
    nproc
    python3 -c 'import torch;print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "cudnn", torch.backends.cudnn.version())'
    mpirun --version | head -1
  } >"$d/machine.txt" 2>&1
  "$RP" topo >"$d/topo.txt" 2>&1
  "$RP" topo --json >"$d/topo.json" 2>"$d/topo.err"
  "$RP" topo --dot >"$d/topo.dot" 2>&1
  timeout 120 "$RP" doctor >"$d/doctor.txt" 2>&1
  tail -1 "$d/doctor.txt"
}

part_comm() {
  local d=$1 nt op
  nt=$(mktemp -d)
  tar xzf "$ROOT/.carry/multi/nccl-tests.tgz" -C "$nt" 2>/dev/null || true
  timeout 200 "$RP" bench comm --device cuda --np "$GPUS" --op all --min-bytes 1K --max-bytes 1G \
    --step-factor 4 --iters 20 --warmup 5 --both --json --plot "$d/comm-all.svg" \
    >"$d/comm-all.json" 2>"$d/comm-all.err"
  say "bench comm all ops: rc $?"
  timeout 150 "$RP" bench comm --device cuda --np "$GPUS" --op allreduce --min-bytes 64K \
    --max-bytes 2G --iters 40 --warmup 10 --out-of-place --json >"$d/comm-allreduce.json" \
    2>"$d/comm-allreduce.err"
  say "bench comm all-reduce: rc $?"
  # The same sweep with each loop replayed from a CUDA graph (nccl-tests' -G below), as a
  # graphed training step launches its collectives.
  timeout 150 "$RP" bench comm --device cuda --np "$GPUS" --op allreduce --min-bytes 64K \
    --max-bytes 2G --iters 40 --warmup 10 --out-of-place --graphs 10 --json \
    >"$d/comm-allreduce-graphs.json" 2>"$d/comm-allreduce-graphs.err"
  say "bench comm all-reduce, CUDA graphs: rc $?"
  timeout 120 "$RP" bench comm --device cuda --np "$GPUS" --pairwise --max-bytes 256M --json \
    --plot "$d/comm-pairwise.svg" >"$d/comm-pairwise.json" 2>"$d/comm-pairwise.err"
  say "bench comm pairwise: rc $?"
  if [[ -x $nt/mpi/all_reduce_perf ]]; then
    # nccl-tests, float sum like `bench comm`, the same sizes, iterations and warm-up as
    # each sweep above; one process per GPU under mpirun as `bench comm` runs (the
    # comparison), and one process driving all GPUs (-g, threads/: for reference; its
    # launches to the GPUs go one after another, which costs small sizes).
    local mpi=(mpirun --allow-run-as-root --oversubscribe -np "$GPUS" --bind-to none -x LD_LIBRARY_PATH
               -x NCCL_NVLS_ENABLE)
    timeout 150 "${mpi[@]}" "$nt/mpi/all_reduce_perf" -b 64K -e 2G -f 2 -g 1 -n 40 -w 10 -c 1 \
      >"$d/nccl-tests-allreduce.txt" 2>&1
    say "nccl-tests all-reduce: rc $?"
    timeout 150 "$nt/threads/all_reduce_perf" -b 64K -e 2G -f 2 -g "$GPUS" -n 40 -w 10 -c 1 \
      >"$d/nccl-tests-threads-allreduce.txt" 2>&1
    say "nccl-tests all-reduce, one process: rc $?"
    # The same with each timed loop captured in a CUDA graph and launched 10 times: at
    # 11-35 us per operation the eager loops of both tools differ by their host work.
    timeout 150 "${mpi[@]}" "$nt/mpi/all_reduce_perf" -b 64K -e 2G -f 2 -g 1 -n 40 -w 10 -c 1 -G 10 \
      >"$d/nccl-tests-graph-allreduce.txt" 2>&1
    say "nccl-tests all-reduce, CUDA graphs: rc $?"
    for op in all_reduce all_gather reduce_scatter broadcast alltoall sendrecv; do
      timeout 100 "${mpi[@]}" "$nt/mpi/${op}_perf" -b 1K -e 1G -f 4 -g 1 -n 20 -w 5 -c 1 \
        >"$d/nccl-tests-$op.txt" 2>&1
      say "nccl-tests $op: rc $?"
    done
  else
    say "no .carry/multi/nccl-tests.tgz (scripts/carry_multi_gpu.sh): comparison left out"
  fi
  python3 "$ROOT/tests/gpu/comm_vs_nccl_tests.py" "$d" | tee "$d/comparison.txt"
}

part_train() {  # dir model
  RP_PEER_IMPLS=${RP_PEER_IMPLS:-compile} RP_PEER_MLM_HEAD=masked \
    bash "$ROOT/tests/gpu/bench_train.sh" --what all --worlds "$WORLDS" \
    --models "$2" --out "$1/train.jsonl" >"$1/train.txt" 2>"$1/train.err"
  say "bench_train $2: rc $?"
  tail -n $((2 * $(wc -w <<<"$WORLDS") + 1)) "$1/train.txt"
}

# comm.grad_dtype bf16 against fp32 on real images, on all GPUs: the same deterministic job
# twice, held-out loss and top-1 every 50 steps.
part_grad_dtype() {
  local d=$1 data dtype
  data=$(mktemp -d)
  tar xzf "$ROOT/.carry/multi/fashion.tgz" -C "$data" ||
    { say "grad-dtype: no .carry/multi/fashion.tgz (scripts/carry_multi_gpu.sh)"; return; }
  data="$data/fashion"
  for dtype in fp32 bf16; do
    cat >"$d/$dtype.yaml" <<YAML
name: grad-dtype-$dtype
world: {nodes: 1, procs_per_node: $GPUS, device: cuda}
model: {name: resnet18-cifar, num_classes: 10}
data: {kind: cifar, batch_per_rank: 128, train: "$data", val: "$data"}
train: {steps: 400, optimizer: sgd, lr: 0.1, momentum: 0.9, weight_decay: 5.0e-4, seed: 5,
        lr_schedule: cosine, lr_warmup_steps: 20, precision: bf16, deterministic: true,
        log_every_s: 0.5}
comm: {grad_dtype: $dtype}
eval: {every_steps: 50, batch_per_rank: 250}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: false}
YAML
    timeout 240 "$RP" run "$d/$dtype.yaml" --run-dir "$d/run-$dtype" >"$d/$dtype.log" 2>&1
    say "grad_dtype $dtype: rc $?"
  done
  python3 - "$d" <<'PY'
import json, os, re, sys
d = sys.argv[1]
def evals(dtype):
    out = {}
    if not os.path.exists(f"{d}/run-{dtype}/logs/rank-0.log"):
        return out
    # rank 0's log: its eval lines (the launcher echoes them too).
    for line in open(f"{d}/run-{dtype}/logs/rank-0.log", errors="replace"):
        m = re.search(r"eval after step (\d+) .*?top1 ([0-9.]+).*?\| loss ([0-9.]+)", line)
        if m:
            out[int(m.group(1))] = (float(m.group(3)), float(m.group(2)))
    return out
def summary(dtype):
    try:
        return json.load(open(f"{d}/run-{dtype}/summary.json"))
    except (OSError, ValueError):
        return {}
a, b = evals("fp32"), evals("bf16")
print(f"{'step':>6} {'loss fp32':>10} {'loss bf16':>10} {'top1 fp32':>10} {'top1 bf16':>10}")
for s in sorted(set(a) | set(b)):
    la, ta = a.get(s, (float("nan"),) * 2)
    lb, tb = b.get(s, (float("nan"),) * 2)
    print(f"{s:>6} {la:>10.4f} {lb:>10.4f} {ta:>10.4f} {tb:>10.4f}")
for dtype in ("fp32", "bf16"):
    sm = summary(dtype)
    print(f"{dtype}: final_loss {sm.get('final_loss')} samples/s {sm.get('samples_per_second')}")
PY
  rm -rf "$d"/run-*/checkpoints
}

part_profile() {
  local d=$1 model=${RP_PROFILE_MODEL:-bert-base} w
  for w in 1 "$GPUS"; do
    timeout 200 bash "$ROOT/tests/gpu/profile_step.sh" --model "$model" --world "$w" \
      --out "$d/world$w" >"$d/world$w.txt" 2>&1
    say "profile $model on $w GPU(s): rc $?"
  done
  python3 "$ROOT/tests/gpu/kernel_diff.py" "$d/world1/kineto-$model.rank-0.json" \
    "$d/world$GPUS/kineto-$model.rank-0.json" | tee "$d/kernel-diff.txt" | head -25
  rm -rf "$d"/world*/run-* "$d"/world*/kineto-*  # run directories and traces: too big to bring back
}

part_profiler() {
  timeout 500 bash "$ROOT/tests/gpu/nccl_profiler.sh" "$1/out" >"$1/profiler.txt" 2>&1
  say "nccl_profiler: rc $?"
  tail -14 "$1/profiler.txt"
}

part_compile() {
  RP_PEER_IMPLS=compile bash "$ROOT/tests/gpu/bench_train.sh" --what peer --worlds "1 $GPUS" \
    --models "resnet50 bert-base" --out "$1/compile.jsonl" >"$1/compile.txt" 2>"$1/compile.err"
  say "compiled peers: rc $?"
  tail -5 "$1/compile.txt"
}

part_overlap() {
  local v
  for v in false true; do
    RP_OVERLAP=$v RP_VARIANT=overlap-$v bash "$ROOT/tests/gpu/bench_train.sh" --what ringpilot \
      --worlds "$GPUS" --models "resnet50 bert-base" --out "$1/overlap.jsonl" >/dev/null 2>>"$1/overlap.err"
    say "overlap_optimizer=$v: rc $?"
  done
  bash "$ROOT/tests/gpu/bench_train.sh" --what ringpilot --worlds 1 --each-gpu \
    --models "resnet50 bert-base" --out "$1/overlap.jsonl" >"$1/overlap.txt" 2>>"$1/overlap.err"
  say "each GPU: rc $?"
  cat "$1/overlap.txt"
}

part_observe() {
  timeout 400 bash "$ROOT/tests/gpu/observe.sh" "$1/run" >"$1/observe.txt" 2>&1
  say "observe: rc $?"
  tail -12 "$1/observe.txt"
  rm -rf "$1/run"  # run directories with checkpoints and traces: too big to bring back
}

# rows_table JSONL FIELD...: bench_train.sh rows, the named fields in columns (p99/p50 is
# step_p99_ms / step_ms); a field a row lacks prints as '-'.
rows_table() {
  python3 - "$@" <<'PY'
import json, sys
path, fields = sys.argv[1], sys.argv[2:]
def value(row, field):
    if field == "p99/p50":
        return row["step_p99_ms"] / row["step_ms"]
    return row.get(field)
print(" ".join(f"{f:>16}" for f in fields))
for line in open(path):
    row = json.loads(line)
    cells = [value(row, f) for f in fields]
    print(" ".join(f"{c:>16.4f}" if isinstance(c, float) else f"{'-' if c is None else c:>16}"
                   for c in cells))
PY
}

part_options() {
  local worlds="1" bench=(bash "$ROOT/tests/gpu/bench_train.sh" --what ringpilot --out "$1/options.jsonl")
  ((GPUS >= 2)) && worlds="1 2"
  RP_VARIANT=default "${bench[@]}" --worlds "$worlds" --models "bert-base resnet50" >/dev/null 2>>"$1/options.err"
  say "defaults: rc $?"
  RP_FUSED_RESIDUAL=true RP_VARIANT=fused-residual "${bench[@]}" --worlds "$worlds" \
    --models bert-base >/dev/null 2>>"$1/options.err"
  say "model.fused_residual_norm true: rc $?"
  RP_FUSED_RESIDUAL=false RP_VARIANT=no-fused-residual "${bench[@]}" --worlds "$worlds" \
    --models bert-base >/dev/null 2>>"$1/options.err"
  say "model.fused_residual_norm false: rc $?"
  RP_MAXPOOL_KERNEL=false RP_VARIANT=aten-maxpool "${bench[@]}" --worlds "$worlds" \
    --models resnet50 >/dev/null 2>>"$1/options.err"
  say "model.maxpool_kernel false: rc $?"
  rows_table "$1/options.jsonl" model world variant per_gpu_rate step_ms step_p99_ms final_loss
}

part_contention() {
  local d=$1 model steps variant
  local bench=(bash "$ROOT/tests/gpu/bench_train.sh" --what ringpilot --worlds "$GPUS"
               --out "$d/contention.jsonl")
  for model in bert-base resnet50; do
    steps=215
    [[ $model == resnet50 ]] && steps=115
    local variants=(default cta-efficiency cta-zero low-priority lead2 bucket10)
    [[ $model == bert-base ]] && variants+=(carveout16 carveout32)
    for variant in "${variants[@]}"; do
      case $variant in
        default) env RP_VARIANT=$variant "${bench[@]}" --models $model --steps $steps ;;
        cta-efficiency) env RP_VARIANT=$variant RP_CTA_POLICY=efficiency "${bench[@]}" --models $model --steps $steps ;;
        cta-zero) env RP_VARIANT=$variant RP_CTA_POLICY=zero "${bench[@]}" --models $model --steps $steps ;;
        low-priority) env RP_VARIANT=$variant RP_COMM_HIGH_PRIORITY=false "${bench[@]}" --models $model --steps $steps ;;
        lead2) env RP_VARIANT=$variant RP_HOST_LEAD=2 "${bench[@]}" --models $model --steps $steps ;;
        bucket10) env RP_VARIANT=$variant RP_BUCKET_MB=10 RP_BERT_BUCKET_MB=10 "${bench[@]}" \
          --models $model --steps $steps ;;
        carveout*) env RP_VARIANT=$variant RP_BACKWARD_CARVEOUT="${variant#carveout}" "${bench[@]}" \
          --models $model --steps $steps ;;
      esac >/dev/null 2>>"$d/contention.err"
      say "$model $variant: rc $?"
    done
  done
  rows_table "$d/contention.jsonl" model variant per_gpu_rate step_ms step_p99_ms p99/p50 \
    comm_exposed_ms
}

part_verify() {
  local d=$1 t bin fail=0
  local tests=(comm_device_timeline_test trainer_ops_fused_batch_norm_test
               trainer_ops_linear_cross_entropy_test trainer_step_gradient_update_test
               trainer_ops_mixed_linear_test trainer_ops_layer_norm_test trainer_ops_max_pool_test
               trainer_ops_residual_norm_test trainer_step_step_clock_test trainer_checkpoint_rng_state_test)
  gpu_build_test "${tests[@]}" >"$d/build.log" 2>&1 || { say "verify: test build failed"; tail -20 "$d/build.log"; return; }
  for t in "${tests[@]}"; do
    bin=$(gpu_test_binary "$t")
    timeout 300 "$bin" >"$d/$t.txt" 2>&1 || fail=1
    say "$t: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$d/$t.txt" | tr '\n' ' ')"
  done
  if ((GPUS >= 2)); then
    timeout 420 bash "$ROOT/tests/gpu/correctness.sh" "$d/correctness" >"$d/correctness.txt" 2>&1 || fail=1
    tail -5 "$d/correctness.txt"
    rm -rf "$d/correctness"  # run directories: checkpoints, too big to bring back
  fi
  say "verify: $( ((fail)) && echo FAIL || echo PASS)"
}

for part in "${PARTS[@]}"; do
  dir="$(mktemp -d)/$part"
  mkdir -p "$dir"
  say "part $part ($GPUS GPUs, worlds $WORLDS)"
  case $part in
    facts) part_facts "$dir" ;;
    comm) part_comm "$dir" ;;
    train-resnet50) part_train "$dir" resnet50 ;;
    train-bert-base) part_train "$dir" bert-base ;;
    grad-dtype) part_grad_dtype "$dir" ;;
    profile) part_profile "$dir" ;;
    profiler) part_profiler "$dir" ;;
    compile) part_compile "$dir" ;;
    overlap) part_overlap "$dir" ;;
    observe) part_observe "$dir" ;;
    options) part_options "$dir" ;;
    contention) part_contention "$dir" ;;
    verify) part_verify "$dir" ;;
  esac
  tar czf "$DEST/scaling-$part.tgz" -C "$(dirname "$dir")" "$part"
  say "part $part -> $DEST/scaling-$part.tgz"
done
