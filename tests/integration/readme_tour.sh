#!/usr/bin/env bash
# The README's "A short tour", as a new user runs it on a host without a GPU, on the
# shipped examples/quickstart.yaml (metrics on the first free block at or above its
# port_base 18400, so a second job on the host does not collide):
#   (a) the tour in README.md still names every command this test runs;
#   (b) `validate` says valid, exit 0;
#   (c) `run ... --set train.steps=20 --run-dir D` trains 20 steps, exit 0, the start-up
#       lines name the ports it took, and rank 0 serves ringpilot_ series there;
#   (d) `run ... --run-dir D --set train.steps=400 &` resumes from step 20; `status D`
#       says running with a step; `logs D -n 2` prints rank 0's lines;
#   (e) `stop D`: the run ends with exit 79 and `stopped at step N by ringpilot stop`;
#   (f) `run D/job.yaml --run-dir D` resumes from that checkpoint (cut to a few more steps
#       here) and finishes, exit 0;
#   (g) `--version` names the commit.
# The tour's last two lines (a user's PyTorch script as a job, and `ringpilot exec` under
# mpirun) are tests/integration/user_program.sh and examples.sh.
#
# Usage: RINGPILOT_BUILD_DIR=build tests/integration/readme_tour.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rp_init readme_tour

readonly JOB_LIMIT_S=300 UP_WAIT_S=180 STOP_WAIT_S=120
readme=$RINGPILOT_SOURCE_DIR/README.md
example=$RINGPILOT_SOURCE_DIR/examples/quickstart.yaml
run=$RP_TMP/demo

# --- (a) the tour as the README has it ------------------------------------------------------
tour=$(awk '/^## A short tour/ {on = 1; next} on && /^```/ {if (++fences == 2) exit; next}
  on && fences == 1' "$readme")
missing=()
for want in "ringpilot validate examples/quickstart.yaml" \
  "ringpilot run examples/quickstart.yaml --set train.steps=20 --run-dir runs/demo" \
  "ringpilot run examples/quickstart.yaml --run-dir runs/demo --set train.steps=400 &" \
  "ringpilot status runs/demo" "ringpilot logs runs/demo" "ringpilot stop runs/demo" \
  "ringpilot run runs/demo/job.yaml --run-dir runs/demo" "ringpilot --version"; do
  grep -qF -- "$want" <<<"$tour" || missing+=("$want")
done
if ((${#missing[@]} == 0)); then
  rp_row "(a) README" "the tour names every command run here" PASS
else
  rp_row "(a) README" "the tour no longer says: ${missing[*]}" FAIL
fi

# --- (b) validate ------------------------------------------------------------------------------
rc=0
"$RINGPILOT" validate "$example" >"$RP_TMP/validate.out" 2>&1 || rc=$?
if ((rc == 0)); then
  rp_row "(b) validate" "exit 0: $(head -n 1 "$RP_TMP/validate.out")" PASS
else
  rp_row "(b) validate" "exit $rc" FAIL
  rp_tail "$RP_TMP/validate.out"
fi

# --- (c) 20 steps, metrics while it runs -------------------------------------------------------
timeout -k 20 "$JOB_LIMIT_S" "$RINGPILOT" run "$example" --set train.steps=20 --run-dir "$run" \
  >"$RP_TMP/first.out" 2>&1 &
first=$!
rp_on_exit "kill -TERM $first 2>/dev/null || true"
port=""
scraped=0
deadline=$((SECONDS + UP_WAIT_S))
while ((SECONDS < deadline)) && kill -0 "$first" 2>/dev/null; do
  [[ -z $port ]] && port=$(grep -oE 'metrics on 127\.0\.0\.1:[0-9]+' "$RP_TMP/first.out" | head -n 1 | grep -oE '[0-9]+$' || true)
  if [[ -n $port ]] && python3 - "$port" 2>/dev/null <<'PY'; then
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=2).read().decode()
sys.exit(0 if "ringpilot_steps_total" in body else 1)  # refused until the rank listens
PY
    scraped=1
    break
  fi
  sleep 0.5
done
rc=0
wait "$first" || rc=$?
steps=$(rp_json "$run/summary.json" steps)
if ((rc == 0)) && [[ $steps == 20 ]]; then
  rp_row "(c) run 20 steps" "exit 0, summary.json steps 20" PASS
else
  rp_row "(c) run 20 steps" "exit $rc, summary.json steps $steps" FAIL
  rp_tail "$RP_TMP/first.out"
fi
if ((scraped == 1)); then
  rp_row "(c) metrics" "rank 0 served ringpilot_steps_total on the announced port $port" PASS
else
  rp_row "(c) metrics" "no ringpilot_ series on the announced port '${port}'" FAIL
fi

# --- (d) 400 steps in the background: status, logs ---------------------------------------------
timeout -k 20 "$JOB_LIMIT_S" "$RINGPILOT" run "$example" --run-dir "$run" --set train.steps=400 \
  >"$RP_TMP/second.out" 2>&1 &
second=$!
rp_on_exit "kill -TERM $second 2>/dev/null || true"
step_of_log() { { grep -oE 'step [0-9]+/400' "$run/logs/rank-0.log" 2>/dev/null || true; } | tail -n 1 | tr -dc 0-9 | sed 's/400$//'; }
deadline=$((SECONDS + UP_WAIT_S))
while ((SECONDS < deadline)) && kill -0 "$second" 2>/dev/null; do
  s=$(step_of_log)
  [[ -n $s ]] && ((s >= 23)) && break
  sleep 0.5
done
status=$("$RINGPILOT" status "$run" 2>&1 || true)
if grep -qE '^state +running' <<<"$status" && grep -qE '^step +[0-9]+/400' <<<"$status"; then
  rp_row "(d) status" "running, $(grep -m1 -oE '^step +[0-9]+/400' <<<"$status" | tr -s ' ')" PASS
else
  rp_row "(d) status" "not running with a step: $(head -n 3 <<<"$status" | tr '\n' ' ')" FAIL
fi
logs=$("$RINGPILOT" logs "$run" -n 2 2>&1 || true)
if [[ $(grep -c . <<<"$logs") -eq 2 ]]; then
  rp_row "(d) logs -n 2" "two lines of rank 0's log" PASS
else
  rp_row "(d) logs -n 2" "got: $(tr '\n' ' ' <<<"$logs" | cut -c1-200)" FAIL
fi
if grep -q "resum" "$RP_TMP/second.out" "$run/logs/rank-0.log" 2>/dev/null; then
  rp_row "(d) resume" "the 400-step run resumed the directory's step-20 checkpoint" PASS
else
  rp_row "(d) resume" "no resume line in its output or rank 0's log" FAIL
fi

# --- (e) stop ----------------------------------------------------------------------------------
"$RINGPILOT" stop "$run" >"$RP_TMP/stop.out" 2>&1 || true
rc=0
deadline=$((SECONDS + STOP_WAIT_S))
while ((SECONDS < deadline)) && kill -0 "$second" 2>/dev/null; do sleep 0.5; done
wait "$second" || rc=$?
stopped=$(grep -oE 'stopped at step [0-9]+ by ringpilot stop' "$RP_TMP/second.out" | tail -n 1 || true)
if ((rc == 79)) && [[ -n $stopped ]]; then
  rp_row "(e) stop" "exit 79: $stopped" PASS
else
  rp_row "(e) stop" "exit $rc, stop line '${stopped}'" FAIL
  rp_tail "$RP_TMP/second.out"
fi

# --- (f) resume from the stop's checkpoint ------------------------------------------------------
k=$(grep -oE '[0-9]+' <<<"$stopped" | head -n 1)
k=${k:-0}
rp_run "$JOB_LIMIT_S" "$RP_TMP/third.out" "$run" "$run/job.yaml" --set "train.steps=$((k + 4))"
steps=$(rp_json "$run/summary.json" steps)
if [[ $RP_RC -eq 0 && $steps == $((k + 4)) ]] && ((k > 20)); then
  rp_row "(f) resume" "from step $k to $((k + 4)), exit 0" PASS
else
  rp_row "(f) resume" "exit $RP_RC, summary.json steps $steps, stopped at $k" FAIL
  rp_tail "$RP_TMP/third.out"
fi

# --- (g) --version -----------------------------------------------------------------------------
version=$("$RINGPILOT" --version 2>&1 | head -n 1)
if grep -qE '^ringpilot [0-9.]+ \(git [0-9a-f]+' <<<"$version"; then
  rp_row "(g) --version" "$version" PASS
else
  rp_row "(g) --version" "got '$version'" FAIL
fi
rp_finish
