#!/usr/bin/env bash
# Image input on one GPU, everything in one call so the peer runs on the same machine, on
# the two bench sets (bench/make_natural_jpegs.py):
#   natural   6,000 natural JPEGs of ~40 KB
#   imagenet  6,000 ImageNet-like files (--imagenet-like: ~120 KB mean, varied sizes, 3%
#             progressive, 3% greyscale, 0.5% CMYK)
# ResNet-50 bf16, batch 256, CUDA graphs (tests/gpu/bench_train.sh): ringpilot on synthetic
# data, then per set from the folder and from shards packed from it (`ringpilot data pack`)
# with default settings (data.gpu_decode auto), the folder and the shards with host decode
# and bench/read_concurrency.py (RP_HOST_DECODE=1), and the peer (ImageFolder + DataLoader
# on all cores + PIL) training from the folder. Rows (JSON lines) go to OUT.jsonl; the training rows carry
# variant synthetic | SET-folder | SET-shards | SET-folder-host | SET-shards-host.
#   bench/gpu_image_input.sh OUT.jsonl [--sets "natural imagenet"] [--per-class 60] [--steps 80]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh"
out=${1:?OUT.jsonl}
shift
sets="natural imagenet" per_class=60 steps=80
while (($#)); do
  case $1 in
    --sets) sets=$2; shift 2 ;;
    --per-class) per_class=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "gpu_image_input: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$out")"
: >>"$out"
root=${RP_IMAGE_SETS:-/tmp/rp-sets}
[[ -x "$RP" ]] || gpu_build

train() {  # VARIANT [data keys]
  local variant=$1
  if (($# > 1)); then export RP_DATA=$2; else unset RP_DATA; fi
  # bench_train.sh tabulates every row of its file: give it one of its own.
  RP_VARIANT=$variant "$HERE/tests/gpu/bench_train.sh" --what ringpilot --worlds 1 \
    --models resnet50 --steps "$steps" --out "$out.train" >&2 || echo "gpu_image_input: $variant failed" >&2
  unset RP_DATA
}

echo "gpu_image_input: synthetic" >&2
train synthetic
for set in $sets; do
  data="$root/$set"
  if [[ ! -d $data/train ]]; then
    extra=()
    [[ $set == imagenet ]] && extra=(--imagenet-like)
    python3 "$HERE/bench/make_natural_jpegs.py" "$data/train" --classes 100 \
      --per-class "$per_class" "${extra[@]}" >&2
  fi
  [[ -d $data/shards ]] || "$RP" data pack "$data/train" "$data/shards" >&2
  shards=$(find "$data/shards" -name '*.tar' | sort | paste -sd, -)
  echo "gpu_image_input: $set" >&2
  train "$set-folder" "kind: image_folder, train: $data/train"
  train "$set-shards" "kind: image_shards, train: \"$shards\""
  if [[ ${RP_HOST_DECODE:-0} == 1 ]]; then
    train "$set-folder-host" "kind: image_folder, train: $data/train, gpu_decode: false"
    train "$set-shards-host" "kind: image_shards, train: \"$shards\", gpu_decode: false"
    # Reads alone, folder against shards (one shared descriptor, or one per thread).
    python3 "$HERE/bench/read_concurrency.py" "$data/train" "$shards" --threads 15 |
      sed "s/^{/{\"set\": \"$set\", /" >>"$out" || echo "gpu_image_input: read_concurrency failed" >&2
  fi
  if [[ ${RP_SKIP_PEER:-0} != 1 ]]; then
    python3 "$HERE/bench/peer_imagefolder.py" "$data/train" --steps 30 --warmup 5 |
      sed -n "s/^PEER {/{\"set\": \"$set\", /p" >>"$out" || echo "gpu_image_input: peer failed" >&2
  fi
done
cat "$out.train" >>"$out"
cat "$out"
