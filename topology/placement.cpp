#include "topology/placement.h"

#include <algorithm>
#include <tuple>

namespace ringpilot::topology {

namespace {

std::optional<std::string> Nearest(const NodeTopology& node, int gpu_index,
                                   bool (*eligible)(const Nic&)) {
  const Gpu* gpu = node.FindGpu(gpu_index);
  if (!gpu) return std::nullopt;
  const Nic* best = nullptr;
  auto key = [&](const Nic& n) {
    const auto it = gpu->nic_paths.find(n.name);
    const LinkClass c = it == gpu->nic_paths.end() ? LinkClass::kUnknown : it->second;
    const bool same_numa = gpu->numa_node >= 0 && n.numa_node == gpu->numa_node;
    return std::make_tuple(!n.IsUp(), static_cast<int>(c), !same_numa, -n.rate_bytes_per_second,
                           n.name);
  };
  for (const Nic& n : node.nics) {
    if (eligible(n) && (!best || key(n) < key(*best))) best = &n;
  }
  if (!best) return std::nullopt;
  return best->name;
}

bool AnyNic(const Nic&) { return true; }
bool UpRdma(const Nic& n) { return n.IsUp() && n.kind != NicKind::kEthernet; }
bool UpEthernet(const Nic& n) { return n.IsUp() && n.kind == NicKind::kEthernet; }

}  // namespace

std::optional<std::string> NearestNic(const NodeTopology& node, int gpu_index) {
  return Nearest(node, gpu_index, AnyNic);
}

std::optional<std::string> NcclNic(const NodeTopology& node, int gpu_index) {
  const bool rdma = std::any_of(node.nics.begin(), node.nics.end(), UpRdma);
  return Nearest(node, gpu_index, rdma ? UpRdma : UpEthernet);
}

std::vector<int> GpuCpuSet(const NodeTopology& node, int gpu_index) {
  const Gpu* gpu = node.FindGpu(gpu_index);
  if (!gpu) return {};
  const NumaNode* numa = node.FindNuma(gpu->numa_node);
  return numa ? numa->cpus : node.AllCpus();
}

}  // namespace ringpilot::topology
