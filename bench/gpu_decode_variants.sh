#!/usr/bin/env bash
# GPU image decode variants on one GPU, in one call (issue 33). Each part has its own time
# limit and appends its rows to OUT_DIR/rows.jsonl as it ends, so a call cut short keeps
# what ran:
#   1. facts (GPU, driver, versions, cores, the carried build's commit);
#   2. the GPU pipeline's unit test (data_cuda_image_pipeline_test: every JPEG kind, the
#      host share equal to the CPU loader's samples, bad files counted);
#   3. ResNet-50 bf16 b256 with CUDA graphs (tests/gpu/bench_train.sh): synthetic, then each
#      variant of RP_VARIANTS, one per line, "NAME SET DATA-KEYS" where SET is natural or
#      imagenet (bench/make_natural_jpegs.py, 6,000 files; imagenet = --imagenet-like), or
#      SET:SIDE:QUALITY for its shards transcoded by `ringpilot data pack --max-side SIDE
#      --quality QUALITY` (what SHARDS then stands for), and
#      DATA-KEYS more data keys (FOLDER and SHARDS stand for the set's paths); SET - is
#      synthetic data; leading RP_NAME=VALUE words set tests/gpu/bench_train.sh's variables
#      for that variant (e.g. RP_HOST_LEAD=2); each row carries the rank's input lines
#      (decoder, time per batch);
#   4. with RP_PEER=1, the peer (ImageFolder + DataLoader on all cores + PIL) on each folder
#      of RP_PEER_SETS (default: imagenet).
#   bench/gpu_decode_variants.sh OUT_DIR
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=${1:?OUT_DIR}
mkdir -p "$out"
rows="$out/rows.jsonl"
: >>"$rows"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh" || exit 1
sets=${RP_IMAGE_SETS:-/tmp/rp-sets}
variants=${RP_VARIANTS:-"imagenet-folder-gpu imagenet kind: image_folder, train: FOLDER, gpu_decode: true
imagenet-folder-host imagenet kind: image_folder, train: FOLDER, gpu_decode: false
natural-folder-gpu natural kind: image_folder, train: FOLDER, gpu_decode: true
natural-folder-host natural kind: image_folder, train: FOLDER, gpu_decode: false"}
gpu_facts "$out/facts.txt"

make_set() {  # NAME [MAX_SIDE QUALITY]: SHARDS_DIR = its shards (transcoded with a side)
  local name=$1 extra=() pack=()
  SHARDS_DIR=$sets/$name/shards
  if (($# == 3)); then
    SHARDS_DIR=$sets/$name/shards-side$2-q$3
    pack=(--max-side "$2" --quality "$3")
  fi
  [[ $name == imagenet ]] && extra=(--imagenet-like)
  [[ -d $sets/$name/train ]] || python3 "$HERE/bench/make_natural_jpegs.py" "$sets/$name/train" \
    --classes 100 --per-class 60 "${extra[@]}" >>"$out/sets.log" 2>&1
  if [[ ! -d $SHARDS_DIR ]]; then
    "$RP" data pack "$sets/$name/train" "$SHARDS_DIR" "${pack[@]}" >>"$out/sets.log" 2>&1
    echo "$SHARDS_DIR: $(du -sb "$SHARDS_DIR" | cut -f1) bytes" >>"$out/sets.log"
  fi
}
SECONDS=0
kinds="$sets/kinds"
[[ -d $kinds ]] || python3 "$HERE/tests/data/make_jpeg_kinds.py" "$kinds" --bad >>"$out/sets.log" 2>&1
test_rc=0
RINGPILOT_JPEG_KINDS="$kinds" RINGPILOT_SOURCE_DIR="$HERE" timeout 90 \
  "$(gpu_test_binary data_cuda_image_pipeline_test)" >"$out/unit.log" 2>&1 || test_rc=$?
echo "{\"what\": \"data_cuda_image_pipeline_test\", \"rc\": $test_rc}" >>"$rows"
grep -E "^\[ (kinds|share)|FAILED|PASSED" "$out/unit.log"

train() {  # VARIANT [data keys [RP_NAME=VALUE...]]
  local variant=$1
  if (($# > 1)) && [[ -n $2 ]]; then export RP_DATA=$2; else unset RP_DATA; fi
  local settings=("${@:3}")
  echo "gpu_decode_variants: $variant ${settings[*]} (${SECONDS} s)"
  env "${settings[@]}" RP_VARIANT="$variant" timeout 100 "$HERE/tests/gpu/bench_train.sh" \
    --what ringpilot --worlds 1 \
    --models resnet50 --steps 80 --out "$out/train-$variant.jsonl" >>"$out/train.log" 2>&1 ||
    echo "gpu_decode_variants: $variant failed or timed out" >&2
  [[ -f $out/train-$variant.jsonl ]] && cat "$out/train-$variant.jsonl" >>"$rows" &&
    cat "$out/train-$variant.jsonl"
  unset RP_DATA
}
train synthetic
while read -r -a words; do
  settings=()
  while ((${#words[@]})) && [[ ${words[0]} =~ ^RP_[A-Z_]+= ]]; do
    settings+=("${words[0]}")
    words=("${words[@]:1}")
  done
  ((${#words[@]} >= 2)) || continue
  name=${words[0]} set=${words[1]} keys=${words[*]:2}
  if [[ $set != - ]]; then
    IFS=: read -r -a set_spec <<<"$set"
    set=${set_spec[0]}
    make_set "${set_spec[@]}"
    shards=$(find "$SHARDS_DIR" -name '*.tar' | sort | paste -sd, -)
    keys=${keys//FOLDER/$sets/$set/train}
    keys=${keys//SHARDS/\"$shards\"}
  fi
  train "$name" "$keys" "${settings[@]}"
done <<<"$variants"

if [[ ${RP_PEER:-0} == 1 ]]; then
  for set in ${RP_PEER_SETS:-imagenet}; do
    echo "gpu_decode_variants: peer on $set (${SECONDS} s)"
    make_set "$set"
    timeout 120 python3 "$HERE/bench/peer_imagefolder.py" "$sets/$set/train" --steps 30 \
      --warmup 5 2>>"$out/peer.log" | sed -n "s/^PEER {/{\"set\": \"$set\", /p" | tee -a "$rows"
  done
fi
echo "gpu_decode_variants: done (${SECONDS} s)"
