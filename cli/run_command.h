// `ringpilot validate` and `ringpilot run`: check a job file; launch it under mpirun and
// supervise it (restarts from the last checkpoint, failure report, preemption).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

/// `--set KEY=VALUE` on `cmd`, repeatable, one value per flag so that a job file after it
/// stays the positional argument.
void AddSetOption(CLI::App* cmd, std::vector<std::string>* sets);

/// Prints "JOB: valid (...)" (or, with `print`, the resolved YAML on stdout). Returns
/// base::kExitOk, or base::kExitUsage with the one-line error on stderr.
int RunValidate(const std::string& job_path, const std::vector<std::string>& sets, bool print);

struct RunArgs {
  std::string job_path;
  std::vector<std::string> sets;
  std::string run_dir;
  bool dry_run = false;
  bool force = false;  ///< start even when the preflight doctor FAILs
};

/// Runs the job; returns its exit status (base::kExitPreempted when it checkpointed and
/// stopped), base::kExitUsage for a bad job, base::kExitFailure for a local problem.
int RunJob(const RunArgs& args);

}  // namespace ringpilot::cli
