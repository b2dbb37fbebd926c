#!/usr/bin/env bash
# data.kind tokens on real English text: the licence texts Debian installs in
# /usr/share/common-licenses, split into unique paragraphs (documents), every tenth held out.
# spm_train (Debian sentencepiece) trains a 1000-piece unigram model with BERT's control
# symbols, `ringpilot data tokenize` writes the training and validation shards, and 2 CPU
# ranks train bert-tiny MLM (seq_len 64, batch 16 per rank, masking on the "device"):
#   (a) train.epochs 20 (460 steps): the final held-out MLM loss is below the unigram entropy of the
#       training shard's tokens (in nats, computed here from its token counts: the loss of
#       the best context-free guess), summary.json `eval: {mlm_accuracy, loss, samples}`,
#       the rank-0 log's eval line.
#   (b) the same job with rank 1 crashing mid-epoch (checkpoints every 40 steps,
#       launch.max_restarts 1): resumes at the last checkpoint and ends with the straight
#       run's param_sha256 and eval result, bit for bit.
#   (c) a truncated token file: exit non-zero and a one-line error naming the file in the
#       rank log's FATAL line; (d) model.vocab_size below the shards' vocabulary: the same.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/tokens_learning.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init tokens_learning

readonly JOB_LIMIT_S=600
command -v spm_train >/dev/null || rp_die "spm_train not found (Debian sentencepiece; scripts/setup.sh)"

# Unique paragraphs of the licence texts; every tenth one held out for validation.
python3 "$(dirname "${BASH_SOURCE[0]}")/../data/make_licence_text.py" "$RP_TMP" --hold-out-every 10
spm_train --input="$RP_TMP/train.txt" --model_prefix="$RP_TMP/spm" --vocab_size=1000 \
  --model_type=unigram --control_symbols='[CLS],[SEP],[MASK],[PAD]' --minloglevel=1 >&2
"$RINGPILOT" data tokenize --model "$RP_TMP/spm.model" --out "$RP_TMP/train" "$RP_TMP/train.txt" >&2
"$RINGPILOT" data tokenize --model "$RP_TMP/spm.model" --out "$RP_TMP/val" "$RP_TMP/val.txt" >&2

# Unigram entropy (nats) of the training shard's tokens: -sum p ln p over its ids.
entropy=$(python3 - "$RP_TMP/train.tokens" <<'PY'
import collections, math, struct, sys
data = open(sys.argv[1], "rb").read()
width, = struct.unpack_from("<I", data, 12)
n, = struct.unpack_from("<Q", data, 40)
ids = struct.unpack_from("<%d%s" % (n, "H" if width == 2 else "I"), data, 64)
counts = collections.Counter(ids)
print("%.4f" % -sum(c / n * math.log(c / n) for c in counts.values()))
PY
)
rp_log "training shard unigram entropy: $entropy nats"

job=$RP_TMP/job.yaml
cat >"$job" <<YAML
name: it-tokens
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 0}
model: {name: bert-tiny, seq_len: 64, dropout: 0.0}
data: {kind: tokens, batch_per_rank: 16, train: "$RP_TMP/train", val: "$RP_TMP/val"}
train: {epochs: 20, optimizer: adamw, lr: 1.0e-3, beta2: 0.98, weight_decay: 0.01, seed: 5,
        threads_per_rank: 1, log_every_s: 30}
eval: {every_steps: 0, batch_per_rank: 64}
checkpoint: {every_steps: 40, keep: 3}
metrics: {enabled: false}
YAML

eval_of() {  # dir key
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval"][sys.argv[2]])' \
    "$1/summary.json" "$2" 2>/dev/null || echo missing
}
below() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }

a=$RP_TMP/straight
rp_run "$JOB_LIMIT_S" "$a.out" "$a" "$job"
loss=missing acc=missing steps=0
if rp_expect_ok "(a) bert-tiny MLM on real text" "$a.out" "$a"; then
  loss=$(eval_of "$a" loss)
  acc=$(eval_of "$a" mlm_accuracy)
  samples=$(eval_of "$a" samples)
  steps=$(rp_json "$a/summary.json" steps)
  if below "$loss" "$entropy"; then
    rp_row "(a) held-out MLM loss < unigram entropy" \
      "loss $loss < $entropy nats (accuracy $acc, $samples sequences, $steps steps)" PASS
  else
    rp_row "(a) held-out MLM loss < unigram entropy" "loss $loss, entropy $entropy nats" FAIL
  fi
  if grep -q "eval after step $steps (epoch 20): mlm_accuracy" "$a/logs/rank-0.log"; then
    rp_row "(a) eval line in the rank-0 log" "found" PASS
  else
    rp_row "(a) eval line in the rank-0 log" "missing" FAIL
  fi
fi

# Crash in the middle of an epoch, between two checkpoints.
crash=$((steps * 6 / 10 / 40 * 40 + 27))
b=$RP_TMP/crashed
rp_run "$JOB_LIMIT_S" "$b.out" "$b" "$job" --set fault.crash_rank=1 --set "fault.crash_step=$crash" \
  --set launch.max_restarts=1
if rp_expect_ok "(b) crash at step $crash, one restart" "$b.out" "$b"; then
  resumed=$(rp_json "$b/summary.json" resumed_from_step)
  rp_check "(b) resumed from the last checkpoint" "resumed_from_step $resumed" \
    test "$resumed" = $((crash / 40 * 40))
  sha_a=$(rp_json "$a/summary.json" param_sha256)
  sha_b=$(rp_json "$b/summary.json" param_sha256)
  if [[ $sha_a != missing && $sha_a == "$sha_b" ]]; then
    rp_row "(b) weights == straight run" "param_sha256 ${sha_b:0:16}..." PASS
  else
    rp_row "(b) weights == straight run" "$sha_b vs $sha_a" FAIL
  fi
  loss_b=$(eval_of "$b" loss)
  rp_check "(b) eval == straight run" "loss $loss_b" test "$loss_b" = "$loss"
fi

c=$RP_TMP/truncated
head -c 1001 "$RP_TMP/train.tokens" >"$RP_TMP/bad.tokens"
cp "$RP_TMP/train.index" "$RP_TMP/bad.index"
rp_run "$JOB_LIMIT_S" "$c.out" "$c" "$job" --set "data.train=\"$RP_TMP/bad\"" \
  --set train.epochs=0 --set train.steps=5
fatal=$(grep -h "FATAL" "$c"/logs/rank-*.log 2>/dev/null | head -1 || true)
if [[ $RP_RC -ne 0 && $fatal == *"$RP_TMP/bad.tokens: 1001 bytes"*"truncated"* && ! -e $c/checkpoints/step-00000001 ]]; then
  rp_row "(c) truncated token file" "exit $RP_RC, FATAL names the file" PASS
else
  rp_row "(c) truncated token file" "exit $RP_RC, FATAL: ${fatal:-none}" FAIL
  rp_tail "$c.out"
fi

d=$RP_TMP/small-vocab
rp_run "$JOB_LIMIT_S" "$d.out" "$d" "$job" --set model.vocab_size=999 --set train.epochs=0 \
  --set train.steps=5
fatal=$(grep -h "FATAL" "$d"/logs/rank-*.log 2>/dev/null | head -1 || true)
if [[ $RP_RC -ne 0 && $fatal == *"$RP_TMP/train.tokens: model.vocab_size 999 is smaller"* ]]; then
  rp_row "(d) model.vocab_size below the shards'" "exit $RP_RC, FATAL names the file" PASS
else
  rp_row "(d) model.vocab_size below the shards'" "exit $RP_RC, FATAL: ${fatal:-none}" FAIL
  rp_tail "$d.out"
fi

rp_finish
