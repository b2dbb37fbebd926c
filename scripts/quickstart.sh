#!/usr/bin/env bash
# Set up, build and run the quickstart job: 2 MPI ranks training resnet18-cifar with
# ringpilot's gradient reducer (CPU where there is no GPU), with a live /metrics
# endpoint per rank. Extra arguments go to `ringpilot run` (e.g. --set train.steps=20).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
BUILD="${RINGPILOT_BUILD_DIR:-$ROOT/build}"
cd "$ROOT"
echo "quickstart: while it runs, try: curl -s http://127.0.0.1:18400/metrics | grep ringpilot_"
exec "$BUILD/bin/ringpilot" run examples/quickstart.yaml "$@"
