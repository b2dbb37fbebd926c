# shellcheck shell=bash
# Sourced by tests/gpu/*.sh and bench/gpu_*.sh on a GPU machine: environment, the ringpilot
# binaries to use, and small helpers. Needs: python3 with torch (the GPU image's).
#
# Binaries, in this order:
#   1. a carried build (.carry/prebuilt/, packed on the CPU machine by
#      scripts/carry_gpu_build.sh): used when its MANIFEST's source digest equals this tree's
#      (scripts/source_digest.sh). A carry older than the tree is refused (the sourcing
#      script exits 1), since its binaries are not what the tree says. Starts in seconds.
#   2. RINGPILOT_GPU_BUILD=1, or no carry: a build here into build-gpu/ (gpu_build, about two
#      minutes on 16 cores), which needs Debian's prometheus-cpp and civetweb unpacked by
#      scripts/carry_gpu_deps.sh into .carry/deps and .carry/deps-build.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Never let NCCL, PyTorch or NVSHMEM use NVLink multicast on shared machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DEPS="$ROOT/.carry/deps/usr"
DEPS_BUILD="$ROOT/.carry/deps-build/usr"
PREBUILT="$ROOT/.carry/prebuilt"

# prepend_library_path DIR...: the DIRs, in this order, in front of LD_LIBRARY_PATH (each once).
prepend_library_path() {
  local i
  for ((i = $#; i >= 1; i--)); do
    case ":${LD_LIBRARY_PATH:-}:" in *":${!i}:"*) continue ;; esac
    export LD_LIBRARY_PATH="${!i}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
}

# The GPU machine's LibTorch, CUDA, cuDNN and NCCL: its torch wheel's library folders (found
# without importing torch, which takes seconds).
torch_library_dirs() {
  python3 -c '
import importlib.util, os, glob
sp = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin))
dirs = [os.path.join(sp, "torch", "lib")] + sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib")))
print(" ".join(d for d in dirs if os.path.isdir(d)))'
}

# use_prebuilt: checks the carry against this tree and points RINGPILOT_BUILD_DIR at it. The
# checks run once per call: their verdict is exported (RINGPILOT_PREBUILT_OK) to nested scripts.
use_prebuilt() {
  local want have commit torch_dirs
  want=$(sed -n 's/^source_digest //p' "$PREBUILT/MANIFEST")
  commit=$(sed -n 's/^commit //p' "$PREBUILT/MANIFEST")
  if [[ ${RINGPILOT_PREBUILT_OK:-} != "$want" ]]; then
    have=$("$ROOT/scripts/source_digest.sh" "$ROOT")
    if [[ $have != "$want" ]]; then
      echo "env.sh: the carried build (.carry/prebuilt, commit $commit) is older than this" \
        "tree (source digest ${have:0:12}, carried ${want:0:12}): run" \
        "scripts/carry_gpu_build.sh on the CPU machine before the call, or set" \
        "RINGPILOT_GPU_BUILD=1 to build here" >&2
      return 1
    fi
  fi
  read -r -a torch_dirs <<<"$(torch_library_dirs)"
  # Carried libraries first (Debian's sonames the image lacks), then torch's; nvJPEG's
  # fallback last, for an image whose CUDA libraries have none.
  prepend_library_path "$PREBUILT/lib" "${torch_dirs[@]}"
  case ":$LD_LIBRARY_PATH:" in
    *":$PREBUILT/lib-fallback:"*) ;;
    *) export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PREBUILT/lib-fallback" ;;
  esac
  export RINGPILOT_BUILD_DIR="$PREBUILT"
  if [[ ${RINGPILOT_PREBUILT_OK:-} != "$want" ]]; then
    local f unresolved version
    unresolved=$(for f in "$PREBUILT"/bin/* "$PREBUILT"/tests/*; do
      [[ -f $f ]] && ldd "$f" 2>/dev/null | awk -v f="${f##*/}" '/not found/ {print f ": " $1}'
    done | sort -u | paste -sd, -)
    if [[ -n $unresolved ]]; then
      echo "env.sh: carried binaries need libraries this machine lacks: $unresolved" >&2
      return 1
    fi
    version=$("$PREBUILT/bin/ringpilot" --version 2>&1 | head -1)
    if [[ $version != *"(git $commit)"* ]]; then
      echo "env.sh: the carried ringpilot says '$version', its MANIFEST commit $commit" >&2
      return 1
    fi
    echo "env.sh: carried build: $version, source digest ${want:0:12}" >&2
    export RINGPILOT_PREBUILT_OK="$want"
  fi
}

if [[ ${RINGPILOT_GPU_BUILD:-0} != 1 && -f "$PREBUILT/MANIFEST" ]]; then
  # A sourced file's return ends the sourcing script under set -e; exit where it is not.
  use_prebuilt || return 1 2>/dev/null || exit 1
else
  export RINGPILOT_BUILD_DIR="${RINGPILOT_BUILD_DIR:-$ROOT/build-gpu}"
  [[ $RINGPILOT_BUILD_DIR != "$PREBUILT" ]] || export RINGPILOT_BUILD_DIR="$ROOT/build-gpu"
  # Run time of a build here: libprometheus-cpp-*.so.1.0 and libcivetweb*.so.1 (deps-build
  # holds only configure-time files and stays off the library path).
  if [[ -d "$DEPS/lib/x86_64-linux-gnu" ]]; then
    prepend_library_path "$DEPS/lib/x86_64-linux-gnu"
  fi
fi
export RP="$RINGPILOT_BUILD_DIR/bin/ringpilot"

# gpu_build: the programs, built here unless the carried build is in use.
gpu_build() {
  [[ $RINGPILOT_BUILD_DIR != "$PREBUILT" ]] || return 0
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
  cmake --build "$RINGPILOT_BUILD_DIR" --parallel "$(nproc)" --target ringpilot ringpilot-trainer \
    ringpilot-commbench ringpilot_nccl_profiler ringpilot-bench-image-pipeline
}

# gpu_build_target TARGET...: more targets (benches) of the build in use; a carried build must
# already hold them.
gpu_build_target() {
  if [[ $RINGPILOT_BUILD_DIR == "$PREBUILT" ]]; then
    local t
    for t in "$@"; do
      [[ -x "$PREBUILT/bin/$t" ]] || { echo "env.sh: $t is not in the carried build" >&2; return 1; }
    done
    return 0
  fi
  cmake --build "$RINGPILOT_BUILD_DIR" --parallel "$(nproc)" --target "$@" >/dev/null
}

# json_field FILE KEY
json_field() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# rel_diff A B
rel_diff() { python3 -c "import sys;a,b=float(sys.argv[1]),float(sys.argv[2]);print(abs(a-b)/max(abs(a),abs(b),1e-30))" "$1" "$2"; }

# gpu_build_test TARGET...: test binaries with GPU cases (they skip on CPU machines). From the
# carry (scripts/carry_gpu_build.sh --tests "TARGET ..."), else the same build as gpu_build
# with the test suite configured.
gpu_build_test() {
  if [[ $RINGPILOT_BUILD_DIR == "$PREBUILT" ]]; then
    local t missing=()
    for t in "$@"; do [[ -x "$PREBUILT/tests/$t" ]] || missing+=("$t"); done
    ((${#missing[@]} == 0)) && return 0
    echo "env.sh: not in the carried build: ${missing[*]} (carry_gpu_build.sh --tests)" >&2
    return 1
  fi
  gpu_build >/dev/null || return 1
  cmake -S "$ROOT" -B "$RINGPILOT_BUILD_DIR" -DRINGPILOT_TESTS=ON -DRINGPILOT_LINT=OFF >>"$RINGPILOT_BUILD_DIR.configure.log" 2>&1 ||
    { tail -30 "$RINGPILOT_BUILD_DIR.configure.log"; return 1; }
  cmake --build "$RINGPILOT_BUILD_DIR" --parallel "$(nproc)" --target "$@"
}

# gpu_test_binary NAME: the path of a test binary gpu_build_test made or found.
# gpu_facts FILE: the GPU, driver, torch/torchvision/CUDA/NCCL versions, cores and the
# ringpilot build in use, into FILE, and printed (the head of every results file).
gpu_facts() {
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision",
torchvision.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
    # The kind is not one host: host decode and a host-bound peer move with its CPU.
    echo "cores $(nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)," \
      "$(awk '/^cpu MHz/ {s += $4; n++} END {if (n) printf "%.0f MHz mean now", s / n}' /proc/cpuinfo)"
    "$RP" --version
  } >"$1" 2>&1
  cat "$1"
}

gpu_test_binary() {
  if [[ $RINGPILOT_BUILD_DIR == "$PREBUILT" ]]; then
    echo "$PREBUILT/tests/$1"
  else
    find "$RINGPILOT_BUILD_DIR" -name "$1" -type f -executable | head -1
  fi
}
