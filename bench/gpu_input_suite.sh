#!/usr/bin/env bash
# Every GPU step of the image-input work in one device call, results under OUT_DIR:
#   facts.txt       GPU, driver, torch/torchvision/NCCL versions, cores
#   pipeline.jsonl  tests/gpu/image_pipeline.sh: the GPU pipeline's unit test on every file
#                   kind, then the pipeline alone on both bench sets (folder, shards, GPU
#                   backend)
#   host.jsonl      ringpilot-bench-host-decode on both sets: whole-image against crop-only
#                   host decode, all cores
#   input.jsonl     bench/gpu_image_input.sh with RP_HOST_DECODE=1: ResNet-50 training from
#                   synthetic data, folders and shards (defaults and host decode), reads
#                   alone, and the peer, per set
# Each part has a time limit (seconds: RP_PIPELINE_S 150, RP_INPUT_S 360), so a slow part
# leaves the others their time; its log is beside its rows.
#   bench/gpu_input_suite.sh OUT_DIR
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=${1:?OUT_DIR}
mkdir -p "$out"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh" || exit 1
gpu_facts "$out/facts.txt"
timeout "${RP_PIPELINE_S:-150}" "$HERE/tests/gpu/image_pipeline.sh" "$out/pipeline.jsonl" \
  >"$out/pipeline.log" 2>&1
echo "gpu_input_suite: pipeline rc $?"
sets=${RP_IMAGE_SETS:-/tmp/rp-sets}
for name in natural imagenet; do
  [[ -d $sets/$name/train ]] || continue
  "$RINGPILOT_BUILD_DIR/bin/ringpilot-bench-host-decode" "$sets/$name/train" --passes 2 |
    sed "s/^{/{\"set\": \"$name\", /" >>"$out/host.jsonl" 2>>"$out/host.log"
done
RP_HOST_DECODE=1 timeout "${RP_INPUT_S:-360}" "$HERE/bench/gpu_image_input.sh" \
  "$out/input.jsonl" >"$out/input.log" 2>&1
echo "gpu_input_suite: input rc $?"
cat "$out"/*.jsonl
