#!/usr/bin/env bash
# The sanitizer build and its tests (CI runs it from scripts/test.sh): configures
# build-fuzz/ with clang, AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer
# (cmake/RingpilotSanitize.cmake) and without LibTorch (RINGPILOT_TRAINER=OFF: the wheel's
# libraries are not instrumented), builds it, then runs
#   - every torch-free unit test (ctest label unit) under ASan+UBSan, and
#   - each fuzz target of tests/fuzz for RINGPILOT_FUZZ_SECONDS (default 60; label fuzz).
# Usage: scripts/fuzz.sh [--seconds N] [--build-only] [CTEST ARGS...]
#   e.g. scripts/fuzz.sh -L fuzz -R tar      one fuzzer (the default is -L 'unit|fuzz')
# Exit status is ctest's. Reproducers of findings: build-fuzz/fuzz/<name>/artifacts/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RINGPILOT_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
seconds="${RINGPILOT_FUZZ_SECONDS:-60}"
build_only=0
while (($#)); do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    *) break ;;
  esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds must be a positive integer" >&2; exit 2; }
for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: '$tool' not found (scripts/setup.sh installs clang)" >&2; exit 2; }
done

export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  # -O1: ASan's recommendation (fast enough, exact stacks); the lint tests run in build/.
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
    -DRINGPILOT_TRAINER=OFF -DRINGPILOT_SANITIZE=ON -DRINGPILOT_FUZZ=ON -DRINGPILOT_LINT=OFF \
    -DRINGPILOT_FUZZ_SECONDS="$seconds"
else
  cmake -S "$ROOT" -B "$BUILD" -DRINGPILOT_FUZZ_SECONDS="$seconds" >/dev/null
fi
cmake --build "$BUILD" --parallel "${RINGPILOT_JOBS:-$(nproc)}"
((build_only)) && exit 0

cd "$BUILD"
# halt_on_error: a UBSan report fails its test; detect_leaks: LeakSanitizer at every exit.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# hwloc's PCI plugin (libpciaccess) leaks at start-up, and hwloc unloads the plugin before
# exit, so LeakSanitizer reports stacks it can neither name nor suppress in every binary
# that reads the topology. Off here; the main build's tests cover PCI discovery.
export HWLOC_PLUGINS_BLACKLIST="${HWLOC_PLUGINS_BLACKLIST:-hwloc_pci}"
if (($# == 0)); then set -- -L 'unit|fuzz'; fi
ctest --output-on-failure -j "${RINGPILOT_TEST_JOBS:-2}" "$@"
