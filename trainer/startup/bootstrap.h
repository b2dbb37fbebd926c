// Placement at start-up (docs/topology.md): local rank 0 of each node takes the node's
// topology snapshot, node reports are gathered to rank 0, which logs the cluster view
// (heterogeneity and hidden-device warnings) and the expected bus bandwidth; every rank
// computes its plan (GPU, NIC, CPUs), sets the NCCL variables of the plan in its own
// environment, binds its threads, and logs its plan and resulting affinity; rank 0 logs
// the table of all ranks.
#pragma once

#include <string>

#include "config/job.h"
#include "topology/plan.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer::startup {

/// What placement reads of the job (trainer/options.cpp PlacementOptionsFor fills it).
struct PlacementOptions {
  config::Device device = config::Device::kAuto;  ///< world.device
  topology::BindPolicy bind = topology::BindPolicy::kAuto;
};

struct RankPlacement {
  topology::RankPlan plan;
  double expected_bus_bytes_per_second = 0;  ///< the job's, same on every rank; 0: no model
  std::string expected_source;               ///< rank 0 only: the bottleneck, or why none
};

/// Collective over MPI_COMM_WORLD: every rank calls it once, after MPI_Init and before
/// CUDA or NCCL start (the plan's CUDA_DEVICE_ORDER and NCCL_* variables must be set by
/// then) and before compute threads exist (they inherit the binding).
///
/// The snapshot comes from topology::ProbeNode in this process (hwloc, sysfs, NVML; a
/// missing source is a warning in the report), or from the file named by
/// RINGPILOT_TOPOLOGY_SNAPSHOT (tests, or nodes where probing is not wanted); one that
/// cannot be read throws std::runtime_error.
RankPlacement PlaceRank(const PlacementOptions& options, int rank, int world, int local_rank,
                        int local_size, telemetry::RankLog& log);

}  // namespace ringpilot::trainer::startup
