#include "slurm/allocation.h"

#include <optional>
#include <stdexcept>

namespace ringpilot::slurm {

std::vector<AllocationHost> AllocationHosts(const Environment& env, int nodes, int procs_per_node) {
  // The allocation's task counts, also when called inside a step (srun ringpilot run):
  // the step's own SLURM_STEP_TASKS_PER_NODE describes that step only.
  Environment job_env = env;
  job_env.erase("SLURM_STEP_TASKS_PER_NODE");
  const std::optional<SlurmEnv> slurm = ParseSlurmEnv(job_env);
  if (!slurm || !slurm->job_id || slurm->nodes.empty()) {
    throw std::invalid_argument(
        "launch.backend slurm: not inside a Slurm allocation (SLURM_JOB_ID and "
        "SLURM_JOB_NODELIST must be set; submit with 'ringpilot slurm submit', or use "
        "backend mpi or local)");
  }
  const int have = static_cast<int>(slurm->nodes.size());
  if (have < nodes) {
    throw std::invalid_argument("launch.backend slurm: the allocation has " + std::to_string(have) +
                                " node(s) but world.nodes is " + std::to_string(nodes));
  }
  std::vector<AllocationHost> hosts;
  for (int i = 0; i < nodes; ++i) {
    const auto& tasks = slurm->tasks_per_node;
    if (i < static_cast<int>(tasks.size()) && tasks[i] < procs_per_node) {
      throw std::invalid_argument("launch.backend slurm: node " + slurm->nodes[i] + " has " +
                                  std::to_string(tasks[i]) + " task slot(s) (" +
                                  slurm->tasks_per_node_var + ") but world.procs_per_node is " +
                                  std::to_string(procs_per_node));
    }
    hosts.push_back({slurm->nodes[i], procs_per_node});
  }
  return hosts;
}

}  // namespace ringpilot::slurm
