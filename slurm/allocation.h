// The hosts of a Slurm allocation as seen from its batch shell, for `ringpilot run` with
// `launch.backend: slurm` (mpirun started inside the allocation reaches the other nodes
// through Slurm).
#pragma once

#include <string>
#include <vector>

#include "slurm/slurm_env.h"

namespace ringpilot::slurm {

/// One node of the allocation and the ranks it runs.
struct AllocationHost {
  std::string host;  ///< node name as in SLURM_JOB_NODELIST
  int slots = 0;     ///< ranks on it (the job's procs_per_node)
};

/// The first `nodes` nodes of the allocation described by `env`, each with
/// `procs_per_node` slots. Throws std::invalid_argument with one line when `env` is not
/// inside an allocation (SLURM_JOB_ID or SLURM_JOB_NODELIST unset), a variable is
/// malformed, the allocation has fewer than `nodes` nodes, or one of them has fewer task
/// slots (SLURM_TASKS_PER_NODE) than `procs_per_node`.
std::vector<AllocationHost> AllocationHosts(const Environment& env, int nodes, int procs_per_node);

}  // namespace ringpilot::slurm
