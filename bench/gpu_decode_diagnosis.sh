#!/usr/bin/env bash
# What slows nvJPEG's hardware decode beside a training step (issue 33), in one call:
#   1. facts, and the GPU pipeline's unit test (data_cuda_image_pipeline_test);
#   2. the pipeline alone on the ImageNet-like folder (bench/make_natural_jpegs.py
#      --imagenet-like), then beside each load of bench/gpu_contention.h in the same process:
#      kernels filling every SM, kernels streaming HBM, busy host cores; RP_PIPELINE_RUNS
#      (one line of ringpilot-bench-image-pipeline arguments per run) replaces that list;
#   3. unless RP_PROFILE=0, one eager ResNet-50 step traced with the pipeline decoding beside
#      it (tests/gpu/profile_step.sh): the kernel table, and per stream how long its copies
#      waited between their API call and their start (tests/gpu/stream_summary.py).
# Rows go to OUT_DIR/rows.jsonl as each part ends.
#   bench/gpu_decode_diagnosis.sh OUT_DIR
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=${1:?OUT_DIR}
mkdir -p "$out"
rows="$out/rows.jsonl"
: >>"$rows"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh" || exit 1
gpu_build_target ringpilot-bench-image-pipeline || exit 1
sets=${RP_IMAGE_SETS:-/tmp/rp-sets}
gpu_facts "$out/facts.txt"
SECONDS=0
kinds="$sets/kinds"
[[ -d $kinds ]] || python3 "$HERE/tests/data/make_jpeg_kinds.py" "$kinds" --bad >>"$out/sets.log" 2>&1
test_rc=0
RINGPILOT_JPEG_KINDS="$kinds" RINGPILOT_SOURCE_DIR="$HERE" timeout 90 \
  "$(gpu_test_binary data_cuda_image_pipeline_test)" >"$out/unit.log" 2>&1 || test_rc=$?
echo "{\"what\": \"data_cuda_image_pipeline_test\", \"rc\": $test_rc}" | tee -a "$rows"
grep -E "FAILED|PASSED" "$out/unit.log"

set_dir="$sets/imagenet/train"
[[ -d $set_dir ]] || python3 "$HERE/bench/make_natural_jpegs.py" "$set_dir" --classes 100 \
  --per-class 60 --imagenet-like >>"$out/sets.log" 2>&1
echo "gpu_decode_diagnosis: set ready (${SECONDS} s)"
threads=$(($(nproc) - 2))
runs=${RP_PIPELINE_RUNS:-"--contend none
--contend sm
--contend hbm
--contend cpu:$threads
--contend none"}
while read -r -a run_args; do
  ((${#run_args[@]})) || continue
  timeout 60 "$RINGPILOT_BUILD_DIR/bin/ringpilot-bench-image-pipeline" "$set_dir" \
    --threads "$threads" --batches 30 "${run_args[@]}" 2>>"$out/pipeline.log" | tee -a "$rows" ||
    echo "gpu_decode_diagnosis: pipeline with ${run_args[*]} failed" >&2
done <<<"$runs"
echo "gpu_decode_diagnosis: pipeline runs done (${SECONDS} s)"
[[ ${RP_PROFILE:-1} == 1 ]] || exit 0

prof=$(mktemp -d)  # the trace is tens of MB: summarised here, not kept
timeout 240 "$HERE/tests/gpu/profile_step.sh" --model resnet50 --out "$prof" \
  --set data.kind=image_folder --set "data.train=$set_dir" --set data.gpu_decode=true \
  >"$out/profile-kernels.txt" 2>&1 || echo "gpu_decode_diagnosis: profile failed" >&2
head -30 "$out/profile-kernels.txt"
trace="$prof/kineto-resnet50.rank-0.json"
if [[ -f $trace ]]; then
  python3 "$HERE/tests/gpu/stream_summary.py" "$trace" 3 8 | tee "$out/profile-streams.txt"
fi
grep -rh "input: " "$prof/run-resnet50.log" "$prof/run-resnet50" 2>/dev/null | tail -3
echo "gpu_decode_diagnosis: done (${SECONDS} s)"
