#!/usr/bin/env bash
# Every shipped example (examples/*.yaml) runs on this CPU-only host, as shipped but pointed
# at small real data and cut to a few steps, so that an example can no longer go stale:
#   - the data: Fashion-MNIST (Debian dataset-fashion-mnist) in the CIFAR-10 binary layout
#     and as a folder of JPEGs in ImageNet's class-folder layout; English text (the licence
#     texts Debian installs) through spm_train and `ringpilot data tokenize`;
#   - what an example may be changed in: data.train/val, world.procs_per_node, batch sizes,
#     train.epochs (and train.steps for synthetic data), model.seq_len, the metrics ports
#     (free ones), launch.max_restarts 0; never its recipe (optimizer, schedule, warm-up,
#     lr scaling, precision, CUDA graphs);
#   - the GPU recipes (world.device auto, cuda_graphs, bf16) say in one line that the CPU
#     ranks run without CUDA graphs and bf16, and train;
#   - the recipes are what the files say: ResNet-50's learning rate is 0.1 x global
#     batch / 256 with a 5-epoch warm-up then cosine (summary.json final_lr and the rank-0
#     log), ResNet-18's the same rule with 2 epochs, BERT's warm-up then linear decay;
#   - no example keeps a stale "not implemented" note;
#   - BERT's export loads in transformers: AutoTokenizer (tokenizer.json converted from the
#     SentencePiece model) encodes the held-out text to exactly the shard's ids, the special
#     tokens have the shards' ids (config.json pad_token_id too), and BertForMaskedLM fills
#     a [MASK];
#   - `ringpilot data tokenize` takes a Hugging Face WordPiece vocab.txt and a tokenizer.json
#     (trained here with the `tokenizers` library): the shard holds the library's ids.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/examples.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init examples

readonly JOB_LIMIT_S=300
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
examples=$RINGPILOT_SOURCE_DIR/examples
PYTHON=${RINGPILOT_TORCH_PYTHON:-${RINGPILOT_VENV:-$RINGPILOT_SOURCE_DIR/.venv}/bin/python}
"$PYTHON" -c 'import torch, transformers, tokenizers, PIL' 2>/dev/null ||
  rp_die "$PYTHON lacks torch/transformers/tokenizers/PIL (scripts/setup.sh installs them)"
command -v spm_train >/dev/null || rp_die "spm_train not found (Debian sentencepiece)"
# The user program example runs `python3` with torch, as its job file says.
PATH="$(dirname "$PYTHON"):$PATH"
export PATH

# ---- data ---------------------------------------------------------------------------------
cifar=$RP_TMP/cifar-10-batches-bin
python3 "$here/../data/make_cifar_fashion.py" "$cifar" --train 64 --test 64 >&2
# ImageNet's layout: train/<wnid>/<name>.JPEG, val/ in the same class folders; 96x96 RGB
# JPEGs of Fashion-MNIST images (RandomResizedCrop makes 224x224 crops of them).
imagenet=$RP_TMP/imagenet
"$PYTHON" - "$imagenet" <<'PY'
import gzip, os, struct, sys
import numpy as np
from PIL import Image
out, src = sys.argv[1], "/usr/share/datasets/fashion-mnist"
def idx(name):
    with gzip.open(os.path.join(src, name)) as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)
# Every class in both sets (class indices follow the sorted folder names of each set).
for split, prefix, per_class in (("train", "train", 1), ("val", "t10k", 1)):
    images, labels = idx(prefix + "-images-idx3-ubyte.gz"), idx(prefix + "-labels-idx1-ubyte.gz")
    chosen = [i for c in range(10) for i in np.flatnonzero(labels == c)[:per_class]]
    for i in chosen:
        folder = os.path.join(out, split, "n%08d" % labels[i])
        os.makedirs(folder, exist_ok=True)
        img = Image.fromarray(images[i]).convert("RGB").resize((96, 96), Image.BILINEAR)
        img.save(os.path.join(folder, "%s_%05d.JPEG" % (split, i)), quality=90)
print("imagenet-like folder:", out)
PY
# Text: unique paragraphs of the licence texts; spm_train on all of them, a small part
# (a few BERT-base steps) tokenised for training and validation.
python3 "$here/../data/make_licence_text.py" "$RP_TMP" --corpus --train-chars 8000 --val-chars 2500
spm_train --input="$RP_TMP/corpus.txt" --model_prefix="$RP_TMP/spm" --vocab_size=1000 \
  --model_type=unigram --control_symbols='[CLS],[SEP],[MASK],[PAD]' --minloglevel=2 >&2
shards=$RP_TMP/shards
mkdir -p "$shards"
for split in train val; do
  "$RINGPILOT" data tokenize --model "$RP_TMP/spm.model" --out "$shards/$split" \
    "$RP_TMP/$split.txt" >"$RP_TMP/tokenize-$split.out" 2>&1 ||
    rp_die "data tokenize $split: $(tail -n 1 "$RP_TMP/tokenize-$split.out")"
done
if [[ -s $shards/train.tokenizer.json ]] && grep -q "; tokenizer " "$RP_TMP/tokenize-train.out"; then
  rp_row "tokenize (SentencePiece)" "$(cut -c1-160 "$RP_TMP/tokenize-train.out")" PASS
else
  rp_row "tokenize (SentencePiece)" "no train.tokenizer.json: $(tail -n 1 "$RP_TMP/tokenize-train.out")" FAIL
fi

# ---- the examples -------------------------------------------------------------------------
# Every example must have a case here: a new one without data to run on fails the test.
declare -A CASES=(
  [quickstart]=1 [ddp-fashion-mnist]=1 [resnet18-cifar10]=1 [resnet50-imagenet]=1
  [bert-base-mlm]=1
)
for f in "$examples"/*.yaml; do
  name=$(basename "$f" .yaml)
  [[ -n ${CASES[$name]:-} ]] || rp_row "example $name" "no case in examples.sh: add its data" FAIL
done
if stale=$(grep -l -i "not implemented" "$examples"/*.yaml "$examples"/*.py); then
  rp_row "no stale notes" "\"not implemented\" in $stale" FAIL
else
  rp_row "no stale notes" "no example says a feature is not implemented" PASS
fi

ports=$(rp_free_ports 2)
common=(--set launch.max_restarts=0)
notice="world.device auto: no GPU visible on"

# run_in_repo NAME [--set ...]: `ringpilot run examples/NAME.yaml` from the repository root
# (the user program's path is relative), into $RP_TMP/NAME, output $RP_TMP/NAME.out; RP_RC
# is its exit status.
run_in_repo() {
  local name=$1 t0=$SECONDS
  shift
  RP_RC=0
  (cd "$RINGPILOT_SOURCE_DIR" && exec timeout -k 20 "$JOB_LIMIT_S" "$RINGPILOT" run \
    "examples/$name.yaml" --run-dir "$RP_TMP/$name" "${common[@]}" "$@") \
    >"$RP_TMP/$name.out" 2>&1 || RP_RC=$?
  rp_log "$name -> exit $RP_RC ($((SECONDS - t0)) s)"
}

# approx A B: |A - B| <= 1e-9 x max(|B|, 1e-12)
approx() { python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-9 * max(abs(b), 1e-12))' "$1" "$2"; }

# expect_example NAME CHECK_DETAIL: exit 0 and summary.json (trainer jobs).
expect_example() {
  local name=$1
  if [[ $RP_RC -eq 0 && -s $RP_TMP/$name/summary.json ]]; then
    rp_row "$name" "exit 0, $(rp_json "$RP_TMP/$name/summary.json" steps) steps, final_loss $(rp_json "$RP_TMP/$name/summary.json" final_loss)" PASS
    return 0
  fi
  rp_row "$name" "exit $RP_RC: $(grep -m 1 -h FATAL "$RP_TMP/$name"/logs/rank-*.log 2>/dev/null | cut -c1-200 || tail -n 1 "$RP_TMP/$name.out")" FAIL
  rp_tail "$RP_TMP/$name.out"
  return 1
}

expect_notice() {  # NAME: the one-line notice of a GPU recipe on CPU ranks
  local line
  line=$(grep -m 1 "$notice" "$RP_TMP/$1.out" || true)
  if [[ $line == *"train.cuda_graphs off and train.precision fp32 instead of bf16"* ]]; then
    rp_row "$1: GPU settings on CPU" "${line#*ringpilot: }" PASS
  else
    rp_row "$1: GPU settings on CPU" "no notice line in the run's output" FAIL
  fi
}

# quickstart: synthetic images, as shipped but 6 steps.
run_in_repo quickstart --set train.steps=6 --set "metrics.port_base=$ports"
expect_example quickstart || true

# The user's program: 20 steps on 2000 Fashion-MNIST images.
run_in_repo ddp-fashion-mnist --set "metrics.port_base=$ports" \
  --set 'launch.command=[python3, examples/ddp_fashion_mnist.py, --steps, "20", --lr, "0.05", --train-samples, "2000", --test-samples, "500"]'
rc=$RP_RC
acc=$(rp_json "$RP_TMP/ddp-fashion-mnist/result.json" test_accuracy)
if [[ $rc -eq 0 ]] && rp_finite "$acc"; then
  rp_row "ddp-fashion-mnist" "exit 0, the program's result.json: test_accuracy $acc after 20 steps" PASS
else
  rp_row "ddp-fashion-mnist" "exit $rc, result.json test_accuracy $acc" FAIL
  rp_tail "$RP_TMP/ddp-fashion-mnist.out"
fi

# resnet18-cifar10 (2 warm-up epochs as shipped) on 64 images: 2 ranks x 16, 2 steps per
# epoch, 3 epochs: 6 steps.
run_in_repo resnet18-cifar10 --set "data.train=\"$cifar\"" --set "data.val=\"$cifar\"" \
  --set data.batch_per_rank=16 --set eval.batch_per_rank=32 --set train.epochs=3
if expect_example resnet18-cifar10; then
  expect_notice resnet18-cifar10
  # 6 steps, warm-up 4: the last step (index 5) is cosine's p = 1/2 of 0.1 x 32 / 256.
  want=$(python3 -c 'import math; print(0.1*32/256*0.5*(1+math.cos(math.pi*1/2)))')
  got=$(rp_json "$RP_TMP/resnet18-cifar10/summary.json" final_lr)
  steps=$(rp_json "$RP_TMP/resnet18-cifar10/summary.json" steps)
  if [[ $steps == 6 ]] && approx "$got" "$want" &&
    grep -q "warm-up 4 steps" "$RP_TMP/resnet18-cifar10/logs/rank-0.log"; then
    rp_row "resnet18-cifar10: recipe" "6 steps, warm-up 4 (2 epochs), final_lr $got = cosine of 0.1 x 32/256" PASS
  else
    rp_row "resnet18-cifar10: recipe" "steps $steps, final_lr $got, want $want after a 4-step warm-up" FAIL
  fi
  top1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["eval"]["top1"])' \
    "$RP_TMP/resnet18-cifar10/summary.json" 2>/dev/null || echo missing)
  rp_check "resnet18-cifar10: evaluation" "top1 $top1 on 64 held-out images" rp_finite "$top1"
fi

# resnet50-imagenet: 2 ranks x 2 JPEGs, 10 training images: 2 steps per epoch; 6 epochs
# (the warm-up is 5): 12 steps, the last one on the cosine.
run_in_repo resnet50-imagenet --set world.procs_per_node=2 \
  --set "data.train=\"$imagenet/train\"" --set "data.val=\"$imagenet/val\"" \
  --set data.batch_per_rank=2 --set eval.batch_per_rank=4 --set train.epochs=6
if expect_example resnet50-imagenet; then
  expect_notice resnet50-imagenet
  log=$RP_TMP/resnet50-imagenet/logs/rank-0.log
  # 12 steps, warm-up 10; the last (index 11) is cosine's p = 1/2 of 0.1 x 4 / 256.
  want=$(python3 -c 'import math; print(0.1*4/256*0.5*(1+math.cos(math.pi*1/2)))')
  got=$(rp_json "$RP_TMP/resnet50-imagenet/summary.json" final_lr)
  if grep -q "learning rate 0.0015625: train.lr 0.1 x global batch 4 / train.lr_base_batch 256" "$log" &&
    grep -q "2 batches per epoch, 12 steps, warm-up 10 steps" "$log" && approx "$got" "$want"; then
    rp_row "resnet50-imagenet: recipe" "lr 0.1 x 4/256, warm-up 10 steps (5 epochs), final_lr $got (cosine)" PASS
  else
    rp_row "resnet50-imagenet: recipe" "final_lr $got (want $want); log: $(grep -m 2 -h 'learning rate\|batches per epoch' "$log" | tr '\n' ' ')" FAIL
  fi
fi

# bert-base-mlm: seq_len 64, 2 ranks x 2 sequences, one epoch of the small text.
run_in_repo bert-base-mlm --set "data.train=\"$shards/train\"" --set "data.val=\"$shards/val\"" \
  --set model.seq_len=64 --set data.batch_per_rank=2 --set eval.batch_per_rank=8
bert_ok=0
if expect_example bert-base-mlm; then
  bert_ok=1
  expect_notice bert-base-mlm
  # Polynomial power 1 after the warm-up: final_lr = 1e-4 x (1 - p), p = (T-1-W)/(T-W).
  read -r steps warm <<<"$(grep -o '[0-9]* steps, warm-up [0-9]*' "$RP_TMP/bert-base-mlm/logs/rank-0.log" |
    head -n 1 | awk '{print $1, $4}')"
  got=$(rp_json "$RP_TMP/bert-base-mlm/summary.json" final_lr)
  want=$(python3 -c 'import sys; T, W = int(sys.argv[1]), int(sys.argv[2]); print(1e-4*(1-(T-1-W)/(T-W)))' \
    "${steps:-0}" "${warm:-0}" 2>/dev/null || echo nan)
  if [[ -n ${warm:-} ]] && approx "$got" "$want"; then
    rp_row "bert-base-mlm: recipe" "$steps steps, warm-up $warm, final_lr $got (linear decay)" PASS
  else
    rp_row "bert-base-mlm: recipe" "steps ${steps:-?}, warm-up ${warm:-?}, final_lr $got, want $want" FAIL
  fi
fi

# ---- BERT's export in transformers ------------------------------------------------------------
if ((bert_ok)); then
  if "$RINGPILOT" export "$RP_TMP/bert-base-mlm" >"$RP_TMP/export.out" 2>&1 &&
    grep -q "^tokenizer .*tokenizer.json" "$RP_TMP/export.out"; then
    folder=$(dirname "$(grep '^weights' "$RP_TMP/export.out" | awk '{print $2}')")
    if result=$("$PYTHON" "$here/export_tokenizer_check.py" "$folder" "$shards/val" \
      "$RP_TMP/val.txt" 2>&1); then
      rp_row "bert export: AutoTokenizer + BertForMaskedLM" "$(tail -n 1 <<<"$result")" PASS
    else
      rp_row "bert export: AutoTokenizer + BertForMaskedLM" "$(tail -n 3 <<<"$result" | tr '\n' ' ')" FAIL
    fi
  else
    rp_row "bert export" "$(tail -n 2 "$RP_TMP/export.out" | tr '\n' ' ')" FAIL
  fi
fi

# ---- Hugging Face vocabularies for `data tokenize` ------------------------------------------
"$PYTHON" - "$RP_TMP" <<'PY'
import os, sys
from tokenizers import BertWordPieceTokenizer
out = sys.argv[1]
wp = BertWordPieceTokenizer(lowercase=True)
wp.train([os.path.join(out, "corpus.txt")], vocab_size=800, show_progress=False,
         special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
os.makedirs(os.path.join(out, "wordpiece"), exist_ok=True)
wp.save_model(os.path.join(out, "wordpiece"))  # vocab.txt
wp.save(os.path.join(out, "wordpiece", "tokenizer.json"))
PY
for vocab in vocab.txt tokenizer.json; do
  prefix=$RP_TMP/wp-${vocab%%.*}
  if "$RINGPILOT" data tokenize --model "$RP_TMP/wordpiece/$vocab" --out "$prefix" \
    "$RP_TMP/val.txt" >"$prefix.out" 2>&1 &&
    result=$("$PYTHON" "$here/export_tokenizer_check.py" --shard-only "$RP_TMP/wordpiece/$vocab" \
      "$prefix" "$RP_TMP/val.txt" 2>&1); then
    rp_row "tokenize with a WordPiece $vocab" "$(tail -n 1 <<<"$result")" PASS
  else
    rp_row "tokenize with a WordPiece $vocab" "$(tail -n 2 "$prefix.out" | tr '\n' ' ') ${result:-}" FAIL
  fi
done

rp_finish
