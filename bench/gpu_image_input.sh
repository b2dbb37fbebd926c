#!/usr/bin/env bash
# Image input on one GPU (issue 19's performance check), everything in one call so the peer
# runs on the same machine: an ImageNet-like folder of natural JPEGs made here
# (bench/make_natural_jpegs.py), then
#   1. the pipeline alone: ringpilot's GPU pipeline (nvJPEG hardware engines, and the GPU
#      backend with --no-hardware) and the peer's loader (ImageFolder + DataLoader on all
#      cores + PIL transforms), img/s into GPU memory;
#   2. ResNet-50 bf16, batch 256, CUDA graphs: ringpilot on synthetic data, on the folder and
#      on shards packed from it (`ringpilot data pack`), and the peer training from the folder.
# Rows (JSON lines) go to OUT.jsonl; the bench_train rows carry variant synthetic |
# image_folder | image_shards.
#   bench/gpu_image_input.sh OUT.jsonl [--classes 100] [--per-class 60] [--steps 80]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh"
out=${1:?OUT.jsonl}
shift
classes=100 per_class=60 steps=80
while (($#)); do
  case $1 in
    --classes) classes=$2; shift 2 ;;
    --per-class) per_class=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "gpu_image_input: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$out")"
: >>"$out"
data=${RP_IMAGE_DATA:-/tmp/rp-natural}
if [[ ! -d $data/train ]]; then
  python3 "$HERE/bench/make_natural_jpegs.py" "$data/train" --classes "$classes" --per-class "$per_class"
fi
[[ -x "$RP" ]] || gpu_build
gpu_build_target ringpilot-bench-image-pipeline
bin="$RINGPILOT_BUILD_DIR/bin"

if [[ ${RP_SKIP_PIPELINE:-0} == 0 ]]; then
echo "gpu_image_input: pipeline alone" >&2
"$bin/ringpilot-bench-image-pipeline" "$data/train" --batch 256 --threads "${RP_PIPE_THREADS:-8}" >>"$out"
"$bin/ringpilot-bench-image-pipeline" "$data/train" --batch 256 --threads "${RP_PIPE_THREADS:-8}" --no-hardware >>"$out" || true
python3 "$HERE/bench/peer_imagefolder.py" "$data/train" --loader-only --steps 20 --warmup 4 |
  sed -n 's/^PEER //p' >>"$out"
fi

if [[ ! -d $data/shards ]]; then
  "$RP" data pack "$data/train" "$data/shards" >&2
fi
shards=$(find "$data/shards" -name '*.tar' | sort | paste -sd, -)
echo "gpu_image_input: training" >&2
for variant in ${RP_IMAGE_VARIANTS:-synthetic image_folder image_shards}; do
  case $variant in
    synthetic) unset RP_DATA ;;
    image_folder) export RP_DATA="kind: image_folder, train: $data/train" ;;
    image_shards) export RP_DATA="kind: image_shards, train: \"$shards\"" ;;
  esac
  # bench_train.sh tabulates every row of its file: give it one of its own.
  RP_VARIANT=$variant "$HERE/tests/gpu/bench_train.sh" --what ringpilot --worlds 1 \
    --models resnet50 --steps "$steps" --out "$out.train" >&2
done
cat "$out.train" >>"$out"
unset RP_DATA
[[ ${RP_SKIP_PEER:-0} == 1 ]] || python3 "$HERE/bench/peer_imagefolder.py" "$data/train" --steps 30 --warmup 5 | sed -n 's/^PEER //p' >>"$out"
cat "$out"
