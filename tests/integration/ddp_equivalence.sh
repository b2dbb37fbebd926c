#!/usr/bin/env bash
# DDP equivalence: W ranks x batch B reach the same weights as 1 rank x batch W*B.
#
# For resnet18-cifar (sync_batchnorm, SGD, B=2) and bert-tiny (dropout 0, AdamW lr 1e-3,
# B=4), and W = 2, 3, 4 (one rank has nothing to reduce): a W-rank job whose gradient
# buckets are small and uneven (comm.bucket_mb=1.3, comm.first_bucket_mb=0.3: the rank-0
# log must report >= 3 buckets)
# is compared after 5 steps with a one-process job of batch W*B using the default buckets.
# Data is a function of (seed, global sample index), so both see the same samples; the
# relative difference of summary.json's param_norm and param_abs_sum must be <= 1e-5.
# ResNet uses lr 0.01: at lr 0.1 five steps of batch-2 BatchNorm amplify float rounding
# chaotically (one process with 1 vs 2 intra-op threads already differs by ~3e-5).
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/ddp_equivalence.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init ddp_equivalence
# One table row per (model, W); the individual checks only show up when they fail.
RP_QUIET_PASS=1

readonly STEPS=5 TOL=1e-5 JOB_LIMIT_S=240
readonly WORLDS=(2 3 4)

job=$RP_TMP/job.yaml
cat >"$job" <<EOF
name: it-ddp-equivalence
world: {nodes: 1, procs_per_node: 1, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: resnet18-cifar}
data: {kind: synthetic, batch_per_rank: 1}
train: {steps: $STEPS, seed: 0, threads_per_rank: 1, log_every_s: 60}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: false}
EOF

# model -> per-rank batch and the keys that make the comparison exact.
declare -A BATCH=([resnet18-cifar]=2 [bert-tiny]=4)
declare -A MODEL_SETS=(
  [resnet18-cifar]="model.name=resnet18-cifar model.sync_batchnorm=true train.optimizer=sgd train.lr=0.01"
  [bert-tiny]="model.name=bert-tiny model.dropout=0 train.optimizer=adamw train.lr=0.001"
)

for model in resnet18-cifar bert-tiny; do
  b=${BATCH[$model]}
  read -r -a msets <<<"${MODEL_SETS[$model]}"
  sets=()
  for kv in "${msets[@]}"; do sets+=(--set "$kv"); done
  for w in "${WORLDS[@]}"; do
    tag="$model W=$w"
    fails_before=$RP_FAILS
    dist=$RP_TMP/$model-w$w
    ref=$RP_TMP/$model-ref$w
    rp_run "$JOB_LIMIT_S" "$dist.out" "$dist" "$job" "${sets[@]}" \
      --set world.procs_per_node="$w" --set data.batch_per_rank="$b" \
      --set comm.bucket_mb=1.3 --set comm.first_bucket_mb=0.3
    dist_ok=1
    rp_expect_ok "$tag: ${w}x$b job" "$dist.out" "$dist" || dist_ok=0
    rp_run "$JOB_LIMIT_S" "$ref.out" "$ref" "$job" "${sets[@]}" \
      --set world.procs_per_node=1 --set data.batch_per_rank=$((w * b))
    ref_ok=1
    rp_expect_ok "$tag: 1x$((w * b)) reference" "$ref.out" "$ref" || ref_ok=0

    # Several buckets, the last one partly filled (caps 0.3 MiB then 1.3 MiB).
    buckets=$(sed -n 's/.* \([0-9][0-9]*\) gradient bucket(s).*/\1/p' "$dist/logs/rank-0.log" 2>/dev/null |
      head -n 1 || true)
    if [[ -n $buckets && $buckets -ge 3 ]]; then
      rp_row "$tag: buckets" "$buckets gradient buckets (>= 3)" PASS
    else
      rp_row "$tag: buckets" "rank-0 log reports '${buckets:-no}' gradient buckets, want >= 3" FAIL
    fi
    if ! ((dist_ok && ref_ok)); then
      RP_QUIET_PASS=0 rp_row "$tag" "jobs failed, no comparison" FAIL
      continue
    fi

    ws=$(rp_json "$dist/summary.json" world_size)
    steps=$(rp_json "$dist/summary.json" steps)
    if [[ $ws == "$w" && $steps == "$STEPS" ]]; then
      rp_row "$tag: summary" "world_size $ws, steps $steps" PASS
    else
      rp_row "$tag: summary" "world_size $ws (want $w), steps $steps (want $STEPS)" FAIL
    fi
    finite=1
    for f in "$dist/summary.json" "$ref/summary.json"; do
      for key in param_norm param_abs_sum final_loss; do
        v=$(rp_json "$f" "$key")
        if ! rp_finite "$v"; then
          rp_row "$tag: finite" "$(basename "$(dirname "$f")")/summary.json $key is $v (diverged?)" FAIL
          finite=0
        fi
      done
    done
    if ! ((finite)); then
      RP_QUIET_PASS=0 rp_row "$tag" "weights not finite, no comparison" FAIL
      continue
    fi
    dn=$(rp_reldiff "$(rp_json "$dist/summary.json" param_norm)" "$(rp_json "$ref/summary.json" param_norm)")
    da=$(rp_reldiff "$(rp_json "$dist/summary.json" param_abs_sum)" \
      "$(rp_json "$ref/summary.json" param_abs_sum)")
    verdict=PASS
    if ! rp_le "$dn" "$TOL" || ! rp_le "$da" "$TOL" || ((RP_FAILS > fails_before)); then
      verdict=FAIL
    fi
    RP_QUIET_PASS=0 rp_row "$tag vs 1x$((w * b))" \
      "${buckets:-?} buckets; rel diff norm $dn, abs_sum $da (tol $TOL)" "$verdict"
  done
done

rp_finish
