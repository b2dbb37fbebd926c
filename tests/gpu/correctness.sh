#!/usr/bin/env bash
# GPU correctness (1 or 2 GPUs): data-parallel equivalence on GPU and CUDA graphs
# on vs off. Prints a table last; exit 1 on any failure. fp32, TF32 off and cuDNN's
# deterministic algorithms (train.deterministic): autotuning may pick different convolution
# algorithms in two runs, whose rounding differs by more than the limits below.
#   2 GPUs x batch B == 1 GPU x batch 2B after 5 fp32 steps (rel diff <= 1e-4)
#   cuda_graphs on == off after 10 fp32 steps (rel diff <= 1e-5)
#   BERT-base with dropout: 12 steps == 6 steps + resume to 12 (rel diff <= 1e-6)
#   recipes (schedule, accumulation, clipping, no-decay groups): graphs on == off (1e-5),
#   2 micro-batches x 8 == batch 16 (1e-4)
# On one GPU the 2-GPU equivalence rows are SKIPPED and the graph and resume checks run
# with one rank (the step, its graphs and the checkpoint's RNG streams all the same).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ -x "$RP" ]] || gpu_build
OUT="${1:-$(mktemp -d)}"
mkdir -p "$OUT"
rows=()
fail=0
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
PROCS=$((GPUS >= 2 ? 2 : 1))
skip() {  # label: a check that needs 2 GPUs
  rows+=("$(printf '%-44s %-14s %10s %8s %s' "$1" "-" "-" "-" "SKIPPED (1 GPU)")")
}
run() {  # name, then --set args
  local name=$1; shift
  local set=()
  for kv in "$@"; do set+=(--set "$kv"); done
  cat >"$OUT/$name.yaml" <<YAML
name: $name
world: {nodes: 1, procs_per_node: 1, device: cuda}
model: {name: resnet50}
data: {batch_per_rank: 8}
train: {steps: 5, precision: fp32, tf32: false, deterministic: true, lr: 0.01, log_every_s: 30}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: false}
YAML
  # A run directory that exists would be resumed (its checkpoints), not trained afresh.
  rm -rf "${OUT:?}/$name"
  "$RP" run "$OUT/$name.yaml" --run-dir "$OUT/$name" "${set[@]}" >"$OUT/$name.log" 2>&1 ||
    { echo "correctness: run $name failed:"; grep -m3 FATAL "$OUT/$name"/logs/rank-*.log; fail=1; }
}
check() {  # label, run a, run b, limit
  local label=$1 a=$2 b=$3 limit=$4
  if [[ ! -f "$OUT/$a/summary.json" || ! -f "$OUT/$b/summary.json" ]]; then
    rows+=("$(printf '%-44s %-14s %10s %8s %s' "$label" "-" "-" "$limit" "FAIL (run failed)")")
    fail=1
    return
  fi
  for key in param_norm param_abs_sum; do
    local d
    d=$(rel_diff "$(json_field "$OUT/$a/summary.json" $key)" "$(json_field "$OUT/$b/summary.json" $key)")
    local ok
    ok=$(python3 -c "print('PASS' if $d <= $limit else 'FAIL')")
    [[ $ok == PASS ]] || fail=1
    rows+=("$(printf '%-44s %-14s %10.3e %8s %s' "$label" "$key" "$d" "$limit" "$ok")")
  done
}
# ResNet-50 (synchronised BatchNorm) and BERT-base (dropout 0).
if ((GPUS >= 2)); then
  run r50_w1 world.procs_per_node=1 data.batch_per_rank=16 model.sync_batchnorm=true
  run r50_w2 world.procs_per_node=2 data.batch_per_rank=8 model.sync_batchnorm=true
  check "resnet50 2 GPUs x 8 vs 1 GPU x 16" r50_w1 r50_w2 1e-4
  run bert_w1 model.name=bert-base model.dropout=0 train.optimizer=adamw train.lr=1e-4 world.procs_per_node=1 data.batch_per_rank=16
  run bert_w2 model.name=bert-base model.dropout=0 train.optimizer=adamw train.lr=1e-4 world.procs_per_node=2 data.batch_per_rank=8
  check "bert-base 2 GPUs x 8 vs 1 GPU x 16" bert_w1 bert_w2 1e-4
else
  skip "resnet50 2 GPUs x 8 vs 1 GPU x 16"
  skip "bert-base 2 GPUs x 8 vs 1 GPU x 16"
fi
# CUDA graphs on vs off, 2 ranks (1 on one GPU), 10 steps.
run bert_eager model.name=bert-base model.dropout=0 train.optimizer=adamw train.lr=1e-4 world.procs_per_node=$PROCS train.steps=10 train.cuda_graphs=false
run bert_graph model.name=bert-base model.dropout=0 train.optimizer=adamw train.lr=1e-4 world.procs_per_node=$PROCS train.steps=10 train.cuda_graphs=true
check "bert-base cuda_graphs on vs off (10 steps)" bert_eager bert_graph 1e-5
run r50_eager world.procs_per_node=$PROCS train.steps=10 train.cuda_graphs=false
run r50_graph world.procs_per_node=$PROCS train.steps=10 train.cuda_graphs=true
check "resnet50 cuda_graphs on vs off (10 steps)" r50_eager r50_graph 1e-5
# Resume with dropout: 12 steps straight == 6 steps, then the same run directory resumed to
# 12 (the checkpoint carries each rank's CUDA generator, so the masks continue).
bert_dropout=(model.name=bert-base model.dropout=0.1 train.optimizer=adamw train.lr=1e-4
              "world.procs_per_node=$PROCS" train.cuda_graphs=true checkpoint.every_steps=6)
run bert_straight "${bert_dropout[@]}" train.steps=12
run bert_resumed "${bert_dropout[@]}" train.steps=6
resume_sets=()
for kv in "${bert_dropout[@]}" train.steps=12; do resume_sets+=(--set "$kv"); done
"$RP" run "$OUT/bert_resumed.yaml" --run-dir "$OUT/bert_resumed" "${resume_sets[@]}" \
  >"$OUT/bert_resumed.resume.log" 2>&1 || { echo "correctness: resume of bert_resumed failed"; fail=1; }
grep -q "resumed from" "$OUT"/bert_resumed/logs/rank-0.log ||
  { echo "correctness: bert_resumed did not resume"; fail=1; }
check "bert-base dropout 12 steps vs 6 + resume" bert_straight bert_resumed 1e-6
# Recipes (docs/recipes.md) on one GPU, graphs on vs off: the device-resident learning rate
# under a cosine schedule with warm-up, 2 micro-batches (two graphs), clipping, no decay on
# norms and biases; and 2 micro-batches of 8 vs one batch of 16 (eager).
recipe=(model.name=bert-base model.dropout=0 train.optimizer=adamw train.lr=1e-4
        world.procs_per_node=1 train.steps=10 train.grad_accum_steps=2 train.lr_schedule=cosine
        train.lr_warmup_steps=3 train.max_grad_norm=1.0 train.weight_decay=0.01
        train.decay_norm_and_bias=false)
run recipe_eager "${recipe[@]}" train.cuda_graphs=false
run recipe_graph "${recipe[@]}" train.cuda_graphs=true
check "bert-base recipe cuda_graphs on vs off" recipe_eager recipe_graph 1e-5
run recipe_big "${recipe[@]}" train.cuda_graphs=false train.grad_accum_steps=1 data.batch_per_rank=16
check "bert-base 2 micro-batches x 8 vs batch 16" recipe_eager recipe_big 1e-4
grep -h "captured the training step" "$OUT"/*_graph/logs/rank-0.log >/dev/null ||
  { echo "correctness: no CUDA graph was captured"; fail=1; }
printf '%-44s %-14s %10s %8s %s\n' check metric rel_diff limit result
printf '%s\n' "${rows[@]}"
exit $fail
