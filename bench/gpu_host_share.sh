#!/usr/bin/env bash
# data.host_decode_share on one GPU, in one call (issue 33): nvJPEG on the JPEG engines and
# the host's cores decoding one batch side by side. Each part has its own time limit and
# appends its rows to OUT_DIR/rows.jsonl as it ends, so a call cut short keeps what ran:
#   1. facts (GPU, driver, versions, cores, the carried build's commit);
#   2. the GPU pipeline's unit test (data_cuda_image_pipeline_test: every JPEG kind, the
#      host share equal to the CPU loader's samples, bad files counted);
#   3. ResNet-50 bf16 b256 with CUDA graphs (tests/gpu/bench_train.sh): synthetic, then the
#      ImageNet-like set (bench/make_natural_jpegs.py --imagenet-like) from its folder with
#      shares RP_SHARES (default "0.5 0.35 0.65"), from its shards at the first share, with
#      host decode (data.gpu_decode false), and the natural set's folder at the first share;
#      each row carries the rank's input lines (decoder, time per batch);
#   4. the pipeline alone (ringpilot-bench-image-pipeline) on the ImageNet-like folder at
#      share 0 and the first share;
#   5. the peer (ImageFolder + DataLoader on all cores + PIL) on the ImageNet-like folder.
#   bench/gpu_host_share.sh OUT_DIR
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=${1:?OUT_DIR}
mkdir -p "$out"
rows="$out/rows.jsonl"
: >>"$rows"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh" || exit 1
read -r -a shares <<<"${RP_SHARES:-0.5 0.35 0.65}"
sets=${RP_IMAGE_SETS:-/tmp/rp-sets}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision",
torchvision.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
  echo "cores $(nproc)"
  "$RP" --version
} >"$out/facts.txt" 2>&1
cat "$out/facts.txt"

make_set() {  # NAME [make_natural_jpegs.py options]
  local name=$1
  shift
  [[ -d $sets/$name/train ]] || python3 "$HERE/bench/make_natural_jpegs.py" "$sets/$name/train" \
    --classes 100 --per-class 60 "$@" >>"$out/sets.log" 2>&1
  [[ -d $sets/$name/shards ]] || "$RP" data pack "$sets/$name/train" "$sets/$name/shards" \
    >>"$out/sets.log" 2>&1
}
SECONDS=0
make_set imagenet --imagenet-like
echo "gpu_host_share: imagenet set made (${SECONDS} s): $(du -sh "$sets/imagenet/train" | cut -f1)"

kinds="$sets/kinds"
[[ -d $kinds ]] || python3 "$HERE/tests/data/make_jpeg_kinds.py" "$kinds" --bad >>"$out/sets.log" 2>&1
test_rc=0
RINGPILOT_JPEG_KINDS="$kinds" RINGPILOT_SOURCE_DIR="$HERE" timeout 90 \
  "$(gpu_test_binary data_cuda_image_pipeline_test)" >"$out/unit.log" 2>&1 || test_rc=$?
echo "{\"what\": \"data_cuda_image_pipeline_test\", \"rc\": $test_rc}" >>"$rows"
grep -E "^\[ (kinds|share)|FAILED|PASSED" "$out/unit.log"

train() {  # VARIANT [data keys]
  local variant=$1
  if (($# > 1)); then export RP_DATA=$2; else unset RP_DATA; fi
  echo "gpu_host_share: $variant (${SECONDS} s)"
  RP_VARIANT=$variant timeout 100 "$HERE/tests/gpu/bench_train.sh" --what ringpilot --worlds 1 \
    --models resnet50 --steps 80 --out "$out/train-$variant.jsonl" >>"$out/train.log" 2>&1 ||
    echo "gpu_host_share: $variant failed or timed out" >&2
  [[ -f $out/train-$variant.jsonl ]] && cat "$out/train-$variant.jsonl" >>"$rows" &&
    cat "$out/train-$variant.jsonl"
  unset RP_DATA
}
inet="$sets/imagenet/train"
inet_shards=$(find "$sets/imagenet/shards" -name '*.tar' | sort | paste -sd, -)
train synthetic
train "imagenet-folder-share${shares[0]}" \
  "kind: image_folder, train: $inet, gpu_decode: true, host_decode_share: ${shares[0]}"
for share in "${shares[@]:1}"; do
  train "imagenet-folder-share$share" \
    "kind: image_folder, train: $inet, gpu_decode: true, host_decode_share: $share"
done
train "imagenet-shards-share${shares[0]}" \
  "kind: image_shards, train: \"$inet_shards\", gpu_decode: true, host_decode_share: ${shares[0]}"
train imagenet-folder-host "kind: image_folder, train: $inet, gpu_decode: false"
make_set natural
train "natural-folder-share${shares[0]}" \
  "kind: image_folder, train: $sets/natural/train, gpu_decode: true, host_decode_share: ${shares[0]}"

for share in 0 "${shares[0]}"; do
  echo "gpu_host_share: pipeline alone, share $share (${SECONDS} s)"
  timeout 60 "$RINGPILOT_BUILD_DIR/bin/ringpilot-bench-image-pipeline" "$inet" --batches 30 \
    --host-share "$share" --threads 14 2>>"$out/pipeline.log" |
    sed 's/^{/{"set": "imagenet", /' | tee -a "$rows"
done

echo "gpu_host_share: peer (${SECONDS} s)"
timeout 120 python3 "$HERE/bench/peer_imagefolder.py" "$inet" --steps 30 --warmup 5 2>"$out/peer.log" |
  sed -n 's/^PEER {/{"set": "imagenet", /p' | tee -a "$rows"
echo "gpu_host_share: done (${SECONDS} s)"
