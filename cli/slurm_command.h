// `ringpilot slurm render|submit JOB.yaml [--set ...]`: the sbatch script, printed or
// handed to sbatch.
#pragma once

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

/// Adds the `slurm` subcommand (render, submit) to `app`. Its handlers run as parse
/// callbacks and end the process with the command's exit status: 0 done, 2 bad job file,
/// 1 sbatch missing or the script cannot be written; submit otherwise returns sbatch's.
void AddSlurmCommand(CLI::App& app);

}  // namespace ringpilot::cli
