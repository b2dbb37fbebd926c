#!/usr/bin/env bash
# data.kind cifar on real images: Fashion-MNIST (Debian dataset-fashion-mnist; photos of
# 10 kinds of garment) written in the CIFAR-10 layout. 2 CPU ranks train resnet18-cifar:
#   (a) 2000 training and 1000 held-out images, batch 32 per rank (31 steps per epoch),
#       train.epochs 2 (62 steps, cosine learning rate after 6 warm-up steps): held-out
#       top-1 of the final evaluation >= 0.55 (chance 0.10; 0.653 seen), summary.json
#       `steps`, `eval` and `epochs`, the rank-0 log's eval line.
#   (b) a small copy of that job (256 training, 200 held-out images, batch 8 per rank:
#       16 steps per epoch, 2 epochs), straight and with rank 1 crashing at step 24
#       (mid-epoch 2, checkpoints every 10 steps, launch.max_restarts 1): the crashed run
#       resumes at step 20 and ends with the straight run's param_sha256 and eval result,
#       bit for bit (the epoch sampler's position comes back from the checkpoint).
#   (c) a truncated training file: exit non-zero and a one-line error naming the file, in
#       the rank log's FATAL line.
# The sizes keep this test to a few minutes on 2 cores (CPU ResNet-18 steps of batch 32
# take ~2.7 s there).
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/cifar_learning.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init cifar_learning

readonly JOB_LIMIT_S=600
readonly MIN_TOP1=0.55
data=$RP_TMP/fashion
small=$RP_TMP/fashion-small
make_set() { python3 "$(dirname "${BASH_SOURCE[0]}")/../data/make_cifar_fashion.py" "$@" >&2; }
make_set "$data" --train 2000 --test 1000
make_set "$small" --train 256 --test 200

job=$RP_TMP/job.yaml
cat >"$job" <<YAML
name: it-cifar
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: resnet18-cifar, num_classes: 10}
data: {kind: cifar, batch_per_rank: 32, train: "$data", val: "$data"}
train: {epochs: 2, optimizer: sgd, lr: 0.05, momentum: 0.9, weight_decay: 5.0e-4, seed: 3,
        lr_schedule: cosine, lr_warmup_steps: 6, threads_per_rank: 1, log_every_s: 30}
eval: {every_steps: 0, batch_per_rank: 100}
checkpoint: {every_steps: 0, keep: 1}
metrics: {enabled: false}
YAML

eval_of() {  # dir key
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval"][sys.argv[2]])' \
    "$1/summary.json" "$2" 2>/dev/null || echo missing
}
at_least() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }

a=$RP_TMP/straight
rp_run "$JOB_LIMIT_S" "$a.out" "$a" "$job"
top1=missing
if rp_expect_ok "(a) 2 epochs on real images" "$a.out" "$a"; then
  top1=$(eval_of "$a" top1)
  samples=$(eval_of "$a" samples)
  if at_least "$top1" "$MIN_TOP1" && [[ $samples == 1000 ]]; then
    rp_row "(a) held-out top-1" "$top1 on $samples images (>= $MIN_TOP1; chance 0.10)" PASS
  else
    rp_row "(a) held-out top-1" "$top1 on $samples images (want >= $MIN_TOP1 on 1000)" FAIL
  fi
  epochs=$(rp_json "$a/summary.json" epochs)
  steps=$(rp_json "$a/summary.json" steps)
  rp_check "(a) 2 epochs = 62 steps" "epochs $epochs, steps $steps" test "$epochs/$steps" = 2/62
  if grep -q "eval after step 62 (epoch 2): top1" "$a/logs/rank-0.log"; then
    rp_row "(a) eval line in the rank-0 log" "found" PASS
  else
    rp_row "(a) eval line in the rank-0 log" "missing" FAIL
  fi
fi

# (b) the small job, straight and crashed.
small_sets=(--set "data.train=\"$small\"" --set "data.val=\"$small\"" --set data.batch_per_rank=8
  --set checkpoint.every_steps=10 --set checkpoint.keep=3 --set train.lr_warmup_steps=4)
s=$RP_TMP/small-straight
rp_run "$JOB_LIMIT_S" "$s.out" "$s" "$job" "${small_sets[@]}"
b=$RP_TMP/small-crashed
rp_run "$JOB_LIMIT_S" "$b.out" "$b" "$job" "${small_sets[@]}" --set fault.crash_rank=1 \
  --set fault.crash_step=24 --set launch.max_restarts=1
if rp_expect_ok "(b) small job, straight" "$s.out" "$s" &&
  rp_expect_ok "(b) small job, crash at step 24, one restart" "$b.out" "$b"; then
  steps=$(rp_json "$s/summary.json" steps)
  rp_check "(b) 2 epochs of 256 images = 32 steps" "steps $steps" test "$steps" = 32
  resumed=$(rp_json "$b/summary.json" resumed_from_step)
  rp_check "(b) resumed mid-epoch 2" "resumed_from_step $resumed" test "$resumed" = 20
  sha_s=$(rp_json "$s/summary.json" param_sha256)
  sha_b=$(rp_json "$b/summary.json" param_sha256)
  if [[ $sha_s != missing && $sha_s == "$sha_b" ]]; then
    rp_row "(b) weights == straight run" "param_sha256 ${sha_b:0:16}..." PASS
  else
    rp_row "(b) weights == straight run" "$sha_b vs $sha_s" FAIL
  fi
  top1_s=$(eval_of "$s" top1)
  top1_b=$(eval_of "$b" top1)
  rp_check "(b) eval == straight run" "top1 $top1_b" test "$top1_b" = "$top1_s"
fi

c=$RP_TMP/truncated
mkdir -p "$RP_TMP/bad"
head -c 100000 "$data/data_batch_fashion.bin" >"$RP_TMP/bad/data_batch_1.bin"
rp_run "$JOB_LIMIT_S" "$c.out" "$c" "$job" --set "data.train=\"$RP_TMP/bad\"" \
  --set train.epochs=0 --set train.steps=5 --set train.lr_warmup_steps=0
fatal=$(grep -h "FATAL" "$c"/logs/rank-*.log 2>/dev/null | head -1 || true)
if [[ $RP_RC -ne 0 && $fatal == *"$RP_TMP/bad/data_batch_1.bin: 100000 bytes is not a whole number"* ]]; then
  rp_row "(c) truncated data file" "exit $RP_RC, FATAL names the file" PASS
else
  rp_row "(c) truncated data file" "exit $RP_RC, FATAL: ${fatal:-none}" FAIL
  rp_tail "$c.out"
fi

rp_finish
