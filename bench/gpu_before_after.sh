#!/usr/bin/env bash
# Before/after a change, on one GPU machine, in one session: ringpilot's training step
# time of a base revision and of this working tree, runs alternated so that clock and
# power drift hit both sides alike.
#
#   bench/gpu_before_after.sh build   BASE_SRC          # build both (tests/gpu/env.sh)
#   bench/gpu_before_after.sh gpu     BASE_SRC OUT.jsonl [--models M] [--repeat R] [--steps N]
#   bench/gpu_before_after.sh cpu     BASE_SRC KEEP_DIR [cpu_ddp.sh arguments...]
#   bench/gpu_before_after.sh carried BASE_BIN OUT.jsonl [--models M] [--repeat R] [--steps N]
#
# BASE_SRC is a source tree of the base revision, made where git is:
#   mkdir -p .carry/base-src && git archive REV | tar -x -C .carry/base-src
# and carried to the GPU machine with .carry. `gpu` runs tests/gpu/bench_train.sh
# (--what ringpilot --worlds 1) against each build in turn, rows tagged variant base|new;
# `cpu` runs bench/cpu_ddp.sh with each side's ringpilot (RINGPILOT=...), base first, into
# KEEP_DIR/base and KEEP_DIR/new. `carried` needs no build on the GPU machine: BASE_BIN is a
# folder with the base revision's stripped ringpilot-trainer and ringpilot (packed on the CPU
# machine, e.g. copies of an earlier .carry/prebuilt/bin's, carried in .carry), which stand
# in for the carried build's on the base side; the carried libraries serve both sides. The
# launcher goes with its trainer: it writes every key it knows into the run directory's
# job.yaml, and a trainer older than a new key refuses that file.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=${1:?build|gpu|cpu}
base_src="$(cd "${2:?BASE_SRC or BASE_BIN}" && pwd)"
shift 2
base_build="$base_src/build-gpu"
new_build="$HERE/build-gpu"

case $mode in
  build)
    # Each tree builds with its own tests/gpu/env.sh (the base may carry other libraries);
    # the carried Debian libraries live in this tree's .carry.
    if [[ -d "$HERE/.carry" && ! -e "$base_src/.carry" ]]; then ln -s "$HERE/.carry" "$base_src/.carry"; fi
    (
      # shellcheck source=/dev/null
      source "$base_src/tests/gpu/env.sh"
      gpu_build
    )
    (
      # shellcheck source=tests/gpu/env.sh
      source "$HERE/tests/gpu/env.sh"
      gpu_build
    )
    ;;
  gpu | carried)
    out=${1:?OUT.jsonl}
    shift
    models="bert-base resnet50" repeat=2 steps=65
    while (($#)); do
      case $1 in
        --models) models=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        *) echo "gpu_before_after: unknown argument $1" >&2; exit 2 ;;
      esac
    done
    programs=(ringpilot-trainer ringpilot)
    if [[ $mode == carried ]]; then
      # The carry's checks (its digest against the tree, its launcher's commit against the
      # MANIFEST) pass once here, before the swap, and their verdict is exported to
      # bench_train.sh's env.sh: the base's launcher names another commit.
      # shellcheck source=tests/gpu/env.sh
      source "$HERE/tests/gpu/env.sh"
      for p in "${programs[@]}"; do
        [[ -x $HERE/.carry/prebuilt/bin/$p && -x $base_src/$p ]] || {
          echo "gpu_before_after: carried needs $HERE/.carry/prebuilt/bin/$p and $base_src/$p" >&2
          exit 2
        }
        cp "$HERE/.carry/prebuilt/bin/$p" "$HERE/.carry/prebuilt/bin/$p.new"
      done
      trap 'for p in "${programs[@]}"; do cp "$HERE/.carry/prebuilt/bin/$p.new" "$HERE/.carry/prebuilt/bin/$p"; done' EXIT
    fi
    for ((r = 1; r <= repeat; r++)); do
      for side in base new; do
        # gpu: each side's own build; carried: each side's trainer in the carried build.
        build=$new_build
        [[ $side == base ]] && build=$base_build
        if [[ $mode == carried ]]; then
          build=""
          for p in "${programs[@]}"; do
            if [[ $side == base ]]; then from=$base_src/$p; else from=$HERE/.carry/prebuilt/bin/$p.new; fi
            cp "$from" "$HERE/.carry/prebuilt/bin/$p"
          done
        fi
        RINGPILOT_BUILD_DIR=$build RP_VARIANT=$side "$HERE/tests/gpu/bench_train.sh" \
          --what ringpilot --worlds 1 --models "$models" --steps "$steps" --out "$out"
      done
    done
    ;;
  cpu)
    keep=${1:?KEEP_DIR}
    shift
    for side in base new; do
      build=$new_build
      [[ $side == base ]] && build=$base_build
      RINGPILOT="$build/bin/ringpilot" "$HERE/bench/cpu_ddp.sh" --keep "$keep/$side" "$@"
    done
    ;;
  *)
    echo "gpu_before_after: unknown mode $mode (build, gpu, carried, cpu)" >&2
    exit 2
    ;;
esac
