#!/usr/bin/env bash
# Unpacks the Debian packages the GPU image lacks into .carry/ (git-ignored), which the GPU
# runner carries and tests/gpu/env.sh uses:
#   .carry/deps/usr        prometheus-cpp 1.0.1 (core, pull, push, -dev) and civetweb 1.15
#                          (libs, -dev, and the server binary its CMake package names),
#                          libjpeg-turbo's TurboJPEG, libpng and stb_image_resize (data/'s
#                          image datasets), SentencePiece 0.1.97 (libsentencepiece0, -dev) for
#                          `ringpilot data tokenize`: built against, and loaded at run time
#                          (LD_LIBRARY_PATH)
#   .carry/deps-build/usr  libcurl and zlib development files: prometheus-cpp's CMake package
#                          looks for them at configure time (find_dependency CURL, ZLIB); used
#                          only on an image without them (the Ubuntu 24.04 GPU image has them),
#                          never on LD_LIBRARY_PATH; prometheus-cpp::push (curl) is never linked
# OpenSSL (trainer/checkpoint/sha256.cpp) is the image's own: libssl-dev is there.
# Run it here (it needs apt and the network), then carry .carry with the GPU command.
# Packages and versions unpacked are listed in .carry/deps/VERSIONS.
#
# Usage: scripts/carry_gpu_deps.sh [--force]   (--force: unpack again even if present)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.carry/deps"
DEPS_BUILD="$ROOT/.carry/deps-build"
RUNTIME_PACKAGES=(libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0
  prometheus-cpp-dev libcivetweb1 libcivetweb-dev civetweb
  libturbojpeg0 libturbojpeg0-dev libpng16-16 libpng-dev libstb-dev
  libsentencepiece0 libsentencepiece-dev)
BUILD_PACKAGES=(libcurl4-openssl-dev libcurl4 zlib1g-dev zlib1g)

force=0
case "${1:-}" in
  --force) force=1 ;;
  "") ;;
  *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac
if ((!force)) && [[ -f "$DEPS/VERSIONS" && -d "$DEPS/usr/lib/x86_64-linux-gnu/cmake/prometheus-cpp" &&
  -f "$DEPS/usr/include/turbojpeg.h" && -f "$DEPS/usr/include/sentencepiece_processor.h" ]]; then
  echo "carry_gpu_deps: $DEPS already unpacked (--force to redo):"
  cat "$DEPS/VERSIONS"
  exit 0
fi
for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "carry_gpu_deps: '$tool' not found (a Debian host)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/carry_gpu_deps.XXXXXX")
trap 'rm -rf "$work"' EXIT
# apt-get download writes into the current directory.
(cd "$work" && apt-get download "${RUNTIME_PACKAGES[@]}" "${BUILD_PACKAGES[@]}") || {
  echo "carry_gpu_deps: apt-get download failed (apt-get update first?)" >&2
  exit 1
}

rm -rf "$DEPS" "$DEPS_BUILD"
mkdir -p "$DEPS" "$DEPS_BUILD"
unpack() {  # unpack DEST PACKAGE...
  local dest=$1 pkg deb
  shift
  for pkg in "$@"; do
    deb=$(find "$work" -maxdepth 1 -name "${pkg}_*.deb" | head -1)
    [[ -n $deb ]] || { echo "carry_gpu_deps: no .deb for $pkg" >&2; exit 1; }
    dpkg-deb -x "$deb" "$dest"
    printf '%s %s\n' "$pkg" "$(dpkg-deb -f "$deb" Version)" >>"$DEPS/VERSIONS"
  done
}
unpack "$DEPS" "${RUNTIME_PACKAGES[@]}"
unpack "$DEPS_BUILD" "${BUILD_PACKAGES[@]}"
# zlib1g's .deb has its library under /lib, and zlib1g-dev's libz.so points there by an
# absolute path: bring the library into the prefix and make such links relative, so they
# resolve on a host whose own zlib differs.
if [[ -d "$DEPS_BUILD/lib/x86_64-linux-gnu" ]]; then
  cp -a "$DEPS_BUILD/lib/x86_64-linux-gnu/." "$DEPS_BUILD/usr/lib/x86_64-linux-gnu/"
fi
for dir in "$DEPS/usr/lib/x86_64-linux-gnu" "$DEPS_BUILD/usr/lib/x86_64-linux-gnu"; do
  while IFS= read -r link; do
    target=$(readlink "$link")
    [[ $target == /* && -e "$(dirname "$link")/$(basename "$target")" ]] &&
      ln -sfn "$(basename "$target")" "$link"
  done < <(find "$dir" -maxdepth 1 -type l)
done
for f in "$DEPS/usr/lib/x86_64-linux-gnu/cmake/prometheus-cpp/prometheus-cpp-config.cmake" \
  "$DEPS/usr/lib/x86_64-linux-gnu/cmake/civetweb/civetweb-config.cmake" \
  "$DEPS/usr/bin/civetweb" "$DEPS/usr/include/turbojpeg.h" "$DEPS/usr/include/stb/stb_image_resize.h" \
  "$DEPS/usr/lib/x86_64-linux-gnu/libturbojpeg.so" "$DEPS_BUILD/usr/include/x86_64-linux-gnu/curl/curl.h" \
  "$DEPS_BUILD/usr/include/zlib.h" "$DEPS_BUILD/usr/lib/x86_64-linux-gnu/libz.so" \
  "$DEPS_BUILD/usr/lib/x86_64-linux-gnu/libcurl.so"; do
  [[ -e $f ]] || { echo "carry_gpu_deps: $f missing after unpacking" >&2; exit 1; }
done
echo "carry_gpu_deps: unpacked into $DEPS ($(du -sh "$DEPS" | cut -f1)) and $DEPS_BUILD ($(du -sh "$DEPS_BUILD" | cut -f1)):"
cat "$DEPS/VERSIONS"
