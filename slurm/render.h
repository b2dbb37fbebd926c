// The sbatch script for `ringpilot slurm render|submit`: a pure function of the job, so
// it can be tested without Slurm.
#pragma once

#include <string>

#include "config/job.h"

namespace ringpilot::slurm {

/// Delimiter of the heredoc that carries the job file.
inline constexpr const char* kJobHeredocDelimiter = "RINGPILOT_JOB_EOF";

/// The sbatch script of `job`: its allocation (world.*, slurm.*: GPUs per node from
/// config::RequestedGpusPerNode, slurm.directives as extra `#SBATCH` lines), the slurm.setup
/// lines, the resolved job file embedded verbatim in a quoted heredoc (launch.backend
/// slurm, metrics.bind as config::ClusterMetricsBind makes it, so another host can scrape
/// the ranks), and the USR1 -> checkpoint -> requeue protocol (base::kExitPreempted; a stop
/// by `ringpilot stop` is not requeued). `self_ringpilot` runs on the compute nodes when
/// slurm.ringpilot is empty. Throws std::invalid_argument (one line naming the key) when a
/// value breaks its rule (config/value_rules.h) or the job file contains a line equal to
/// kJobHeredocDelimiter.
std::string RenderSbatch(const config::JobConfig& job, const std::string& self_ringpilot);

}  // namespace ringpilot::slurm
