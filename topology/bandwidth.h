// Expected bus bandwidth of a ring all-reduce (and of all-gather / reduce-scatter, whose
// nccl-tests bus bandwidth has the same bottleneck) for a job of `gpus_per_node` GPUs on
// `nodes` nodes shaped like one NodeTopology. The model is in docs/topology.md.
#pragma once

#include <string>

#include "topology/node_topology.h"

namespace ringpilot::topology {

/// Assumed one-direction bandwidth of a GPU-GPU PCIe path of class C (PCIe Gen4 x16 class
/// figures, docs/topology.md); 0 for kUnknown.
double PcieBytesPerSecond(LinkClass c);

struct BusBandwidth {
  double intra_node_bytes_per_second = 0;  ///< 0: not applicable (one GPU per node)
  double inter_node_bytes_per_second = 0;  ///< 0: not applicable (one node)
  double expected_bytes_per_second = 0;    ///< min of those that apply; 0: no communication
  std::string bottleneck;                  ///< one line: which link limits, e.g. "NV18 GPU0-GPU1"
};

/// The ring uses GPUs 0..gpus_per_node-1 of the node in index order. Throws
/// std::invalid_argument when gpus_per_node < 1, nodes < 1, or gpus_per_node exceeds the
/// node's GPUs.
BusBandwidth ExpectedAllReduceBusBandwidth(const NodeTopology& node, int gpus_per_node, int nodes);

/// NIC bandwidth the ring's inter-node hops get on a node running GPUs 0..gpus_per_node-1:
/// the sum of the rates of the distinct NICs NcclNic picks for those GPUs (each rank's NCCL
/// is pinned to its NIC, trainer/startup/bootstrap.h); NodeNetworkBytesPerSecond when no GPU has a
/// NIC path recorded.
double RingNetworkBytesPerSecond(const NodeTopology& node, int gpus_per_node);

/// The expected bus bandwidth of a job's collectives (all-reduce, all-gather,
/// reduce-scatter and broadcast share the ring bottleneck), as `ringpilot bench comm` and
/// the trainer's `ringpilot_expected_bus_bandwidth_bytes_per_second` report it.
struct JobBusBandwidth {
  double bytes_per_second = 0;  ///< 0: no model
  std::string source;           ///< the bottleneck, or why there is no figure
};
/// CUDA ranks: ExpectedAllReduceBusBandwidth (ranks_per_node GPUs per node). CPU ranks:
/// the node network (NodeNetworkBytesPerSecond) on several nodes, no model on one node.
/// Never throws (an impossible job gives 0 and the reason).
JobBusBandwidth ExpectedJobBusBandwidth(const NodeTopology& node, bool cuda, int ranks_per_node,
                                        int nodes);

/// NIC bandwidth the node offers to inter-node traffic: the sum of the rates of the ports
/// that are up, counting only IB/RoCE ports when the node has any (NCCL then uses them),
/// else its Ethernet interfaces.
double NodeNetworkBytesPerSecond(const NodeTopology& node);

}  // namespace ringpilot::topology
