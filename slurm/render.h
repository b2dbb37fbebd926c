// The sbatch script for `ringpilot slurm render|submit`: a pure function of the job, so
// it can be tested without Slurm.
#pragma once

#include <string>

#include "config/job.h"

namespace ringpilot::slurm {

/// Delimiter of the heredoc that carries the job file.
inline constexpr const char* kJobHeredocDelimiter = "RINGPILOT_JOB_EOF";

/// The sbatch script of `job`: its allocation (world.*, slurm.*), the resolved job file
/// embedded verbatim in a quoted heredoc, and the USR1 -> checkpoint -> requeue protocol
/// (base::kExitPreempted). `self_ringpilot` runs on the compute nodes when slurm.ringpilot
/// is empty. Throws std::invalid_argument (one line naming the key) when a value breaks
/// its rule (config/value_rules.h) or the job file contains a line equal to
/// kJobHeredocDelimiter.
std::string RenderSbatch(const config::JobConfig& job, const std::string& self_ringpilot);

}  // namespace ringpilot::slurm
