#!/usr/bin/env bash
# `ringpilot export`: each model trains 2 steps on the CPU (1 rank, so BatchNorm running
# statistics and weights have moved from their initial values), is exported, and loads
# into its reference implementation (tests/integration/export_check.py): torchvision's
# resnet18 (CIFAR stem) / resnet50 with load_state_dict(strict=True), and
# transformers' BertForMaskedLM.from_pretrained; their outputs on the --reference input
# must match ringpilot's own within 1e-4 of the largest output. Also: --step picks an older
# checkpoint, a run without checkpoints fails with one line and exit 1.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/export_models.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init export_models

readonly JOB_LIMIT_S=300
PYTHON=${RINGPILOT_VENV:-$RINGPILOT_SOURCE_DIR/.venv}/bin/python
"$PYTHON" -c 'import torchvision, transformers, safetensors' 2>/dev/null ||
  rp_die "$PYTHON lacks torchvision/transformers/safetensors (scripts/setup.sh installs them)"
check=$(dirname "${BASH_SOURCE[0]}")/export_check.py

job=$RP_TMP/job.yaml
cat >"$job" <<EOF2
name: it-export
world: {nodes: 1, procs_per_node: 1, device: cpu}
launch: {backend: local, max_restarts: 0, preflight: false}
model: {name: resnet18-cifar}
data: {kind: synthetic, batch_per_rank: 2}
train: {steps: 2, seed: 5, threads_per_rank: 2, log_every_s: 60, optimizer: adamw, lr: 0.001}
checkpoint: {every_steps: 1, keep: 3}
metrics: {enabled: false}
EOF2

declare -A SETS=(
  [resnet18-cifar]="model.name=resnet18-cifar model.num_classes=10"
  [resnet50]="model.name=resnet50 model.num_classes=100 data.batch_per_rank=1"
  [bert-tiny]="model.name=bert-tiny model.seq_len=32"
)
for model in resnet18-cifar resnet50 bert-tiny; do
  read -r -a kvs <<<"${SETS[$model]}"
  sets=()
  for kv in "${kvs[@]}"; do sets+=(--set "$kv"); done
  run=$RP_TMP/$model
  rp_run "$JOB_LIMIT_S" "$run.out" "$run" "$job" "${sets[@]}"
  rp_expect_ok "$model: 2 CPU steps" "$run.out" "$run" || continue
  if "$RINGPILOT" export "$run" --reference "$run/reference.safetensors" >"$run.export" 2>&1; then
    rp_row "$model: export" "$(head -n 1 "$run.export")" PASS
  else
    rp_row "$model: export" "exit $? ($(tail -n 1 "$run.export"))" FAIL
    continue
  fi
  weights=$run/export/step-00000002/model.safetensors
  if result=$("$PYTHON" "$check" "$model" "$weights" "$run/reference.safetensors" 2>&1); then
    rp_row "$model: reference implementation" "$(tail -n 1 <<<"$result")" PASS
  else
    rp_row "$model: reference implementation" "$(tail -n 3 <<<"$result" | tr '\n' ' ')" FAIL
  fi
done

# --step: the older checkpoint of the BERT run, into a chosen file.
run=$RP_TMP/bert-tiny
if [[ -d $run/checkpoints ]]; then
  if "$RINGPILOT" export "$run" --step 1 --out "$RP_TMP/old/model.safetensors" >"$RP_TMP/old.out" 2>&1 &&
    grep -q "(step 1)" "$RP_TMP/old.out" && [[ -s $RP_TMP/old/model.safetensors && -s $RP_TMP/old/config.json ]]; then
    rp_row "--step 1 --out FILE" "step 1 exported with config.json beside it" PASS
  else
    rp_row "--step 1 --out FILE" "$(tail -n 1 "$RP_TMP/old.out")" FAIL
  fi
fi

# No checkpoint: one line naming the directory, exit 1, nothing written.
mkdir -p "$RP_TMP/empty/checkpoints"
cp "$job" "$RP_TMP/empty/job.yaml"
rc=0
"$RINGPILOT" export "$RP_TMP/empty" >"$RP_TMP/empty.out" 2>&1 || rc=$?
if [[ $rc -eq 1 && $(wc -l <"$RP_TMP/empty.out") -eq 1 ]] && grep -q "no valid checkpoint" "$RP_TMP/empty.out" &&
  [[ ! -e $RP_TMP/empty/export ]]; then
  rp_row "no checkpoint" "exit 1: $(cat "$RP_TMP/empty.out")" PASS
else
  rp_row "no checkpoint" "exit $rc: $(head -c 200 "$RP_TMP/empty.out")" FAIL
fi

rp_finish
