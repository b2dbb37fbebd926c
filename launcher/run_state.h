// RUN_DIR/launcher.json: who runs a job and how it stands. The Supervisor writes it
// (atomically) when it starts, when each attempt starts and when the job ends;
// `ringpilot status`, `logs -f` and `stop` read it. It is the only place the launcher's
// pid is recorded.
#pragma once

#include <optional>
#include <string>

namespace ringpilot::launcher {

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

/// JSON text of `record` (an object with the fields above; `state` by name, the exit
/// status only once there is one).
std::string LauncherJson(const LauncherRecord& record);
/// Parses LauncherJson's text; nullopt when it is not such an object.
std::optional<LauncherRecord> ParseLauncherJson(const std::string& text);
/// ParseLauncherJson of the file; nullopt when it is missing or unreadable.
std::optional<LauncherRecord> ReadLauncherRecord(const std::string& path);

/// Whether the process of `record` still runs, seen from this host: alive, gone (no such
/// process, or the pid now belongs to another program), or elsewhere (it runs on another
/// host, where its pid means nothing to this one).
enum class Liveness { kAlive, kGone, kElsewhere };
Liveness CheckLauncher(const LauncherRecord& record);

}  // namespace ringpilot::launcher
