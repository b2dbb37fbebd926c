// How a run directory stands, from what the launcher and the ranks leave in it:
// launcher.json (state, pid, attempt), the ranks' heartbeats (step, loss), summary.json,
// failure.json and checkpoints/. What `ringpilot status` prints and `logs -f` and `stop`
// decide by. Reads only; safe while the job runs (every file it reads is replaced
// atomically by its writer).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "history/run_lock.h"
#include "launcher/failure_report.h"
#include "launcher/run_state.h"

namespace ringpilot::launcher {

/// A rank heartbeat older than this (seconds) counts as stale in `ranks_fresh`.
inline constexpr double kFreshHeartbeatSeconds = 10.0;

struct RunStatus {
  std::string run_dir;  ///< absolute
  /// "running", "finished", "failed", "stopped" (RunState names), or "unknown" (no
  /// launcher.json, no summary.json, no failure.json, no lock held: a run directory of an
  /// older ringpilot).
  std::string state;
  std::string detail;  ///< one line: why this state (how it ended, or where it runs)
  std::optional<LauncherRecord> launcher;
  Liveness liveness = Liveness::kGone;  ///< of the launcher, when there is a record
  /// RUN_DIR/run.lock: who holds the directory (a launcher that has not yet written
  /// launcher.json, in its start-up checks, is running all the same).
  history::RunLockView lock;

  // The job (RUN_DIR/job.yaml).
  std::string job_name;
  /// A launch.command job: `command` is the program's command line (shell-quoted), and
  /// `model` and `data` are empty (the program's own business).
  bool program = false;
  std::string command;
  std::string model;
  std::string device;  ///< world.device as written: cpu, cuda, auto
  int nodes = 0;
  int procs_per_node = 0;
  int world_size = 0;
  std::string data;  ///< data.kind (and data.train when set)

  /// Whether the step, target and loss are known: always for the trainer; for a program
  /// only once it printed a progress line (docs/programs.md), else "no progress reported".
  bool progress_reported = true;
  int64_t step = 0;          ///< steps done, as far as known
  int64_t steps_target = 0;  ///< train.steps, or what train.epochs came to; 0 = unknown
  std::optional<double> loss;
  /// "summary.json" (history::kRunSummaryFile) or "heartbeat" (the trainer's), "progress
  /// line" (a program's).
  std::string loss_source;
  int64_t latest_checkpoint = -1;      ///< step of the newest checkpoints/step-N, -1 none
  std::string latest_checkpoint_path;  ///< its path ("" for none)
  /// Heartbeats of this attempt: the trainer's, or for a program the launcher's view of
  /// each rank's process (logs/rank-N.program.json, `ringpilot exec`).
  int ranks_seen = 0;
  int ranks_fresh = 0;                       ///< ... written in the last kFreshHeartbeatSeconds
  std::optional<double> samples_per_second;  ///< summary.json, finished trainer runs
  int first_failing_rank = -1;               ///< failure.json
  std::string fatal_message;                 ///< failure.json
  std::string logs_dir;
  std::string launcher_log;
};

/// Reads `run_dir`. Throws std::runtime_error (one line) when it is not a run directory
/// (no readable job.yaml in it). `now_unix`: the time heartbeats are judged against.
RunStatus ReadRunStatus(const std::string& run_dir, double now_unix);

/// `ringpilot status --json`: every field above under its name (absent optionals are null,
/// the launcher record nested as in launcher.json).
nlohmann::ordered_json RunStatusJson(const RunStatus& status);

/// Whether a launcher is (as far as this host can tell) still supervising the run: the
/// record says running and its process is alive here, or it runs on another host; or,
/// it holds run.lock and is starting (LauncherStarting).
bool LauncherActive(const RunStatus& status);

/// A launcher holds run.lock but launcher.json is not (yet) its own: it is in its start-up
/// checks, before it supervises anything (`stop` has nothing to signal yet).
bool LauncherStarting(const RunStatus& status);

}  // namespace ringpilot::launcher
