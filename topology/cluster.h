// The cluster view of a job: one NodeReport per node (its topology as probed by its local
// rank 0, plus what the job can see of it), summarized into a few log lines and warnings
// about heterogeneity (GPU count or model, links, NICs across nodes) and hidden devices
// (fewer GPUs visible than present, uneven NVLinks, NICs down). Pure functions; the MPI
// gather is trainer/bootstrap.h.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/node_topology.h"

namespace ringpilot::topology {

/// What one node contributes to the cluster view.
struct NodeReport {
  NodeTopology topology;
  int ranks = 0;          ///< ranks of the job on the node
  int visible_gpus = -1;  ///< GPUs the ranks can use (CUDA device count); -1: unknown
  int pci_gpus = -1;      ///< NVIDIA GPUs on the node's PCI bus (sysfs); -1: unknown
};

/// {"ranks", "visible_gpus", "pci_gpus", "topology": snapshot}.
nlohmann::ordered_json ToJson(const NodeReport& report);
/// Throws SnapshotError("FIELD: problem") when `doc` is not a NodeReport.
NodeReport NodeReportFromJson(const nlohmann::json& doc);

struct ClusterSummary {
  std::vector<std::string> lines;     ///< first the totals, then one line per kind of node
  std::vector<std::string> warnings;  ///< one line each
};

/// Nodes with the same NodeSignature (and rank count) share one line, naming up to four
/// of them. Warnings: nodes that differ in GPU count, GPU model, GPU links, NICs (kind,
/// count, rate, ports up) or ranks; per node, GPUs present (NVML or PCI) but not visible,
/// GPU pairs without a recorded link or with fewer NVLinks than the best pair, NIC ports
/// down; probe warnings, each message once with the nodes that reported it.
ClusterSummary SummarizeCluster(const std::vector<NodeReport>& nodes);

/// "8x NVIDIA H100 80GB HBM3" ("4x A + 4x B" when mixed, "no GPU").
std::string GpuSummary(const NodeTopology& node);
/// Count of GPU pairs per link label, best first: "NV18 x28"; "PIX x2, SYS x4"; "-" with
/// fewer than two GPUs.
std::string LinkSummary(const NodeTopology& node);
/// NICs grouped by kind and rate: "8x IB 400 Gb/s"; ports down counted: "2x RoCE 100 Gb/s
/// (1 down)"; "no NIC".
std::string NicSummary(const NodeTopology& node);
/// "2 NUMA, 224 CPUs".
std::string CpuSummary(const NodeTopology& node);

/// NVIDIA display/3D controllers (vendor 0x10de, class 0x03xx) under
/// SYSFS/bus/pci/devices; -1 when the directory cannot be read.
int CountPciGpus(const std::string& sysfs_root = "/sys");

}  // namespace ringpilot::topology
