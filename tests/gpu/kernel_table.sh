#!/usr/bin/env bash
# Every kernel of one training step with what it costs and what it must cost: Nsight Compute
# (ncu) profiles one eager step (train.cuda_graphs off, so each kernel is launched alone) of
# MODEL on one GPU and kernel_table.py prints, per kernel, its share of the step's GPU time,
# the HBM bytes it moved, its FLOPs (tensor cores and CUDA cores), and the device's floor for
# it: max(bytes / memory bandwidth, FLOPs / peak rate). The step is chosen with
# RINGPILOT_CUDA_PROFILER_STEPS (trainer/telemetry/kernel_profile.h) and ncu runs with
# --profile-from-start off, so warm-up steps and cuDNN's autotuning are not profiled.
#   tests/gpu/kernel_table.sh [--model resnet50|bert-base] [--out DIR] [--step N]
#       [--set KEY=VALUE ...]
# Writes DIR/ncu-MODEL.csv (ncu's raw page, base units) and DIR/kernels-MODEL.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
MODEL=resnet50 OUT=$(mktemp -d) STEP=8 SETS=()
while (($#)); do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --step) STEP=$2; shift 2 ;;
    --set) SETS+=(--set "$2"); shift 2 ;;
    *) echo "kernel_table: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$RP" ]] || gpu_build
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
[[ -n $NCU ]] || { echo "kernel_table: ncu not found" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# Metrics this ncu knows (a name it does not know fails the whole run).
WANTED=(gpu__time_duration.sum dram__bytes_read.sum dram__bytes_write.sum
  sm__ops_path_tensor_src_bf16_dst_fp32.sum sm__ops_path_tensor_src_fp16_dst_fp32.sum
  sm__ops_path_tensor_src_tf32_dst_fp32.sum
  smsp__sass_thread_inst_executed_op_ffma_pred_on.sum
  smsp__sass_thread_inst_executed_op_fadd_pred_on.sum
  smsp__sass_thread_inst_executed_op_fmul_pred_on.sum)
known=$("$NCU" --query-metrics 2>/dev/null | awk '{print $1}')
metrics=()
for m in "${WANTED[@]}"; do
  grep -qx "${m%.sum}" <<<"$known" && metrics+=("$m") || echo "kernel_table: ncu lacks $m" >&2
done

if [[ $MODEL == resnet50 ]]; then
  model="{name: resnet50}" batch=256 opt="optimizer: sgd, lr: 0.1, momentum: 0.9, channels_last: true"
else
  model="{name: bert-base, seq_len: 128}" batch=64 opt="optimizer: adamw, lr: 1.0e-4"
fi
job="$OUT/job-$MODEL.yaml"
# comm.timeout_s: ncu replays every kernel of the profiled step several times (a minute or
# more), which must not read as a hang.
cat >"$job" <<YAML
name: kernels-$MODEL
world: {nodes: 1, procs_per_node: 1, device: cuda}
model: $model
data: {batch_per_rank: $batch}
train: {steps: $((STEP + 2)), $opt, precision: bf16, cuda_graphs: false, log_every_s: 30}
comm: {timeout_s: 3600}
launch: {preflight: false}  # the trainer is a wrapper script the doctor cannot inspect
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: false}
YAML

# The rank runs under ncu through a wrapper named as the trainer.
wrapper="$OUT/ncu-trainer.sh"
cat >"$wrapper" <<EOF
#!/usr/bin/env bash
exec "$NCU" --profile-from-start off --target-processes all --clock-control none \
  --cache-control all --metrics $(IFS=,; echo "${metrics[*]}") \
  -f -o "$OUT/ncu-$MODEL" "$RINGPILOT_BUILD_DIR/bin/ringpilot-trainer" "\$@"
EOF
chmod +x "$wrapper"
rm -rf "$OUT/run-$MODEL"
echo "kernel_table: $MODEL, step $STEP under ncu" >&2
RINGPILOT_TRAINER="$wrapper" RINGPILOT_CUDA_PROFILER_STEPS="$STEP:1" \
  "$RP" run "$job" --run-dir "$OUT/run-$MODEL" "${SETS[@]}" >"$OUT/run-$MODEL.log" 2>&1 ||
  { tail -40 "$OUT/run-$MODEL.log"; exit 1; }
"$NCU" --import "$OUT/ncu-$MODEL.ncu-rep" --csv --page raw --print-units base \
  >"$OUT/ncu-$MODEL.csv"
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
python3 "$ROOT/tests/gpu/kernel_table.py" "$OUT/ncu-$MODEL.csv" --device "$device" \
  --title "$MODEL, batch $batch, bf16, one eager step" | tee "$OUT/kernels-$MODEL.md"
