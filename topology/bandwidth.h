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

/// NIC bandwidth the node offers to inter-node traffic: the sum of the rates of the ports
/// that are up, counting only IB/RoCE ports when the node has any (NCCL then uses them),
/// else its Ethernet interfaces.
double NodeNetworkBytesPerSecond(const NodeTopology& node);

}  // namespace ringpilot::topology
