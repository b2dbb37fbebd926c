#!/usr/bin/env bash
# Prints one SHA-256 over every build input of the tree (C++/CUDA sources and headers, CMake
# files), by path and content: the identity of what a build was made from. It needs only
# find, sort and sha256sum, so the GPU machine, whose copy of the tree has no .git, computes
# the same value as this machine: scripts/carry_gpu_build.sh records it beside the carried
# binaries and tests/gpu/env.sh refuses them when the tree it runs in gives another.
#   scripts/source_digest.sh [ROOT]          the digest
#   scripts/source_digest.sh --list [ROOT]   the files it covers, one per line
set -euo pipefail
list=0
if [[ ${1:-} == --list ]]; then
  list=1
  shift
fi
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT"
# Hidden folders (.git, .venv, .carry, .ccache) and build trees hold no inputs; runs/ holds
# run directories.
files() {
  find . -mindepth 1 \( -path './.*' -o -path './build*' -o -path ./runs \) -prune -o -type f \
    \( -name '*.cpp' -o -name '*.cc' -o -name '*.h' -o -name '*.hpp' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.cmake' -o -name 'CMakeLists.txt' -o -name '*.in' \) \
    -print | LC_ALL=C sort
}
if ((list)); then
  files
  exit 0
fi
# Each line "content-hash  path", then one hash over them all.
files | while IFS= read -r f; do sha256sum "$f"; done | sha256sum | cut -d' ' -f1
