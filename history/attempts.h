// RUN_DIR/attempts/N/ (N = RINGPILOT_ATTEMPT, 1-based): the history of a job's attempts.
// Rank 0 of the trainer writes attempts/N/summary.json when the attempt starts, at every
// checkpoint and at its end; the launcher writes attempts/N/failure.json for an attempt
// that failed and was restarted (the job's final failure is RUN_DIR/failure.json). Each
// `ringpilot run` of a directory numbers its attempts from 1; the earlier runs' attempts/
// are kept as attempts.prev.1, attempts.prev.2, ..., attempts.prev (oldest first). From
// them: which steps each attempt of each run trained, how it ended, and the combined view
// over every attempt of every run that RUN_DIR/summary.json carries and `ringpilot
// diagnose` reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringpilot::history {

/// `path`.prev: where a run directory keeps the newest earlier version of a file (job.yaml,
/// summary.json, failure.json) or of attempts/ when a later `ringpilot run` replaces it;
/// older versions are `path`.prev.N, N from 1 for the oldest.
std::string PrevPath(const std::string& path);
/// `path`.prev.N with N one past the highest that exists (1 when none): where `path`.prev
/// moves before a newer version takes its place, so that N keeps the versions' order even
/// after some were deleted.
std::string NextOlderPath(const std::string& path);
/// The kept versions of `path` that exist, oldest first: `path`.prev.N by N, then
/// `path`.prev.
std::vector<std::string> PrevPaths(const std::string& path);

/// RUN_DIR/attempts: the attempts of the last `ringpilot run` of RUN_DIR.
std::string AttemptsDir(const std::string& run_dir);
/// The attempts directory of every run of RUN_DIR that left one, oldest first: the earlier
/// runs' (PrevPaths(AttemptsDir(run_dir))), then AttemptsDir's when it exists. Run k (from
/// 1) is the k-th; runs of versions that kept no attempts/ are not counted.
std::vector<std::string> RunAttemptsDirs(const std::string& run_dir);

/// RUN_DIR/attempts/N.
std::string AttemptDir(const std::string& run_dir, int attempt);
/// RUN_DIR/attempts/N/summary.json.
std::string AttemptSummaryPath(const std::string& run_dir, int attempt);
/// RUN_DIR/attempts/N/failure.json.
std::string AttemptFailurePath(const std::string& run_dir, int attempt);
/// RUN_DIR/attempts/N/rank-R.stats.json: rank R's step statistics of attempt N (the format
/// of logs/rank-R.stats.json, which only the last finished attempt writes).
std::string AttemptRankStatsPath(const std::string& run_dir, int attempt, int rank);

/// How an attempt ended, as far as the run directory tells.
inline constexpr const char* kRunning = "running";      ///< live, or ended without a word
inline constexpr const char* kCompleted = "completed";  ///< trained every step
inline constexpr const char* kPreempted = "preempted";  ///< checkpointed and stopped
inline constexpr const char* kFailed = "failed";        ///< a failure.json names it
/// Ended without a word, known to be over: another attempt came after it (an earlier
/// run's last attempt killed with its launcher), or its launcher has stopped.
inline constexpr const char* kInterrupted = "interrupted";

/// What one attempt trained. Steps are numbered from 1, as in the progress lines: an
/// attempt resumed from the checkpoint of step S trains S+1, S+2, ...
struct AttemptRecord {
  /// Which `ringpilot run` of the directory it belongs to: the index (from 1) of its
  /// directory in RunAttemptsDirs.
  int run = 1;
  int attempt = 0;  ///< its number in its run (RINGPILOT_ATTEMPT)
  /// Its record's directory relative to RUN_DIR: attempts/N, attempts.prev/N, ...
  std::string dir;
  /// First step it trained (resumed_from_step + 1); unknown when it left no summary.json
  /// (an attempt that failed before its first step, or a run of an older version).
  std::optional<int64_t> first_step;
  /// Last step it is known to have completed (first_step - 1: none). A failed attempt's is
  /// the later of its summary.json's (its last checkpoint) and its failure.json heartbeats'
  /// (the step the most advanced rank was in: the steps before it were done by all).
  int64_t last_step = 0;
  std::string outcome = kRunning;
  std::optional<double> steps_per_second;  ///< timed steps / timed seconds, when measured
  std::string failure;                     ///< failed: the first failing rank's message
  double started_unix = 0;                 ///< when rank 0 began it; 0 unknown

  /// last_step - first_step + 1 (0 when unknown or none).
  int64_t StepsTrained() const;
};

/// Fields of attempts/N/summary.json while the attempt runs: rank 0 rewrites it at the
/// start, at each checkpoint and at the end (where the trainer adds the fields of
/// summary.json). `timed_steps`/`timed_seconds` give steps_per_second (null when 0).
struct AttemptProgress {
  int attempt = 1;
  int64_t resumed_from_step = 0;  ///< steps done before it (its first step is this + 1)
  int64_t last_step = 0;          ///< last step completed (resumed_from_step: none)
  std::string outcome = kRunning;
  int64_t timed_steps = 0;
  double timed_seconds = 0;
  double started_unix = 0;
};

/// {attempt, outcome, first_step, last_step, steps_trained, steps_per_second, started,
/// started_unix, updated}: `started`/`updated` in log time (base::FormatLogTime).
nlohmann::json AttemptProgressJson(const AttemptProgress& p);

/// Every attempt of every run of RUN_DIR, oldest run first (RunAttemptsDirs), each run's by
/// N: the attempts/N/ with a summary.json or a failure.json. A final failure (the root
/// failure.json, or a failure.json.prev[.N] that a later run's final failure set aside)
/// marks failed the attempt that started last before it was written, when that attempt is
/// the last of its run, has the number the failure names and its record still says
/// running: so an earlier run's last attempt reads as failed too. A last attempt that left
/// no summary.json (no start time) or whose run's failure.json is gone (deleted; a rerun
/// keeps it) is not marked. Every attempt but the very last that still says running is
/// then kInterrupted. Unreadable files count as missing. Never throws.
std::vector<AttemptRecord> ReadAttempts(const std::string& run_dir);

/// The number of runs `attempts` tell of: the last one's `run` (0 when none).
int RunsOf(const std::vector<AttemptRecord>& attempts);

/// Steps over all attempts.
struct StepCoverage {
  int64_t steps_trained = 0;  ///< summed over attempts (steps done twice count twice)
  int64_t distinct = 0;       ///< distinct steps trained
  int64_t redone = 0;         ///< steps_trained - distinct: re-done after resumes
  std::optional<int64_t> first_step, last_step;  ///< lowest first, highest last
};
StepCoverage CoverageOf(const std::vector<AttemptRecord>& attempts);

/// {run, attempt, first_step (null: unknown), last_step, steps_trained, outcome,
/// steps_per_second (null: not measured), failure (failed attempts with a message)}.
nlohmann::json AttemptRowJson(const AttemptRecord& a);

/// RUN_DIR/summary.json of a job whose last attempt finished: `last_attempt` (that
/// attempt's summary, attempts/N/summary.json) with the view over `attempts` (every run's,
/// the last included) added: `attempts` (one row each, AttemptRowJson), `runs` (RunsOf),
/// `failed_attempts` (the numbers of the last run's failed attempts, as its `restarts` is
/// the last run's; an earlier run's failures are its rows' `outcome`), and over every
/// attempt of every run `steps_trained`, `steps_redone`, `first_step`, `last_step`.
nlohmann::json CombinedSummary(const nlohmann::json& last_attempt,
                               const std::vector<AttemptRecord>& attempts);

}  // namespace ringpilot::history
