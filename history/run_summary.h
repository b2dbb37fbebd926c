// RUN_DIR/summary.json: the results of a trainer job whose last attempt finished. The
// trainer's rank 0 writes it at the end of the run (trainer/summary.cpp WriteSummary): the
// last attempt's summary (attempts/N/summary.json, history/attempts.h) with the view over
// every attempt of every run added (CombinedSummary). `ringpilot status`, `logs -f` and `stop`
// (launcher/run_status.h), `ringpilot run` (a finished run is not run again without more
// steps) and `ringpilot diagnose` read it. This file is the path's and the read fields'
// one definition: the trainer builds the file from RunSummaryJson and writes it through
// WriteRunSummary; every reader parses it through ReadRunSummary (or its quiet form).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ringpilot::history {

/// The file's name in a run directory ("summary.json"): what messages and `status`'s loss
/// source call it.
inline constexpr const char* kRunSummaryFile = "summary.json";

/// RUN_DIR/summary.json.
std::string RunSummaryPath(const std::string& run_dir);

/// The fields readers use. The trainer adds others to the file (the weights' fingerprint,
/// the job's model, device and batch, evaluation, data counts, the attempt's progress and
/// the attempts' view: trainer/summary.cpp, docs/faults.md); readers here ignore them.
struct RunSummary {
  std::string name;  ///< the job's name
  int world_size = 0;
  /// The run's optimizer steps (train.steps, or what train.epochs came to). The file of a
  /// finished run always has it: a file without it is malformed.
  int64_t steps = 0;
  int64_t epochs = 0;  ///< train.epochs runs: epochs started; 0 (not written) otherwise
  /// The last step's loss averaged over the ranks; nullopt (null in the file) when the last
  /// attempt ran no step (resumed at its last step) or the loss was not finite.
  std::optional<double> final_loss;
  std::optional<double> samples_per_second;  ///< over the timed steps; nullopt: not measured
  double step_seconds_p50 = 0;
  double step_seconds_p99 = 0;
  int restarts = 0;  ///< restarts in the last run (its last attempt's number - 1)
  /// Readers' side only: the whole object as read, the fields above and the trainer's
  /// others (`ringpilot diagnose --json` shows it as written). RunSummaryJson ignores it.
  nlohmann::json as_written;
};

/// The fields above as a JSON object (`epochs` only when > 0, null for an absent optional).
/// The trainer adds its own fields to it.
nlohmann::json RunSummaryJson(const RunSummary& summary);

/// Writes RUN_DIR/summary.json atomically: `last_attempt` (the finished attempt's summary,
/// RunSummaryJson with the trainer's fields and the attempt's progress, as written to
/// attempts/N/summary.json) combined with every attempt of every run of `run_dir`
/// (CombinedSummary over ReadAttempts). Throws base::FileError.
void WriteRunSummary(const std::string& run_dir, const nlohmann::json& last_attempt);

/// The summary in `path`; nullopt when there is no such file. "steps" is required, other
/// missing keys keep the struct's defaults. Throws RecordError (history/record_fields.h:
/// one line naming the file and the key) when the file cannot be read, is not a JSON
/// object, lacks "steps", or holds a value of the wrong type or out of range.
std::optional<RunSummary> ReadRunSummary(const std::string& path);

/// ReadRunSummary for readers to whom a summary that is absent or unreadable means "not
/// finished" (`status`, `ringpilot run`): nullopt when the file is missing or
/// ReadRunSummary would throw. Never throws.
std::optional<RunSummary> ReadRunSummaryIfValid(const std::string& path);

}  // namespace ringpilot::history
