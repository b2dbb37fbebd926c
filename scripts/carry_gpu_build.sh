#!/usr/bin/env bash
# Packs this machine's build for the GPU machine, so a GPU call starts in seconds instead of
# building there for two minutes: the stripped binaries (ringpilot, ringpilot-trainer,
# ringpilot-commbench, the NCCL profiler plugin, the image benches and, with --tests,
# test binaries that have GPU cases), and the shared libraries they need that the GPU image
# lacks, into the git-ignored .carry/prebuilt/:
#   bin/       the programs (ringpilot finds the trainer and the plugin beside itself)
#   tests/     test binaries (--tests)
#   lib/       Debian's libraries they link (yaml-cpp 0.7, prometheus-cpp, civetweb,
#              TurboJPEG, libpng, SentencePiece, ...), copied from this machine by soname
#   lib-fallback/  libnvjpeg from the nvidia-nvjpeg wheel the build linked, used only where
#              the GPU machine's own CUDA libraries have none (last on the library path)
#   MANIFEST   commit, source digest (scripts/source_digest.sh), build host and time, files
# The build (scripts/build.sh, build/) already compiles the CUDA code for sm_80 and sm_90.
# Not carried: glibc, libstdc++ and libgcc_s (the image's are newer), MPI and what it loads
# (the image's mpirun must match its libmpi), LibTorch, CUDA, cuDNN and NCCL (the GPU
# machine's torch wheel; tests/gpu/env.sh puts them on the library path), the NVIDIA driver.
# tests/gpu/env.sh uses the carry when present and refuses it when the working tree's
# source digest differs from the MANIFEST's (a build older than the tree).
#
# Usage: scripts/carry_gpu_build.sh [--tests "NAME ..."]
#   --tests     test executables to carry too (names of build/tests/* binaries)
# It builds first (seconds when build/ is up to date), so what it packs is the tree's.
# Then name .carry in the device call's carry list; the GPU scripts source tests/gpu/env.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RINGPILOT_BUILD_DIR:-$ROOT/build}"
OUT="$ROOT/.carry/prebuilt"
TESTS=()
while (($#)); do
  case $1 in
    --tests) read -r -a TESTS <<<"$2"; shift 2 ;;
    *) echo "usage: $0 [--tests \"NAME ...\"]" >&2; exit 2 ;;
  esac
done
die() { echo "carry_gpu_build: $*" >&2; exit 1; }
[[ -f "$BUILD/CMakeCache.txt" ]] || die "no build in $BUILD (run scripts/build.sh first)"
grep -q '^CMAKE_CUDA_COMPILER:.*nvcc' "$BUILD/CMakeCache.txt" ||
  die "$BUILD was configured without CUDA: its binaries cannot use a GPU"

PROGRAMS=(ringpilot ringpilot-trainer ringpilot-commbench ringpilot-bench-image-pipeline
  ringpilot-bench-host-decode)
PLUGIN=libringpilot-nccl-profiler.so
digest_before=$("$ROOT/scripts/source_digest.sh" "$ROOT")
cmake --build "$BUILD" --target "${PROGRAMS[@]}" ringpilot_nccl_profiler "${TESTS[@]}" >/dev/null ||
  die "building the carried targets failed (cmake --build $BUILD)"

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/lib-fallback" "$OUT/tests"
files=()
for p in "${PROGRAMS[@]}"; do
  [[ -x "$BUILD/bin/$p" ]] || die "$BUILD/bin/$p missing"
  files+=("$BUILD/bin/$p")
done
plugin=$(find "$BUILD/bin" "$BUILD/lib" -maxdepth 1 -name "$PLUGIN" 2>/dev/null | head -1)
[[ -n $plugin ]] || die "$PLUGIN missing in $BUILD/bin or $BUILD/lib"
files+=("$plugin")
for t in "${TESTS[@]}"; do
  bin=$(find "$BUILD/tests" -name "$t" -type f -executable | head -1)
  [[ -n $bin ]] || die "test binary $t not found under $BUILD/tests"
  files+=("$bin")
done

# The program's own name decides where it goes: tests/ for test binaries, bin/ otherwise
# (the plugin beside ringpilot, where `ringpilot exec` looks for it).
for f in "${files[@]}"; do
  dest="$OUT/bin"
  [[ $f == "$BUILD/tests/"* ]] && dest="$OUT/tests"
  strip --strip-unneeded -o "$dest/$(basename "$f")" "$f"
done

# Libraries: what the dynamic linker resolves here for every carried file, minus what the
# GPU machine must supply itself.
venv_libs=$("$ROOT/.venv/bin/python" - <<'EOF' 2>/dev/null || true
import importlib.util, os, glob
sp = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin))
dirs = [os.path.join(sp, "torch", "lib")] + glob.glob(os.path.join(sp, "nvidia", "*", "lib"))
print(":".join(d for d in dirs if os.path.isdir(d)))
EOF
)
mpi_closure=$(ldd "$(find /usr/lib /lib -name 'libmpi.so.40' 2>/dev/null | head -1)" 2>/dev/null |
  awk '/=>/ {print $1}' || true)
never_carry() {  # soname
  case $1 in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | \
      libutil.so* | libresolv.so* | libstdc++.so* | libgcc_s.so* | libz.so* | libssl.so* | \
      libcrypto.so* | libmpi* | libopen-* | libcuda.so* | libnvidia-* | libgomp.so*)
      return 0 ;;
  esac
  grep -qx "$1" <<<"$mpi_closure"
}
missing=()
while read -r soname path; do
  [[ -n $soname ]] || continue
  if [[ $path == "not" ]]; then
    missing+=("$soname")
    continue
  fi
  never_carry "$soname" && continue
  if [[ -n $venv_libs && $path == "$ROOT/.venv/"* ]]; then
    # The GPU machine's torch wheel brings LibTorch, CUDA, cuDNN and NCCL; nvJPEG only
    # where its CUDA libraries include it.
    [[ $soname == libnvjpeg.so* ]] && cp -L "$path" "$OUT/lib-fallback/$soname"
    continue
  fi
  cp -L "$path" "$OUT/lib/$soname"
done < <(for f in "$OUT"/bin/* "$OUT"/tests/*; do
  [[ -f $f ]] && LD_LIBRARY_PATH="$venv_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f"
done | awk '/=>/ {print $1, $3}' | sort -u)
((${#missing[@]} == 0)) || die "not found here by ldd: ${missing[*]}"
strip --strip-unneeded "$OUT"/lib/* 2>/dev/null || true

digest_after=$("$ROOT/scripts/source_digest.sh" "$ROOT")
[[ $digest_before == "$digest_after" ]] ||
  die "the sources changed while building or packing (an editor wrote a file): run it again"
# The commit the binaries name (`ringpilot --version`), which env.sh checks them against.
commit=$("$OUT/bin/ringpilot" --version 2>/dev/null | sed -n '1s/.*(git \(.*\)).*/\1/p' || true)
[[ -n $commit ]] || die "$OUT/bin/ringpilot --version names no commit"
{
  echo "commit $commit"
  echo "source_digest $digest_after"
  echo "built_on $(hostname) $(uname -m)"
  echo "packed_at $(date -u +%FT%TZ)"
  echo "cuda_archs $(sed -n 's/^RINGPILOT_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
  (cd "$OUT" && find bin tests lib lib-fallback -type f | LC_ALL=C sort | sed 's/^/file /')
} >"$OUT/MANIFEST"
echo "carry_gpu_build: $OUT ($(du -sh "$OUT" | cut -f1)) of commit $commit, source digest ${digest_after:0:12}"
