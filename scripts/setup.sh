#!/usr/bin/env bash
# Idempotent dependency install: Debian packages, then a Python venv under the repo
# holding the pinned torch wheel (LibTorch inside; CMake finds it via
# torch.utils.cmake_prefix_path).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH_VERSION="${RINGPILOT_TORCH_VERSION:-2.11.0}"
TORCHVISION_VERSION="${RINGPILOT_TORCHVISION_VERSION:-0.26.0}"  # the torchvision of that torch
VENV="${RINGPILOT_VENV:-$ROOT/.venv}"

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  openmpi-bin libopenmpi-dev
  libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  libhwloc-dev hwloc
  libcivetweb-dev prometheus-cpp-dev libssl-dev
  libgtest-dev libgmock-dev
  clang-format shellcheck
  clang
  iproute2 procps
  prometheus
  dataset-fashion-mnist
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libstb-dev
  libsentencepiece-dev sentencepiece
  python3-venv
  slurm-wlm munge
)

need_apt=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # The Debian prometheus package's postinst starts a daemon where it can (tests start
  # their own): stop only a prometheus that this install started, never one that was
  # already running on the machine.
  before="$(pgrep -x prometheus || true)"
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  for pid in $(pgrep -x prometheus || true); do
    grep -qx "$pid" <<<"$before" || $SUDO kill "$pid" 2>/dev/null || true
  done
fi

# libFuzzer and the sanitizer runtimes of clang (scripts/fuzz.sh): Debian 12 and Ubuntu
# 24.04 package them apart from clang (libclang-rt-dev), older releases inside
# libclang-common-N-dev, which clang already brought.
rt="$(clang++ -print-file-name="libclang_rt.fuzzer-$(uname -m).a" 2>/dev/null || true)"
if [[ ! -f $rt ]]; then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup: installing clang's fuzzer and sanitizer runtimes (libclang-rt-dev)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache show libclang-rt-dev >/dev/null 2>&1; then $SUDO apt-get update -qq; fi
  $SUDO apt-get install -y -qq --no-install-recommends libclang-rt-dev >/dev/null
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup: creating venv $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$TORCH_VERSION' else 1)" 2>/dev/null; then
  echo "setup: installing torch==$TORCH_VERSION into $VENV (LibTorch for the trainer)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" numpy
fi
# The reference implementations `ringpilot export` is checked against
# (tests/integration/export_models.sh): torchvision built for this torch, transformers.
if ! "$VENV/bin/python" -c "import torchvision,transformers,safetensors,sys; sys.exit(0 if torchvision.__version__.split('+')[0]=='$TORCHVISION_VERSION' else 1)" 2>/dev/null; then
  echo "setup: installing torchvision==$TORCHVISION_VERSION, transformers, safetensors into $VENV"
  "$VENV/bin/python" -m pip install -q "torchvision==$TORCHVISION_VERSION" transformers safetensors
fi
# nvJPEG headers for the GPU image pipeline (data/cuda/): a CUDA toolkit without nvJPEG
# (this one's) compiles it against the wheel's, pinned to the toolkit's 13.0 release so it
# declares nothing the GPU machines' nvJPEG lacks.
if [[ -x /usr/local/cuda/bin/nvcc && ! -f /usr/local/cuda/include/nvjpeg.h ]] &&
  ! "$VENV/bin/python" -c "import importlib.metadata as m; m.version('nvidia-nvjpeg')" >/dev/null 2>&1; then
  echo "setup: installing nvidia-nvjpeg==13.0.0.40 into $VENV (nvjpeg.h for the GPU image pipeline)"
  "$VENV/bin/python" -m pip install -q --no-deps "nvidia-nvjpeg==13.0.0.40"
fi
echo "setup: ok (torch $("$VENV/bin/python" -c 'import torch;print(torch.__version__)'))"
