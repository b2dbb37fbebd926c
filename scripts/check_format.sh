#!/usr/bin/env bash
# Fails if any project C++ file differs from clang-format's output (.clang-format).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' 2>/dev/null || true)
((${#files[@]})) || { echo "check_format: no files"; exit 1; }
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check_format: $f is not clang-formatted (run: clang-format -i $f)"
    bad=1
  fi
done
((bad == 0)) && echo "check_format: ${#files[@]} files ok"
exit $bad
