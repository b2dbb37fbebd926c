// `ringpilot slurm render|submit JOB.yaml [--set ...]`: the sbatch script, printed or
// handed to sbatch.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "config/job.h"
#include "slurm/render.h"

namespace ringpilot::cli {

/// The sbatch spec of a job; `self_ringpilot` is used when slurm.ringpilot is empty.
slurm::SbatchSpec SbatchSpecFor(const JobConfig& config, const std::string& self_ringpilot);

/// Adds the `slurm` subcommand (render, submit) to `app`. Its handlers run as parse
/// callbacks and end the process with the command's exit status: 0 done, 2 bad job file,
/// 1 sbatch missing or the script cannot be written; submit otherwise returns sbatch's.
void AddSlurmCommand(CLI::App& app);

}  // namespace ringpilot::cli
