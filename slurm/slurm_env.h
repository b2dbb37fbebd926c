// The SLURM_* variables a task sees inside an allocation, parsed into one struct.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/environment.h"

namespace ringpilot::slurm {

using Environment = base::Environment;

/// What Slurm tells one task about itself and its allocation.
struct SlurmEnv {
  /// SLURM_PROCID: global task rank; unset outside a task (e.g. under mpirun in a batch
  /// script, whose processes still see the allocation's variables).
  std::optional<int> procid;
  std::optional<int> ntasks;  ///< SLURM_NTASKS (SLURM_NPROCS on old Slurm); set with procid
  int localid = -1;  ///< SLURM_LOCALID: task index on this node; -1 when unset (batch shell)
  int nodeid = -1;   ///< SLURM_NODEID: this node's index in the allocation; -1 when unset
  /// SLURM_JOB_NODELIST (SLURM_NODELIST on old Slurm), expanded; empty when unset.
  std::vector<std::string> nodes;
  std::optional<uint64_t> job_id;  ///< SLURM_JOB_ID (SLURM_JOBID on old Slurm)
  /// Tasks per node in node-id order: SLURM_STEP_TASKS_PER_NODE inside a step (it describes
  /// the step this task belongs to), else SLURM_TASKS_PER_NODE; empty when neither is set.
  std::vector<int> tasks_per_node;
  std::string tasks_per_node_var;  ///< which variable tasks_per_node came from

  /// Tasks on this node (tasks_per_node[nodeid]); nullopt when either is unknown.
  std::optional<int> LocalTasks() const;
};

/// Parses the Slurm variables of `env`. Returns nullopt when none of SLURM_PROCID,
/// SLURM_JOB_ID/SLURM_JOBID and SLURM_JOB_NODELIST/SLURM_NODELIST is set (not inside a
/// Slurm allocation). Throws std::invalid_argument with one line naming the variable and its
/// value when a set variable is malformed, SLURM_NTASKS is missing while SLURM_PROCID is set, or
/// the values contradict each other (procid >= ntasks, nodeid beyond the tasks-per-node list).
std::optional<SlurmEnv> ParseSlurmEnv(const Environment& env);

}  // namespace ringpilot::slurm
