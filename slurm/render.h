// The sbatch script for `ringpilot slurm render|submit`: a pure function of a plain spec
// (this library does not depend on the launcher's job config; the command maps one to the
// other), so the script can be tested without Slurm.
#pragma once

#include <string>

namespace ringpilot::slurm {

/// What the script asks Slurm for and what it runs.
struct SbatchSpec {
  std::string job_name;      ///< --job-name; [A-Za-z0-9._-]{1,63}
  int nodes = 1;             ///< --nodes
  int tasks_per_node = 1;    ///< --ntasks-per-node (one rank per task slot)
  int gpus_per_node = 0;     ///< --gpus-per-node when > 0 (never --gpus-per-task)
  std::string time;          ///< --time (CheckTime)
  std::string partition;     ///< --partition when not empty (CheckName)
  std::string account;       ///< --account when not empty (CheckName)
  std::string qos;           ///< --qos when not empty (CheckName)
  int signal_seconds = 300;  ///< --signal=B:USR1@N
  std::string run_root;      ///< run dir RUN_ROOT/<job_name>-$SLURM_JOB_ID (CheckPath)
  std::string ringpilot;     ///< ringpilot executable on the compute nodes (CheckPath)
  std::string job_yaml;      ///< resolved job file, embedded verbatim in a quoted heredoc
};

/// What `ringpilot run` exits with when the job's ranks checkpointed and stopped on
/// SIGUSR1 (launcher::kPreemptedExitStatus; this library does not depend on the
/// launcher): the script then requeues the job.
inline constexpr int kRunPreemptedStatus = 75;

/// Delimiter of the heredoc that carries the job file.
inline constexpr const char* kJobHeredocDelimiter = "RINGPILOT_JOB_EOF";

/// "" when `s` is a valid --time value (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or
/// `UNLIMITED`), else a one-line problem.
std::string CheckTime(const std::string& s);
/// "" when `s` is a valid partition/account/qos name: 1 to 63 of [A-Za-z0-9._-].
std::string CheckName(const std::string& s);
/// "" when `s` is a path of [A-Za-z0-9._/+-] (1 to 1024 characters): safe in `#SBATCH`
/// lines, which sbatch does not parse as shell.
std::string CheckPath(const std::string& s);

/// `word` single-quoted for a POSIX shell ('it'\''s').
std::string ShellSingleQuote(const std::string& word);

/// The sbatch script. Throws std::invalid_argument (one line naming the field) when a field
/// breaks its rule or the job file contains a line equal to kJobHeredocDelimiter.
std::string RenderSbatch(const SbatchSpec& spec);

}  // namespace ringpilot::slurm
