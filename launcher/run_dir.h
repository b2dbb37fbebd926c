// The run directory of `ringpilot run`: naming, layout and creation. Every file in it is
// written through base::WriteFileAtomically (never truncated in place).
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

namespace ringpilot::launcher {

/// Parent of default run directories, relative to the working directory.
inline constexpr const char* kDefaultRunsDir = "runs";

/// Paths inside a run directory (design brief: user interface contract).
struct RunDirLayout {
  std::string root;
  std::string logs;           ///< root/logs: rank-N.log (trainer), launcher.log (supervisor)
  std::string checkpoints;    ///< root/checkpoints: step-NNNNNNNN/ (trainer), step-N.* (programs)
  std::string trace;          ///< root/trace: rank-N.json (trainer)
  std::string job_yaml;       ///< root/job.yaml: the resolved config every rank reads
  std::string launcher_log;   ///< root/logs/launcher.log
  std::string failure_json;   ///< root/failure.json: root cause of a job that failed for good
  std::string summary_json;   ///< root/summary.json: results of a job that finished (trainer;
                              ///< history/run_summary.h)
  std::string hostfile;       ///< root/hostfile (backend mpi)
  std::string launcher_json;  ///< root/launcher.json: the launcher's pid and state
                              ///< (history/launcher_record.h)
  /// root/stop-request: written by `ringpilot stop` before it signals the launcher, so that
  /// the stop is told from a scheduler's preemption (the Slurm script does not requeue it).
  std::string stop_request;
  std::string prometheus_targets;  ///< root/prometheus-targets.json (trainer's rank 0)

  explicit RunDirLayout(const std::string& root_dir);
  /// root/logs/rank-N.log
  std::string RankLog(int rank) const;
  /// root/attempts/N/failure.json: the report of failed attempt N (1-based) that was
  /// restarted.
  std::string AttemptFailureJson(int attempt) const;
};

/// The newest checkpoint in a run directory's checkpoints/.
struct CheckpointRef {
  int64_t step = -1;  ///< -1: none
  std::string path;   ///< absolute when `checkpoints_dir` is; "" for none
};

/// The checkpoint with the highest step in `checkpoints_dir`: an entry named `step-N`
/// (the trainer's directories, step-NNNNNNNN) or `step-N.EXT` (a program's files, e.g.
/// step-00000600.pt; docs/programs.md, "Progress and checkpoints"), N decimal digits, file
/// or directory. Names ending in .tmp, .partial or .part are being written and are left
/// out, as is anything else (the trainer's .tmp-* and corrupt-* entries).
CheckpointRef LatestCheckpoint(const std::string& checkpoints_dir);

/// `ringpilot run RUN_DIR/job.yaml --run-dir RUN_DIR`: what resumes a stopped or failed run.
std::string ResumeCommand(const std::string& run_dir);

/// `PARENT/<name>-YYYYmmdd-HHMMSS`, `now` in local time.
std::string DefaultRunDirName(const std::string& job_name, std::time_t now,
                              const std::string& parent = kDefaultRunsDir);

/// `base` when nothing exists there, else `base-2`, `base-3`, ...: two runs started in the
/// same second must not share (and resume) one directory by accident.
std::string UniqueRunDir(const std::string& base);

/// Creates and returns a new, empty directory: `base`, else `base-2`, `base-3`, ... (mkdir
/// is the claim, so two runs started at once never get the same one). Parents are created.
/// Throws base::FileError.
std::string ClaimNewRunDir(const std::string& base);

/// What PrepareRunDir found and did.
struct PreparedRunDir {
  bool resumed = false;         ///< job.yaml was already there (an earlier run in this dir)
  bool config_changed = false;  ///< ... and differed: the old one is now job.yaml.prev
};

/// Creates root (with parents), logs/, checkpoints/ and trace/, and writes `job_yaml` to
/// root/job.yaml atomically. An existing job.yaml with other content is kept as
/// job.yaml.prev (an older job.yaml.prev moves to job.yaml.prev.N first); nothing that
/// exists is truncated. Throws base::FileError naming the path and the system error.
PreparedRunDir PrepareRunDir(const RunDirLayout& layout, const std::string& job_yaml);

/// root/attempts/ of an earlier run of this directory (each `ringpilot run` numbers its
/// attempts from 1) moves to root/attempts.prev, an older attempts.prev first to
/// attempts.prev.N (history::NextOlderPath: N one past the highest), so that this run's
/// attempts/N/ overwrite nothing and history::ReadAttempts reads the runs in order.
/// Returns whether there was one. Throws base::FileError.
bool KeepPreviousAttempts(const RunDirLayout& layout);

/// When `path` exists, keeps its content as `path.prev` (hard link, so `path` can then be
/// replaced atomically; its mtime stays the original's); an existing `path.prev` first
/// moves to `path.prev.N` (history::NextOlderPath: N one past the highest). Returns
/// whether `path` existed. Throws base::FileError.
bool KeepPrevious(const std::string& path);

}  // namespace ringpilot::launcher
