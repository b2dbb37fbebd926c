// `ringpilot exec --bind POLICY`: the placement of one rank of a user's program, as the
// trainer places its ranks (docs/topology.md) but without MPI: the node's topology (probed
// here, or RINGPILOT_TOPOLOGY_SNAPSHOT), this rank's plan (GPU order, NCCL's NIC, CPUs),
// applied to the environment and to this process before the program starts (it inherits
// the binding).
#pragma once

#include <string>
#include <vector>

#include "base/environment.h"

namespace ringpilot::cli {

struct ExecPlacement {
  base::Environment env;           ///< the input plus the plan's variables (never overriding)
  std::vector<std::string> lines;  ///< for the rank log: the plan, its warnings, the affinity
  int bound_cpus = 0;              ///< CPUs this process is now bound to; 0: not bound
};

/// Places the rank described by `env` (the torchrun variables: RANK, LOCAL_RANK,
/// LOCAL_WORLD_SIZE) with `bind` ("auto", "numa", "cores", "none") on `device` ("auto":
/// CUDA when the node has a GPU, "cuda", "cpu"), and binds this process. Local rank 0
/// writes the node's snapshot to RINGPILOT_RUN_DIR/logs/topology-HOST.json when a run
/// directory is set (`ringpilot diagnose` works out the expected bus bandwidth from it).
/// Throws std::invalid_argument for an unknown policy or device and std::runtime_error
/// for an unreadable snapshot file.
ExecPlacement PlaceExecRank(const base::Environment& env, const std::string& bind,
                            const std::string& device);

}  // namespace ringpilot::cli
