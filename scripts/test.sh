#!/usr/bin/env bash
# Set up, build, and run every test (unit, integration with real mpirun, Prometheus,
# promtool, formatting). Exit status is ctest's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
cd "${RINGPILOT_BUILD_DIR:-$ROOT/build}"
# Integration tests start several MPI ranks each and are marked RUN_SERIAL.
ctest --output-on-failure --timeout 900 -j "${RINGPILOT_TEST_JOBS:-2}" "$@"
