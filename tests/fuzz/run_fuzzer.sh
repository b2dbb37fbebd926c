#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time: ctest fuzz.<name> (scripts/fuzz.sh).
#
#   tests/fuzz/run_fuzzer.sh FUZZER SEEDS WORK_DIR SECONDS [DICT]
#
# SEEDS (tests/fuzz/corpus/<name>, checked in) is only read: the inputs libFuzzer finds
# go to WORK_DIR/corpus, which later runs on this machine start from. A crash, a leak, an
# input that runs over 25 s or needs over 2 GB fails the run; its reproducer stays in
# WORK_DIR/artifacts/ and is printed (path, size, base64 up to 4 KB, the command that
# replays it), so a CI log alone is enough to reproduce it. A fixed finding's reproducer
# belongs in SEEDS as regression-<what> (fuzz_seeds.<name> replays it in every build).
# DICT (tests/fuzz/<name>.dict): tokens libFuzzer splices into inputs. Scratch files of the
# targets go to /dev/shm where it is writable (TMPDIR).
set -euo pipefail

if (($# != 4 && $# != 5)); then
  echo "usage: run_fuzzer.sh FUZZER SEEDS WORK_DIR SECONDS [DICT]" >&2
  exit 2
fi
fuzzer=$1 seeds=$2 work=$3 seconds=$4 dict=${5:-}
dict_arg=()
if [[ -n $dict ]]; then
  [[ -f $dict ]] || { echo "run_fuzzer.sh: no dictionary $dict" >&2; exit 2; }
  dict_arg=(-dict="$dict")
fi
# The targets' scratch files (fuzz_util.h), in memory where /dev/shm is writable; removed
# on exit, also after a crash that skipped the target's own clean-up.
scratch=$(mktemp -d "$([[ -w /dev/shm ]] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/ringpilot-fuzz-run.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
[[ -x $fuzzer ]] || { echo "run_fuzzer.sh: $fuzzer is not an executable" >&2; exit 2; }
[[ -d $seeds ]] || { echo "run_fuzzer.sh: no seed directory $seeds" >&2; exit 2; }
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "run_fuzzer.sh: SECONDS must be a positive integer" >&2; exit 2; }
name=$(basename "$fuzzer")
mkdir -p "$work/corpus" "$work/artifacts"
# Reproducers of an earlier failed run stay until they are looked at; only this run's
# count.
stamp=$work/.start
: >"$stamp"

rc=0
# -timeout: one input over 25 s is a hang; -rss_limit_mb: a hostile header must not make
# a reader allocate gigabytes; -print_final_stats: executions and coverage for the log.
"$fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
  "${dict_arg[@]}" -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" >"$work/log" 2>&1 || rc=$?
tail -n 25 "$work/log"

mapfile -t found < <(find "$work/artifacts" -type f -newer "$stamp" | sort)
if ((rc == 0 && ${#found[@]} == 0)); then
  stats=$(grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$work/log" | tr '\n' ' ')
  echo "$name: no finding in ${seconds} s ($stats; corpus $(find "$work/corpus" -type f | wc -l) inputs)"
  exit 0
fi
echo "$name: FAILED (exit $rc); full log: $work/log" >&2
for f in "${found[@]}"; do
  size=$(stat -c %s "$f")
  echo "reproducer: $f ($size bytes); replay: $fuzzer $f" >&2
  if ((size <= 4096)); then
    echo "base64: $(base64 -w0 "$f")" >&2
  fi
done
exit 1
