// RUN_DIR/launcher.json: who runs a job and how it stands. The launcher's Supervisor
// (launcher/supervisor.h) writes it, atomically, when it starts, when each attempt starts
// and when the job ends; `ringpilot status`, `logs -f` and `stop` (launcher/run_status.h)
// and `ringpilot diagnose` read it. It is the only place the launcher's pid is recorded.
// This file is the format's one definition: the launcher writes through
// WriteLauncherRecord, every reader parses through ReadLauncherRecord (or its quiet form).
#pragma once

#include <optional>
#include <string>

namespace ringpilot::history {

/// The states `ringpilot status` reports; the file holds their names.
enum class RunState {
  kRunning,   ///< the launcher is supervising an attempt (or waiting to restart)
  kFinished,  ///< every step done (exit 0, summary.json)
  kFailed,    ///< failed for good (failure.json), or the launcher is gone without a word
  kStopped,   ///< stopped on request: SIGUSR1 (checkpoint written, exit 75) or SIGINT/SIGTERM
};
const char* ToString(RunState state);
/// nullopt for a name that is not a RunState's.
std::optional<RunState> RunStateFromString(const std::string& name);

struct LauncherRecord {
  int pid = 0;             ///< the `ringpilot run` process
  std::string host;        ///< where it runs (base::HostName)
  std::string executable;  ///< its /proc/self/exe, to tell it from a process that reused the pid
  std::string started;     ///< when it started supervising (base::FormatLogTime)
  std::string updated;     ///< when this record was written
  int attempt = 0;         ///< the current (or last) attempt, 1-based; 0 before the first
  int max_attempts = 1;    ///< 1 + launch.max_restarts
  /// Which `ringpilot run` of this run directory this is: 1 for the first, 2 after one
  /// resume, ... (each run numbers its attempts from 1 again).
  int run = 1;
  /// Attempts that the earlier runs of this directory made, all together.
  int attempts_before = 0;
  RunState state = RunState::kRunning;
  std::string detail;              ///< one line on how it ended ("" while running)
  std::optional<int> exit_status;  ///< `ringpilot run`'s exit status once it ended
  std::string slurm_job_id;        ///< SLURM_JOB_ID when it runs inside a Slurm job
};

/// RUN_DIR/launcher.json.
std::string LauncherRecordPath(const std::string& run_dir);

/// The file's text: one JSON object with the fields above in their order (`state` by name,
/// `exit_status` only once there is one, `slurm_job_id` only when set) and a newline.
std::string LauncherJson(const LauncherRecord& record);

/// Writes LauncherJson(record) to `path` atomically. Throws base::FileError.
void WriteLauncherRecord(const std::string& path, const LauncherRecord& record);

/// The record in `path`; nullopt when there is no such file. "pid" and "state" are
/// required, other missing keys keep the struct's defaults. Throws RecordError
/// (history/record_fields.h: one line naming the file and the key) when the file cannot be
/// read, is not JSON, lacks "pid" or "state", names no RunState, or holds a value of the
/// wrong type.
std::optional<LauncherRecord> ReadLauncherRecord(const std::string& path);

/// ReadLauncherRecord for readers that go on without a record (`status`, `logs -f`, `stop`,
/// a launcher numbering its run): nullopt when the file is missing or ReadLauncherRecord
/// would throw. Never throws.
std::optional<LauncherRecord> ReadLauncherRecordIfValid(const std::string& path);

}  // namespace ringpilot::history
