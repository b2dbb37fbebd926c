#!/usr/bin/env bash
# The GPU image pipeline on its own, in one call: its unit test on photographs of every file
# kind (data_cuda_image_pipeline_test: every JPEG on the GPU, pixels as libjpeg-turbo's, bad
# files counted, no allocation once warm), then ringpilot-bench-image-pipeline (decode +
# crop into model batches, no training step) on the two bench sets, from folders and shards:
#   natural   6,000 JPEGs of ~40 KB (bench/make_natural_jpegs.py)
#   imagenet  6,000 ImageNet-like files (--imagenet-like: ~120 KB mean, varied sizes, 3%
#             progressive, 3% greyscale, 0.5% CMYK)
# Rows (JSON lines) go to OUT.jsonl; the sets stay under RP_IMAGE_SETS (default /tmp/rp-sets)
# for bench/gpu_image_input.sh.
#   tests/gpu/image_pipeline.sh OUT.jsonl [--per-class 60] [--threads 8]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh"
out=${1:?OUT.jsonl}
shift
per_class=60 threads=8
while (($#)); do
  case $1 in
    --per-class) per_class=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "image_pipeline: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$out")"
: >>"$out"
sets=${RP_IMAGE_SETS:-/tmp/rp-sets}
gpu_build_test data_cuda_image_pipeline_test
gpu_build_target ringpilot-bench-image-pipeline
bin="$RINGPILOT_BUILD_DIR/bin"

echo "image_pipeline: unit test" >&2
kinds="$sets/kinds"
[[ -d $kinds ]] || python3 "$HERE/tests/data/make_jpeg_kinds.py" "$kinds" --bad >&2
test_rc=0
RINGPILOT_JPEG_KINDS="$kinds" RINGPILOT_SOURCE_DIR="$HERE" \
  "$(gpu_test_binary data_cuda_image_pipeline_test)" || test_rc=$?
echo "{\"what\": \"data_cuda_image_pipeline_test\", \"rc\": $test_rc}" >>"$out"

make_set() {  # NAME [make_natural_jpegs.py options]
  local name=$1
  shift
  if [[ ! -d $sets/$name/train ]]; then
    python3 "$HERE/bench/make_natural_jpegs.py" "$sets/$name/train" --classes 100 \
      --per-class "$per_class" "$@" >&2
  fi
  if [[ ! -d $sets/$name/shards ]]; then
    "$RP" data pack "$sets/$name/train" "$sets/$name/shards" >&2
  fi
}
make_set natural
make_set imagenet --imagenet-like

for name in natural imagenet; do
  shards=$(find "$sets/$name/shards" -name '*.tar' | sort | paste -sd, -)
  for where in "$sets/$name/train" "$shards"; do
    echo "image_pipeline: $name ${where##*/}" >&2
    "$bin/ringpilot-bench-image-pipeline" "$where" --batch 256 --threads "$threads" |
      sed "s/^{/{\"set\": \"$name\", /" >>"$out"
  done
  "$bin/ringpilot-bench-image-pipeline" "$sets/$name/train" --batch 256 --threads "$threads" \
    --no-hardware | sed "s/^{/{\"set\": \"$name\", /" >>"$out" || true
done
cat "$out"
exit "$test_rc"
