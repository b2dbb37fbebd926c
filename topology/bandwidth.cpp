#include "topology/bandwidth.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "topology/placement.h"

namespace ringpilot::topology {
namespace {

std::string Gbps(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_second / 1e9);
  return buf;
}

}  // namespace

double PcieBytesPerSecond(LinkClass c) {
  switch (c) {
    case LinkClass::kPix:
      return 22e9;
    case LinkClass::kPxb:
      return 20e9;
    case LinkClass::kPhb:
      return 16e9;
    case LinkClass::kNode:
      return 14e9;
    case LinkClass::kSys:
      return 10e9;
    case LinkClass::kUnknown:
      break;
  }
  return 0;
}

double NodeNetworkBytesPerSecond(const NodeTopology& node) {
  const bool have_rdma = std::any_of(node.nics.begin(), node.nics.end(), [](const Nic& n) {
    return n.kind != NicKind::kEthernet && n.IsUp() && n.rate_bytes_per_second > 0;
  });
  double sum = 0;
  for (const Nic& n : node.nics) {
    if (!n.IsUp()) continue;
    if (have_rdma && n.kind == NicKind::kEthernet) continue;
    sum += n.rate_bytes_per_second;
  }
  return sum;
}

double RingNetworkBytesPerSecond(const NodeTopology& node, int gpus_per_node) {
  std::vector<int> gpus;
  for (const Gpu& g : node.gpus) gpus.push_back(g.index);
  std::sort(gpus.begin(), gpus.end());
  if (gpus.size() > static_cast<std::size_t>(std::max(gpus_per_node, 0))) {
    gpus.resize(static_cast<std::size_t>(std::max(gpus_per_node, 0)));
  }
  bool any_path = false;
  std::set<std::string> used;
  for (int g : gpus) {
    any_path = any_path || !node.FindGpu(g)->nic_paths.empty();
    if (const auto nic = NcclNic(node, g)) used.insert(*nic);
  }
  if (!any_path) return NodeNetworkBytesPerSecond(node);
  double sum = 0;
  for (const std::string& name : used) sum += node.FindNic(name)->rate_bytes_per_second;
  return sum;
}

JobBusBandwidth ExpectedJobBusBandwidth(const NodeTopology& node, bool cuda, int ranks_per_node,
                                        int nodes) {
  JobBusBandwidth e;
  if (cuda) {
    try {
      const BusBandwidth bw = ExpectedAllReduceBusBandwidth(node, ranks_per_node, nodes);
      e.bytes_per_second = bw.expected_bytes_per_second;
      e.source = bw.bottleneck;
    } catch (const std::invalid_argument& ex) {
      e.source = std::string("no topology model: ") + ex.what();
    }
  } else if (nodes > 1) {
    e.bytes_per_second = NodeNetworkBytesPerSecond(node);
    e.source = "node network " + Gbps(e.bytes_per_second);
  } else {
    e.source = "no model for CPU ranks on one node";
  }
  return e;
}

BusBandwidth ExpectedAllReduceBusBandwidth(const NodeTopology& node, int gpus_per_node, int nodes) {
  if (nodes < 1) throw std::invalid_argument("nodes must be >= 1");
  if (gpus_per_node < 1) throw std::invalid_argument("gpus_per_node must be >= 1");
  if (static_cast<std::size_t>(gpus_per_node) > node.gpus.size()) {
    throw std::invalid_argument("gpus_per_node " + std::to_string(gpus_per_node) +
                                " exceeds the node's " + std::to_string(node.gpus.size()) +
                                " GPUs");
  }
  std::vector<int> ring;
  for (const Gpu& g : node.gpus) ring.push_back(g.index);
  std::sort(ring.begin(), ring.end());
  ring.resize(static_cast<std::size_t>(gpus_per_node));

  BusBandwidth bw;
  std::string intra_what;
  if (gpus_per_node > 1) {
    double best = -1;
    // A ring of two is one pair; otherwise each GPU to the next and the last to the first.
    const std::size_t hops = ring.size() == 2 ? 1 : ring.size();
    for (std::size_t i = 0; i < hops; ++i) {
      const int a = ring[i];
      const int b = ring[(i + 1) % ring.size()];
      const GpuLink* link = node.FindLink(a, b);
      const double rate = !link              ? 0
                          : link->IsNvlink() ? link->NvlinkBytesPerSecond()
                                             : PcieBytesPerSecond(link->pcie_path);
      if (best < 0 || rate < best) {
        best = rate;
        intra_what = (link ? link->Label() : std::string("no recorded link")) + " GPU" +
                     std::to_string(a) + "-GPU" + std::to_string(b);
      }
    }
    bw.intra_node_bytes_per_second = std::max(best, 0.0);
  }
  std::string inter_what;
  if (nodes > 1) {
    // Each ring crosses between nodes on one NIC; the rings of a node's GPUs together get
    // the bandwidth of the NICs those GPUs use.
    bw.inter_node_bytes_per_second = RingNetworkBytesPerSecond(node, gpus_per_node);
    inter_what = "network " + Gbps(bw.inter_node_bytes_per_second) + " per node";
  }
  if (gpus_per_node > 1 && nodes > 1) {
    const bool intra_limits = bw.intra_node_bytes_per_second <= bw.inter_node_bytes_per_second;
    bw.expected_bytes_per_second =
        std::min(bw.intra_node_bytes_per_second, bw.inter_node_bytes_per_second);
    bw.bottleneck = intra_limits ? intra_what : inter_what;
  } else if (gpus_per_node > 1) {
    bw.expected_bytes_per_second = bw.intra_node_bytes_per_second;
    bw.bottleneck = intra_what;
  } else if (nodes > 1) {
    bw.expected_bytes_per_second = bw.inter_node_bytes_per_second;
    bw.bottleneck = inter_what;
  } else {
    bw.bottleneck = "one GPU: no communication";
  }
  return bw;
}

}  // namespace ringpilot::topology
