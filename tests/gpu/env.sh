# shellcheck shell=bash
# Sourced by tests/gpu/*.sh on a GPU machine: environment, build of ringpilot there
# (the GPU image lacks prometheus-cpp and civetweb: scripts/carry_gpu_deps.sh, run before
# the GPU call, unpacks Debian's into .carry/deps and .carry/deps-build, which the call
# carries), and small helpers. Needs: python3 with torch (LibTorch), nvcc, cmake.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export RINGPILOT_BUILD_DIR="${RINGPILOT_BUILD_DIR:-$ROOT/build-gpu}"
# Never let NCCL, PyTorch or NVSHMEM use NVLink multicast on shared machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Run time: libprometheus-cpp-*.so.1.0 and libcivetweb*.so.1 (deps-build holds only
# configure-time files and stays off the library path).
DEPS="$ROOT/.carry/deps/usr"
DEPS_BUILD="$ROOT/.carry/deps-build/usr"
if [[ -d "$DEPS/lib/x86_64-linux-gnu" ]]; then
  export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export RP="$RINGPILOT_BUILD_DIR/bin/ringpilot"

gpu_build() {
  local extra=()
  # find_package(prometheus-cpp) (cmake/RingpilotDeps.cmake) finds the carried package, and
  # through it civetweb; CURL and ZLIB from the image where it has them (Ubuntu 24.04 does),
  # else from deps-build.
  if [[ -d "$DEPS/lib/x86_64-linux-gnu/cmake/prometheus-cpp" ]]; then
    local prefix="$DEPS"
    if [[ ! -f /usr/include/x86_64-linux-gnu/curl/curl.h || ! -f /usr/include/zlib.h ]]; then
      prefix+=";$DEPS_BUILD"
    fi
    extra+=(-DCMAKE_PREFIX_PATH="$prefix")
  fi
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$ROOT" -B "$RINGPILOT_BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DRINGPILOT_TESTS=OFF -DRINGPILOT_PYTHON="$(command -v python3)" \
    -DTORCH_CUDA_ARCH_LIST=9.0 "${extra[@]}" >"$RINGPILOT_BUILD_DIR.configure.log" 2>&1 ||
    { tail -30 "$RINGPILOT_BUILD_DIR.configure.log"; return 1; }
  cmake --build "$RINGPILOT_BUILD_DIR" --parallel "$(nproc)" --target ringpilot ringpilot-trainer ringpilot-commbench ringpilot_nccl_profiler
}

# json_field FILE KEY
json_field() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# rel_diff A B
rel_diff() { python3 -c "import sys;a,b=float(sys.argv[1]),float(sys.argv[2]);print(abs(a-b)/max(abs(a),abs(b),1e-30))" "$1" "$2"; }

# gpu_build_test TARGET...: the same build with the test suite configured, then TARGETs
# (GPU-only test cases skip on CPU machines; this runs them where a GPU is).
gpu_build_test() {
  gpu_build >/dev/null || return 1
  cmake -S "$ROOT" -B "$RINGPILOT_BUILD_DIR" -DRINGPILOT_TESTS=ON -DRINGPILOT_LINT=OFF >>"$RINGPILOT_BUILD_DIR.configure.log" 2>&1 ||
    { tail -30 "$RINGPILOT_BUILD_DIR.configure.log"; return 1; }
  cmake --build "$RINGPILOT_BUILD_DIR" --parallel "$(nproc)" --target "$@"
}
