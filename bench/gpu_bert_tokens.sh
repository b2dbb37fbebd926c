#!/usr/bin/env bash
# BERT-base from token shards vs synthetic tokens on one GPU (issue 19: >= 98% of
# synthetic), in one call: the same job (b64, seq 128, bf16, CUDA graphs, model.vocab_size
# 30522 on both sides so the MLM head costs the same) with data.kind synthetic, then
# data.kind tokens on SHARD_PREFIX (made by `ringpilot data tokenize`; carried in .carry).
#   bench/gpu_bert_tokens.sh SHARD_PREFIX OUT.jsonl [--steps 80]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=tests/gpu/env.sh
source "$HERE/tests/gpu/env.sh"
prefix=${1:?SHARD_PREFIX}
out=${2:?OUT.jsonl}
shift 2
steps=80
while (($#)); do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    *) echo "gpu_bert_tokens: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$RP" ]] || gpu_build
for variant in synthetic tokens; do
  case $variant in
    synthetic) unset RP_DATA ;;
    tokens) export RP_DATA="kind: tokens, train: $prefix" ;;
  esac
  RP_VOCAB=30522 RP_VARIANT=$variant "$HERE/tests/gpu/bench_train.sh" --what ringpilot \
    --worlds 1 --models bert-base --steps "$steps" --out "$out" >&2
done
cat "$out"
