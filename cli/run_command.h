// `ringpilot validate` and `ringpilot run`: check a job file; launch it under mpirun and
// supervise it (restarts from the last checkpoint, failure report, preemption).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/environment.h"
#include "config/job.h"

namespace ringpilot::cli {

/// The ringpilot-trainer `ringpilot run` starts: $RINGPILOT_TRAINER, else the one beside
/// this executable; absolute when it names a path (ranks resolve it in their own directory).
std::string TrainerPath(const base::Environment& env);

/// `--set KEY=VALUE` on `cmd`, repeatable, one value per flag so that a job file after it
/// stays the positional argument.
void AddSetOption(CLI::App* cmd, std::vector<std::string>* sets);

/// Prints "JOB: valid (...)" (or, with `print`, the resolved YAML on stdout). Returns
/// base::kExitOk, or base::kExitUsage with every problem on stderr, one line each.
int RunValidate(const std::string& job_path, const std::vector<std::string>& sets, bool print);

struct RunArgs {
  std::string job_path;
  std::vector<std::string> sets;
  std::string run_dir;
  bool dry_run = false;
  bool force = false;    ///< start even when the preflight doctor FAILs
  bool verbose = false;  ///< the mpirun command and rank 0's placement detail on the terminal
};

/// The start-up block `ringpilot run` prints before the first attempt: a few lines naming
/// the job, its ranks and device, the data, the run directory and where the metrics are.
/// `hosts`: the host of each node in rank order (empty for backend local: this host).
/// `chosen_port_base`: the first port of the block of metrics ports found free on this host
/// (backend local), 0 when not checked. A launch.command job is described by its command:
/// its data and steps are the program's.
std::vector<std::string> StartupLines(const config::JobConfig& config, const std::string& run_dir,
                                      const std::vector<std::string>& hosts,
                                      const std::string& this_host, int chosen_port_base = 0);

/// Runs the job; returns its exit status (base::kExitPreempted when it checkpointed and
/// stopped), base::kExitUsage for a bad job, base::kExitFailure for a local problem.
int RunJob(const RunArgs& args);

}  // namespace ringpilot::cli
