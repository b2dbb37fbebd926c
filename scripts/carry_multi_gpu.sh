#!/usr/bin/env bash
# Packs what the multi-GPU runs (tests/gpu/scaling_suite.sh comm, grad-dtype, profiler) need
# besides ringpilot's own carried build into the ignored .carry/multi/, on this (CPU) machine:
#   nccl-tests.tgz                   nccl-tests' all_reduce, all_gather, reduce_scatter,
#                                    broadcast, alltoall and sendrecv perf programs, built
#                                    against the torch wheel's NCCL for sm_90 twice: with
#                                    MPI (mpi/: one process per GPU under mpirun, as
#                                    `ringpilot bench comm` runs) and without (threads/: one
#                                    process drives every GPU, -g N)
#   libnccl-profiler-inspector.so    NCCL's Inspector profiler plugin, from the NCCL release
#                                    the wheel carries (ext-profiler/inspector)
#   fashion.tgz                      20,000 training and 2,000 held-out Fashion-MNIST images
#                                    in the CIFAR layout (tests/data/make_cifar_fashion.py)
# The GPU machine has no network, so both sources come from checkouts made here:
#   scripts/carry_multi_gpu.sh --nccl-tests DIR --nccl DIR
# DIR of NVIDIA/nccl-tests (any recent release) and of NVIDIA/nccl at the tag of the wheel's
# NCCL (v2.28.9-1 for torch 2.11.0; its profiler API must be one the wheel's NCCL loads).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.carry/multi"
NCCL_TESTS="" NCCL_SRC=""
while (($#)); do
  case $1 in
    --nccl-tests) NCCL_TESTS=$2; shift 2 ;;
    --nccl) NCCL_SRC=$2; shift 2 ;;
    *) echo "usage: $0 --nccl-tests DIR --nccl DIR" >&2; exit 2 ;;
  esac
done
die() { echo "carry_multi_gpu: $*" >&2; exit 1; }
[[ -f $NCCL_TESTS/src/all_reduce.cu ]] || die "--nccl-tests: no nccl-tests checkout at '$NCCL_TESTS'"
[[ -f $NCCL_SRC/ext-profiler/inspector/inspector.cc ]] ||
  die "--nccl: no ext-profiler/inspector in '$NCCL_SRC' (an NVIDIA/nccl 2.28 checkout)"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[[ -x $CUDA_HOME/bin/nvcc ]] || die "no nvcc under $CUDA_HOME"
WHEEL_NCCL=$("$ROOT/.venv/bin/python" -c \
  'import importlib.util,os;print(os.path.join(os.path.dirname(importlib.util.find_spec("nvidia.nccl").submodule_search_locations[0]),"nccl"))') ||
  die "no nvidia.nccl in .venv (scripts/setup.sh installs the torch wheel's)"
[[ -f $WHEEL_NCCL/include/nccl.h ]] || die "$WHEEL_NCCL/include/nccl.h missing"
version=$(awk '/define NCCL_(MAJOR|MINOR|PATCH)/ {printf "%s%s", sep, $3; sep="."}' "$WHEEL_NCCL/include/nccl.h")

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# nccl-tests links -lnccl: a prefix with the wheel's header and an unversioned library name.
mkdir -p "$WORK/nccl/lib"
cp -r "$WHEEL_NCCL/include" "$WORK/nccl/"
ln -s "$WHEEL_NCCL/lib/libnccl.so.2" "$WORK/nccl/lib/libnccl.so"
# Open MPI's headers and library where Debian puts them (the GPU image's Open MPI 4.1 has
# the same libmpi.so.40).
MPI_HOME=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
[[ -f $MPI_HOME/include/mpi.h ]] || die "no mpi.h under $MPI_HOME (libopenmpi-dev; or set MPI_HOME)"
PERF=(all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf alltoall_perf sendrecv_perf)
for mpi in 1 0; do
  kind=$( ((mpi)) && echo mpi || echo threads)
  rm -rf "$WORK/nccl-tests-src"
  cp -r "$NCCL_TESTS" "$WORK/nccl-tests-src"
  rm -rf "$WORK/nccl-tests-src/build"
  make -s -j"$(nproc)" -C "$WORK/nccl-tests-src/src" build CUDA_HOME="$CUDA_HOME" \
    NCCL_HOME="$WORK/nccl" MPI=$mpi MPI_HOME="$MPI_HOME" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$WORK/nccl-tests/$kind" \
    >"$WORK/nccl-tests-$kind.log" 2>&1 ||
    { tail -30 "$WORK/nccl-tests-$kind.log"; die "nccl-tests build ($kind) failed"; }
  find "$WORK/nccl-tests/$kind" -mindepth 1 -maxdepth 1 ! -name '*_perf' -exec rm -rf {} +
done

# The Inspector: its Makefile wants a git checkout for its version string; the same flags
# without -march=native (the GPU machine's CPU is not this one).
inspector="$NCCL_SRC/ext-profiler/inspector"
printf '#include "version.h"\nconst char* get_git_version_info() { return "NCCL %s"; }\n' \
  "$version" >"$WORK/version.cc"
g++ -I"$WHEEL_NCCL/include" -I"$CUDA_HOME/include" -I"$inspector/nccl" -I"$inspector" -O3 -fPIC \
  -shared -DNDEBUG -o "$WORK/libnccl-profiler-inspector.so" \
  -Wl,-soname,libnccl-profiler-inspector.so "$WORK/version.cc" "$inspector/inspector_plugin.cc" \
  "$inspector/inspector.cc" "$inspector/json.cc" || die "Inspector build failed"

python3 "$ROOT/tests/data/make_cifar_fashion.py" "$WORK/fashion" --train 20000 --test 2000

rm -rf "$OUT"
mkdir -p "$OUT"
tar czf "$OUT/nccl-tests.tgz" -C "$WORK/nccl-tests" "${PERF[@]/#/mpi/}" "${PERF[@]/#/threads/}"
cp "$WORK/libnccl-profiler-inspector.so" "$OUT/"
tar czf "$OUT/fashion.tgz" -C "$WORK" fashion
{
  echo "nccl $version (torch wheel)"
  echo "nccl-tests $(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$NCCL_TESTS/src/common.h")"
  echo "packed_at $(date -u +%FT%TZ)"
} >"$OUT/MANIFEST"
du -sh "$OUT"/*
