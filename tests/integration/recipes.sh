#!/usr/bin/env bash
# Training recipes (docs/recipes.md) end to end on CPU ranks:
#   (a) train.grad_accum_steps: 2 ranks x batch 4 x 2 micro-batches reach the weights of
#       1 rank x batch 16 (bert-tiny, dropout 0, AdamW, 4 steps): relative difference of
#       summary.json's param_norm and param_abs_sum <= 1e-5 (float rounding only).
#   (b) a resumed run continues the schedule exactly: cosine with warm-up, gradient
#       clipping, no decay on biases and norms, 2 micro-batches, dropout on; 6 steps straight
#       vs a run whose rank 1 crashes at step 5 and restarts from the step-4 checkpoint:
#       identical param_sha256; final_lr is the cosine's value at step 6; the progress line
#       shows lr and grad norm; summary.json has a finite grad_norm.
#   (c) the same with CIFAR-format data (Fashion-MNIST images) and train.epochs: steps =
#       batches per epoch / micro-batches, and a mid-epoch crash resumes bit-identically.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/recipes.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init recipes

readonly JOB_LIMIT_S=240 TOL=1e-5

job=$RP_TMP/job.yaml
cat >"$job" <<EOF2
name: it-recipes
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0, preflight: false}
model: {name: bert-tiny, dropout: 0, seq_len: 32}
data: {kind: synthetic, batch_per_rank: 4}
train: {steps: 4, seed: 3, threads_per_rank: 1, log_every_s: 60, optimizer: adamw, lr: 0.001}
checkpoint: {every_steps: 0, keep: 2}
metrics: {enabled: false}
EOF2

# (a) accumulation == one big batch.
acc=$RP_TMP/accum
big=$RP_TMP/big
rp_run "$JOB_LIMIT_S" "$acc.out" "$acc" "$job" --set train.grad_accum_steps=2
acc_ok=1
rp_expect_ok "(a) 2 ranks x 4 x 2 micro-batches" "$acc.out" "$acc" || acc_ok=0
rp_run "$JOB_LIMIT_S" "$big.out" "$big" "$job" --set world.procs_per_node=1 \
  --set data.batch_per_rank=16
big_ok=1
rp_expect_ok "(a) 1 rank x 16" "$big.out" "$big" || big_ok=0
if ((acc_ok && big_ok)); then
  dn=$(rp_reldiff "$(rp_json "$acc/summary.json" param_norm)" "$(rp_json "$big/summary.json" param_norm)")
  da=$(rp_reldiff "$(rp_json "$acc/summary.json" param_abs_sum)" \
    "$(rp_json "$big/summary.json" param_abs_sum)")
  verdict=PASS
  rp_le "$dn" "$TOL" && rp_le "$da" "$TOL" || verdict=FAIL
  rp_row "(a) accumulated vs one batch" "rel diff norm $dn, abs_sum $da (tol $TOL)" "$verdict"
  sps=$(rp_json "$acc/summary.json" samples_per_second)
  accum=$(rp_json "$acc/summary.json" grad_accum_steps)
  rp_check "(a) summary counts micro-batches" "grad_accum_steps $accum, samples_per_second $sps" \
    test "$accum" = 2
fi

# (b) resume continues the schedule exactly.
recipe=(--set model.dropout=0.1 --set data.batch_per_rank=2 --set train.steps=6
  --set train.grad_accum_steps=2 --set train.lr_schedule=cosine --set train.lr_warmup_steps=2
  --set train.lr_min_ratio=0.1 --set train.max_grad_norm=0.5 --set train.weight_decay=0.01
  --set train.decay_norm_and_bias=false --set checkpoint.every_steps=2)
straight=$RP_TMP/straight
rp_run "$JOB_LIMIT_S" "$straight.out" "$straight" "$job" "${recipe[@]}"
s_ok=1
rp_expect_ok "(b) 6 steps straight" "$straight.out" "$straight" || s_ok=0
crashed=$RP_TMP/crashed
rp_run "$JOB_LIMIT_S" "$crashed.out" "$crashed" "$job" "${recipe[@]}" --set launch.max_restarts=1 \
  --set fault.crash_rank=1 --set fault.crash_step=5
c_ok=1
rp_expect_ok "(b) crash at step 5, restart" "$crashed.out" "$crashed" || c_ok=0
if ((s_ok && c_ok)); then
  a=$(rp_json "$straight/summary.json" param_sha256)
  b=$(rp_json "$crashed/summary.json" param_sha256)
  from=$(rp_json "$crashed/summary.json" resumed_from_step)
  if [[ $a == "$b" && $from == 4 ]]; then
    rp_row "(b) resumed == straight" "resumed from step $from, param_sha256 ${a:0:16}... equal" PASS
  else
    rp_row "(b) resumed == straight" "resumed from $from; ${b:0:16}... vs ${a:0:16}..." FAIL
  fi
  # Step 6 is index 5: p = (5 - 2) / (6 - 2).
  want=$(python3 -c 'import math; p=3/4; print(0.001*(0.1+0.9*0.5*(1+math.cos(math.pi*p))))')
  got=$(rp_json "$crashed/summary.json" final_lr)
  d=$(rp_reldiff "$got" "$want")
  verdict=PASS
  rp_le "$d" 1e-12 || verdict=FAIL
  rp_row "(b) final_lr" "$got (cosine: $want)" "$verdict"
  norm=$(rp_json "$straight/summary.json" grad_norm)
  verdict=FAIL
  rp_finite "$norm" && verdict=PASS
  rp_row "(b) grad_norm in summary" "$norm" "$verdict"
  line=$(grep -m 1 ' | lr ' "$straight/logs/rank-0.log" || true)
  verdict=FAIL
  [[ $line == *"| grad norm "* ]] && verdict=PASS
  line=${line#* step }
  rp_row "(b) progress line" "${line//|/;}" "$verdict"
fi

# (c) a dataset with train.epochs and micro-batches: 200 images, 2 ranks x 4 = 8 per
# sampler step, 25 per epoch; 2 micro-batches make 12 optimizer steps. A crash mid-epoch
# (step 7, checkpoint at 6) resumes at the sampler position of step 7's first micro-batch.
data=$RP_TMP/fashion
python3 "$(dirname "${BASH_SOURCE[0]}")/../data/make_cifar_fashion.py" "$data" --train 200 \
  --test 40 >&2
cifar=(--set model.name=resnet18-cifar --set data.kind=cifar
  --set "data.train=\"$data\"" --set "data.val=\"$data\"" --set train.epochs=1
  --set train.optimizer=sgd --set train.lr=0.05 --set train.grad_accum_steps=2
  --set train.lr_schedule=cosine --set train.lr_warmup_steps=3 --set train.max_grad_norm=2
  --set checkpoint.every_steps=3)
c_straight=$RP_TMP/cifar-straight
rp_run "$JOB_LIMIT_S" "$c_straight.out" "$c_straight" "$job" "${cifar[@]}"
cs_ok=1
rp_expect_ok "(c) cifar, 1 epoch straight" "$c_straight.out" "$c_straight" || cs_ok=0
c_crashed=$RP_TMP/cifar-crashed
rp_run "$JOB_LIMIT_S" "$c_crashed.out" "$c_crashed" "$job" "${cifar[@]}" \
  --set launch.max_restarts=1 --set fault.crash_rank=1 --set fault.crash_step=7
cc_ok=1
rp_expect_ok "(c) cifar, crash at step 7" "$c_crashed.out" "$c_crashed" || cc_ok=0
if ((cs_ok && cc_ok)); then
  steps=$(rp_json "$c_straight/summary.json" steps)
  epochs=$(rp_json "$c_straight/summary.json" epochs)
  rp_check "(c) epochs to optimizer steps" "steps $steps (want 12), epochs $epochs (want 1)" \
    test "$steps/$epochs" = 12/1
  a=$(rp_json "$c_straight/summary.json" param_sha256)
  b=$(rp_json "$c_crashed/summary.json" param_sha256)
  from=$(rp_json "$c_crashed/summary.json" resumed_from_step)
  if [[ $a == "$b" && $from == 6 ]]; then
    rp_row "(c) resumed == straight" "resumed from step $from, param_sha256 ${a:0:16}... equal" PASS
  else
    rp_row "(c) resumed == straight" "resumed from $from; ${b:0:16}... vs ${a:0:16}..." FAIL
  fi
fi

rp_finish
