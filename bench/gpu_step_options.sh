#!/usr/bin/env bash
# The training-step options of the performance issue against each other and the fair peers,
# in one device call on one GPU, with the unit tests whose CUDA cases check them first:
#   bench/gpu_step_options.sh OUT_DIR [--steps N] [--repeat R] [--peer-runs P] [--profile]
#       [--defaults-only]
# Runs (tests/gpu/bench_train.sh --worlds 1, rows in OUT_DIR/options.jsonl, variant names):
#   ResNet-50 b256: default; model.stem_space_to_depth false (no-s2d); model.shortcut_in_gemm
#   false (no-shortcut-gemm); model.fused_batchnorm_accumulate false (no-bn-accumulate); all
#   three false (plain); R rounds in that order, so clock drift hits every variant alike. BERT-base
#   b64: default and model.mixed_linear_optimizer_copies false (no-opt-copies), R rounds, both
#   with --defaults-only too. On a machine with several GPUs, then both models' defaults on
#   all of them (scaling, and their final losses beside the 1-GPU rows').
#   Peers (OUT_DIR/peer.jsonl): ResNet-50 torch.compile, BERT-base masked MLM head with
#   torch.compile reduce-overhead (../shared/peers/torch_ddp_bench.py, carried in .carry/peers),
#   P runs each (default 1): the compiled BERT peer moved by 26% between two runs a minute
#   apart on 2026-11-29, so the ratio is printed against the peer's median and its best run.
# --defaults-only: each round runs only the default rows and BERT's no-opt-copies (no ResNet
# option variants).
# --profile: then one traced eager step of each model with the defaults
# (tests/gpu/profile_step.sh, kernel tables in OUT_DIR/profile-MODEL.txt).
# Prints the unit tests' verdicts and a table of rates; OUT_DIR/facts.txt names the device.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../tests/gpu/env.sh"
OUTDIR=${1:?OUT_DIR}
shift
STEPS=65 REPEAT=1 PROFILE=0 PEER_RUNS=1 VARIANTS=1
while (($#)); do
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --profile) PROFILE=1; shift ;;
    --peer-runs) PEER_RUNS=$2; shift 2 ;;
    --defaults-only) VARIANTS=0; shift ;;
    *) echo "usage: $0 OUT_DIR [--steps N] [--repeat R] [--peer-runs P] [--profile]" \
         "[--defaults-only]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUTDIR"
gpu_facts "$OUTDIR/facts.txt"
T0=$(date +%s)
# Every line also in OUT_DIR/progress.txt: one file that comes back whole when the
# per-binary test logs are too many to return.
say() { echo "gpu_step_options +$(($(date +%s) - T0))s: $*" | tee -a "$OUTDIR/progress.txt"; }

tests=(trainer_ops_space_to_depth_conv_test trainer_ops_pointwise_conv_test
       trainer_ops_fused_batch_norm_accumulate_test trainer_ops_fused_batch_norm_test
       trainer_ops_max_pool_test trainer_ops_mixed_linear_test trainer_ops_mixed_linear_gelu_test
       trainer_ops_residual_norm_test trainer_ops_fused_adamw_test trainer_step_optimizer_test
       trainer_models_resnet_test trainer_ops_linear_cross_entropy_test trainer_ops_embedding_test)
gpu_build_test "${tests[@]}" >"$OUTDIR/test-build.log" 2>&1 || say "test build failed"
for t in "${tests[@]}"; do
  timeout 300 "$(gpu_test_binary "$t")" >"$OUTDIR/$t.txt" 2>&1
  say "$t: rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUTDIR/$t.txt" | tr '\n' ' ')"
done

bench=(bash "$ROOT/tests/gpu/bench_train.sh" --what ringpilot --worlds 1 --steps "$STEPS"
       --out "$OUTDIR/options.jsonl")
for ((round = 1; round <= REPEAT; round++)); do
  RP_VARIANT=default "${bench[@]}" --models resnet50 >/dev/null 2>>"$OUTDIR/options.err"
  say "resnet50 default: rc $?"
  if ((VARIANTS)); then
    RP_VARIANT=no-s2d RP_STEM_S2D=false "${bench[@]}" --models resnet50 >/dev/null 2>>"$OUTDIR/options.err"
    say "resnet50 no-s2d: rc $?"
    RP_VARIANT=no-shortcut-gemm RP_SHORTCUT_GEMM=false "${bench[@]}" --models resnet50 \
      >/dev/null 2>>"$OUTDIR/options.err"
    say "resnet50 no-shortcut-gemm: rc $?"
    RP_VARIANT=no-bn-accumulate RP_BN_ACCUMULATE=false "${bench[@]}" --models resnet50 \
      >/dev/null 2>>"$OUTDIR/options.err"
    say "resnet50 no-bn-accumulate: rc $?"
    RP_VARIANT=plain RP_STEM_S2D=false RP_SHORTCUT_GEMM=false RP_BN_ACCUMULATE=false "${bench[@]}" \
      --models resnet50 >/dev/null 2>>"$OUTDIR/options.err"
    say "resnet50 plain: rc $?"
  fi
  RP_VARIANT=default "${bench[@]}" --models bert-base >/dev/null 2>>"$OUTDIR/options.err"
  say "bert-base default: rc $?"
  # The shadow refresh instead of the optimizer writing the bf16 weight copies
  # (model.mixed_linear_optimizer_copies false; the default since 2026-11-30, 1.2% faster):
  # in every round, as the default row.
  RP_VARIANT=no-opt-copies RP_OPT_COPIES=false "${bench[@]}" --models bert-base >/dev/null \
    2>>"$OUTDIR/options.err"
  say "bert-base no-opt-copies: rc $?"
done
# All GPUs, where there are several: the default steps scaled (their final losses beside the
# 1-GPU rows').
GPUS=$(nvidia-smi -L | wc -l)
if ((GPUS > 1)); then
  RP_VARIANT=default bash "$ROOT/tests/gpu/bench_train.sh" --what ringpilot --worlds "$GPUS" \
    --steps "$STEPS" --models "resnet50 bert-base" --out "$OUTDIR/options.jsonl" >/dev/null \
    2>>"$OUTDIR/options.err"
  say "resnet50 and bert-base default on $GPUS GPUs: rc $?"
fi
for ((run = 1; run <= PEER_RUNS; run++)); do
  RP_VARIANT=peer-r$run RP_PEER_IMPLS=compile RP_PEER_MLM_HEAD=masked \
    bash "$ROOT/tests/gpu/bench_train.sh" --what peer --worlds 1 --models "resnet50 bert-base" \
    --steps "$STEPS" --out "$OUTDIR/peer.jsonl" >/dev/null 2>>"$OUTDIR/peer.err"
  say "peers, run $run: rc $?"
done
if ((PROFILE)); then
  for model in resnet50 bert-base; do
    timeout 240 bash "$ROOT/tests/gpu/profile_step.sh" --model $model --out "$OUTDIR/profile-$model" \
      >"$OUTDIR/profile-$model.txt" 2>&1
    say "profile $model: rc $?"
    rm -rf "$OUTDIR/profile-$model"  # traces: too big to bring back
  done
fi
python3 - "$OUTDIR/options.jsonl" "$OUTDIR/peer.jsonl" <<'PY'
import json, sys
rows = []
for path in sys.argv[1:]:
    try:
        rows += [json.loads(l) for l in open(path) if l.strip()]
    except FileNotFoundError:
        pass
print(f"{'model':10} {'world':>5} {'impl/variant':36} {'rate':>9} {'step ms':>8} {'p99 ms':>8} "
      f"{'mem GB':>7} {'loss':>8}")
for r in rows:
    name = r.get("variant") if r.get("impl") == "ringpilot" else "/".join(
        x for x in (r.get("impl"), r.get("variant")) if x)
    print(f"{r['model']:10} {r['world']:5} {name:36} {r['per_gpu_rate']:9.1f} "
          f"{r.get('step_ms', 0):8.2f} {r.get('step_p99_ms', 0) or 0:8.2f} "
          f"{r.get('peak_mem_gb', 0) or 0:7.2f} {r.get('final_loss') or 0:8.4f}")
# Each ringpilot variant at 1 GPU against the peer: medians, and the peer's best run.
mid = lambda v: (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
for model in sorted({r["model"] for r in rows}):
    peer = sorted(r["per_gpu_rate"] for r in rows if r["model"] == model and r["world"] == 1
                  and r.get("impl") != "ringpilot")
    variants = sorted({r.get("variant") for r in rows if r["model"] == model
                       and r["world"] == 1 and r.get("impl") == "ringpilot"})
    for variant in variants:
        ours = sorted(r["per_gpu_rate"] for r in rows if r["model"] == model and r["world"] == 1
                      and r.get("impl") == "ringpilot" and r.get("variant") == variant)
        if ours and peer:
            print(f"RATIO {model} {variant}: ringpilot {mid(ours):.1f} (median of {len(ours)}) / "
                  f"peer {mid(peer):.1f} (median of {len(peer)}, best {peer[-1]:.1f}) = "
                  f"{mid(ours) / mid(peer):.3f}x, {mid(ours) / peer[-1]:.3f}x against the best")
PY
