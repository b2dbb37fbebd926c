// Human and Graphviz views of a NodeTopology (`ringpilot topo` and `ringpilot topo --dot`).
#pragma once

#include <string>

#include "topology/node_topology.h"

namespace ringpilot::topology {

/// A matrix like `nvidia-smi topo -m` (GPU and NIC rows and columns: NV# or the PCIe path
/// class, X on the diagonal; CPU and NUMA affinity columns for the GPUs), its legend, then
/// the NUMA nodes with their CPUs and memory, the NICs and any probe warnings.
std::string RenderText(const NodeTopology& topo);

/// Graphviz: NUMA nodes as clusters holding their GPUs and NICs, GPU-GPU edges labelled NV#
/// or the PCIe class, and each GPU's edge to its nearest NIC(s).
std::string RenderDot(const NodeTopology& topo);

}  // namespace ringpilot::topology
