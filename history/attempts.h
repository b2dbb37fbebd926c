// RUN_DIR/attempts/N/ (N = RINGPILOT_ATTEMPT, 1-based): the history of a job's attempts.
// Rank 0 of the trainer writes attempts/N/summary.json when the attempt starts, at every
// checkpoint and at its end; the launcher writes attempts/N/failure.json for an attempt
// that failed and was restarted (the job's final failure is RUN_DIR/failure.json). From
// them: which steps each attempt trained, how it ended, and the combined view over all
// attempts that RUN_DIR/summary.json carries and `ringpilot diagnose` reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringpilot::history {

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

/// What one attempt trained. Steps are numbered from 1, as in the progress lines: an
/// attempt resumed from the checkpoint of step S trains S+1, S+2, ...
struct AttemptRecord {
  int attempt = 0;
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

/// Every attempt of RUN_DIR: attempts/N/ with a summary.json or a failure.json, by N; the
/// root failure.json (the job's final failure) marks the last attempt failed when it was
/// written after that attempt started. Unreadable files count as missing. Never throws.
std::vector<AttemptRecord> ReadAttempts(const std::string& run_dir);

/// Steps over all attempts.
struct StepCoverage {
  int64_t steps_trained = 0;  ///< summed over attempts (steps done twice count twice)
  int64_t distinct = 0;       ///< distinct steps trained
  int64_t redone = 0;         ///< steps_trained - distinct: re-done after resumes
  std::optional<int64_t> first_step, last_step;  ///< lowest first, highest last
};
StepCoverage CoverageOf(const std::vector<AttemptRecord>& attempts);

/// {attempt, first_step (null: unknown), last_step, steps_trained, outcome,
/// steps_per_second (null: not measured), failure (failed attempts with a message)}.
nlohmann::json AttemptRowJson(const AttemptRecord& a);

/// RUN_DIR/summary.json of a job whose last attempt finished: `last_attempt` (that
/// attempt's summary, attempts/N/summary.json) with the view over `attempts` (all of them,
/// the last included) added: `attempts` (one row each, AttemptRowJson), `failed_attempts`
/// (their numbers), `steps_trained`, `steps_redone`, `first_step`, `last_step`.
nlohmann::json CombinedSummary(const nlohmann::json& last_attempt,
                               const std::vector<AttemptRecord>& attempts);

}  // namespace ringpilot::history
