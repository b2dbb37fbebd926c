// Per-GPU placement facts from a NodeTopology: the NIC a GPU should use and the CPUs its
// rank should be bound to.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/node_topology.h"

namespace ringpilot::topology {

/// The NIC nearest GPU `gpu_index`: ports that are up before ports that are down, then the
/// best path class (PIX before PXB ... SYS, unknown last), then a NIC on the GPU's NUMA
/// node, then the higher rate, then the name. nullopt when the node has no NIC or no such GPU.
std::optional<std::string> NearestNic(const NodeTopology& node, int gpu_index);

/// The NIC NCCL should use for GPU `gpu_index`: NearestNic among the IB/RoCE ports that are
/// up when the node has any (NCCL's IB transport then carries the traffic), else among the
/// Ethernet interfaces that are up (the socket transport). nullopt when no NIC is up or no
/// such GPU.
std::optional<std::string> NcclNic(const NodeTopology& node, int gpu_index);

/// CPUs of the GPU's NUMA node; every CPU of the node when the GPU's NUMA node is unknown.
/// Empty for an unknown GPU.
std::vector<int> GpuCpuSet(const NodeTopology& node, int gpu_index);

}  // namespace ringpilot::topology
