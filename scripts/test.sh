#!/usr/bin/env bash
# Set up, build, and run every test (unit, integration with real mpirun, Prometheus,
# promtool, formatting), then the sanitizer build's (scripts/fuzz.sh: unit tests under
# ASan+UBSan, fuzzing). Exit status: non-zero when either failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
cd "${RINGPILOT_BUILD_DIR:-$ROOT/build}"
# Integration tests start several MPI ranks each and are marked RUN_SERIAL.
rc=0
ctest --output-on-failure --timeout 900 -j "${RINGPILOT_TEST_JOBS:-2}" "$@" || rc=$?
# The sanitizer build: torch-free unit tests under ASan+UBSan and every fuzz target for
# RINGPILOT_FUZZ_SECONDS (20 here, to keep CI within its time; scripts/fuzz.sh alone
# fuzzes 60 s a target). Not with a selection of tests (arguments), nor with
# RINGPILOT_SKIP_FUZZ=1.
if (($# == 0)) && [[ ${RINGPILOT_SKIP_FUZZ:-0} != 1 ]]; then
  "$ROOT/scripts/fuzz.sh" --seconds "${RINGPILOT_FUZZ_SECONDS:-20}" || rc=$?
fi
exit "$rc"
