#!/usr/bin/env bash
# Where a training step's GPU time goes: runs MODEL eagerly (CUDA graphs off, so every
# kernel is traced) on WORLD GPUs with PyTorch's profiler over 3 steps and prints GPU
# milliseconds per step by kernel category and the top kernels.
#   tests/gpu/profile_step.sh [--model bert-base|resnet50] [--world 1] [--out DIR]
#       [--set KEY=VALUE ...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
MODEL=bert-base WORLD=1 OUT=$(mktemp -d) SETS=()
while (($#)); do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --world) WORLD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --set) SETS+=(--set "$2"); shift 2 ;;
    *) echo "profile_step: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$RP" ]] || gpu_build
mkdir -p "$OUT"
job="$OUT/profile-$MODEL.yaml"
if [[ $MODEL == resnet50 ]]; then
  model="{name: resnet50}" batch=256 opt="optimizer: sgd, lr: 0.1, momentum: 0.9, channels_last: true"
else
  model="{name: bert-base, seq_len: 128}" batch=64 opt="optimizer: adamw, lr: 1.0e-4"
fi
cat >"$job" <<YAML
name: profile-$MODEL
world: {nodes: 1, procs_per_node: $WORLD, device: cuda}
model: $model
data: {batch_per_rank: $batch}
train: {steps: 16, $opt, precision: bf16, cuda_graphs: false, log_every_s: 30}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: false}
YAML
rm -rf "$OUT/run-$MODEL"
RINGPILOT_KINETO_TRACE="$OUT/kineto-$MODEL" RINGPILOT_KINETO_STEPS=10:3 \
  "$RP" run "$job" --run-dir "$OUT/run-$MODEL" "${SETS[@]}" >"$OUT/run-$MODEL.log" 2>&1 ||
  { tail -30 "$OUT/run-$MODEL.log"; exit 1; }
python3 "$ROOT/tests/gpu/kernel_summary.py" "$OUT/kineto-$MODEL.rank-0.json" 3 40
