#!/usr/bin/env bash
# Configure and build into build/ (ccache + a shared LibTorch precompiled header).
# Extra arguments go to cmake's configure step, e.g. -DRINGPILOT_TRAINER=OFF for a
# launcher-only build on a login node.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RINGPILOT_BUILD_DIR:-$ROOT/build}"
# ccache must see through the precompiled header and __DATE__ to hit.
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Hits across checkouts (CI clones elsewhere): hash paths relative to the repo.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
JOBS="${RINGPILOT_JOBS:-$(nproc)}"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# setup.sh's venv elsewhere (RINGPILOT_VENV): CMake looks in ROOT/.venv unless told.
PY=()
[[ -n ${RINGPILOT_VENV:-} ]] && PY=(-DRINGPILOT_PYTHON="$RINGPILOT_VENV/bin/python")
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${PY[@]}" "$@"
elif (($#)); then
  cmake -S "$ROOT" -B "$BUILD" "$@"
fi
cmake --build "$BUILD" --parallel "$JOBS"
echo "build: ok ($BUILD/bin: $(ls "$BUILD/bin" | tr '\n' ' '))"
