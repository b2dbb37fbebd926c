#include "topology/render.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "topology/placement.h"

namespace ringpilot::topology {
namespace {

std::string Gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

std::string Rate(double bytes_per_second) {
  if (bytes_per_second <= 0) return "rate unknown";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g Gb/s (%.2f GB/s)", bytes_per_second * 8 / 1e9,
                bytes_per_second / 1e9);
  return buf;
}

std::string Numa(int id) { return id < 0 ? "N/A" : std::to_string(id); }

std::string Cell(const NodeTopology& topo, bool row_gpu, std::size_t r, bool col_gpu,
                 std::size_t c) {
  if (row_gpu == col_gpu && r == c) return "X";
  if (row_gpu && col_gpu) {
    const GpuLink* l = topo.FindLink(topo.gpus[r].index, topo.gpus[c].index);
    return l ? l->Label() : "unknown";
  }
  if (!row_gpu && !col_gpu) {
    const Nic& a = topo.nics[r];
    const auto it = a.nic_paths.find(topo.nics[c].name);
    return it == a.nic_paths.end() ? "unknown" : ToString(it->second);
  }
  const Gpu& g = topo.gpus[row_gpu ? r : c];
  const Nic& n = topo.nics[row_gpu ? c : r];
  const auto it = g.nic_paths.find(n.name);
  return it == g.nic_paths.end() ? "unknown" : ToString(it->second);
}

std::string Pad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

}  // namespace

std::string RenderText(const NodeTopology& topo) {
  std::ostringstream out;
  out << "Node " << (topo.hostname.empty() ? "(unknown host)" : topo.hostname);
  if (!topo.source.empty() && topo.source != "probe") out << " (" << topo.source << ")";
  out << "\n\n";
  const std::size_t ng = topo.gpus.size();
  const std::size_t nn = topo.nics.size();
  if (ng == 0) {
    out << "GPUs: none\n";
  } else {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < ng; ++i)
      names.push_back("GPU" + std::to_string(topo.gpus[i].index));
    for (std::size_t i = 0; i < nn; ++i) names.push_back("NIC" + std::to_string(i));
    constexpr std::size_t kCol = 7;
    out << Pad("", kCol);
    for (const std::string& n : names) out << Pad(n, kCol);
    out << Pad("CPU Affinity", 16) << "NUMA Affinity\n";
    for (std::size_t r = 0; r < ng + nn; ++r) {
      const bool row_gpu = r < ng;
      const std::size_t ri = row_gpu ? r : r - ng;
      std::ostringstream row;
      row << Pad(names[r], kCol);
      for (std::size_t c = 0; c < ng + nn; ++c) {
        const bool col_gpu = c < ng;
        row << Pad(Cell(topo, row_gpu, ri, col_gpu, col_gpu ? c : c - ng), kCol);
      }
      if (row_gpu) {
        const Gpu& g = topo.gpus[ri];
        row << Pad(FormatCpuList(GpuCpuSet(topo, g.index)), 16) << Numa(g.numa_node);
      }
      std::string line = row.str();
      line.erase(line.find_last_not_of(' ') + 1);
      out << line << "\n";
    }
    out << "\nLegend:\n"
           "  X    = Self\n"
           "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA "
           "nodes\n"
           "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
           "Bridges within a NUMA node\n"
           "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the "
           "CPU)\n"
           "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe "
           "Host Bridge)\n"
           "  PIX  = Connection traversing at most a single PCIe bridge\n"
           "  NV#  = Connection traversing a bonded set of # NVLinks\n";
    if (nn > 0) {
      out << "\nNIC Legend:\n";
      for (std::size_t i = 0; i < nn; ++i) out << "  NIC" << i << ": " << topo.nics[i].name << "\n";
    }
    out << "\nGPUs:\n";
    for (const Gpu& g : topo.gpus) {
      out << "  GPU" << g.index << ": " << g.name << ", PCI "
          << (g.pci_bus_id.empty() ? "not recorded" : g.pci_bus_id) << ", CC "
          << g.compute_capability.major << "." << g.compute_capability.minor << ", "
          << Gib(g.memory_bytes) << ", NUMA " << Numa(g.numa_node) << ", nearest NIC "
          << NearestNic(topo, g.index).value_or("none");
      if (!g.uuid.empty()) out << ", " << g.uuid;
      out << "\n";
    }
    std::vector<const GpuLink*> nvlinks;
    for (const GpuLink& l : topo.gpu_links) {
      if (l.IsNvlink()) nvlinks.push_back(&l);
    }
    const auto describe = [](const GpuLink& l) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%d links x %.6g GB/s = %.1f GB/s per direction",
                    l.nvlink_count, l.nvlink_bytes_per_second_per_link / 1e9,
                    l.NvlinkBytesPerSecond() / 1e9);
      return std::string(buf) +
             (l.via_nvswitch ? " through NVSwitch (each GPU's total, shared by its peers)" : "");
    };
    const bool uniform =
        nvlinks.size() > 2 && std::all_of(nvlinks.begin(), nvlinks.end(), [&](const GpuLink* l) {
          return describe(*l) == describe(*nvlinks.front());
        });
    if (!nvlinks.empty()) out << "\nNVLinks:\n";
    if (uniform) {
      out << "  every one of " << nvlinks.size() << " GPU pairs: " << describe(*nvlinks.front())
          << "\n";
    } else {
      for (const GpuLink* l : nvlinks) {
        out << "  GPU" << l->gpu_a << "-GPU" << l->gpu_b << ": " << describe(*l) << "\n";
      }
    }
  }
  out << "\nNUMA nodes:\n";
  if (topo.numa_nodes.empty()) out << "  none reported\n";
  for (const NumaNode& n : topo.numa_nodes) {
    out << "  node " << n.id << ": CPUs " << FormatCpuList(n.cpus) << " (" << n.cpus.size()
        << "), memory " << Gib(n.memory_bytes) << "\n";
  }
  out << "\nNICs:\n";
  if (topo.nics.empty()) out << "  none\n";
  for (const Nic& n : topo.nics) {
    out << "  " << n.name << ": " << ToString(n.kind) << ", " << n.port_state << ", "
        << Rate(n.rate_bytes_per_second) << ", PCI "
        << (n.pci_bus_id.empty() ? "none" : n.pci_bus_id) << ", NUMA " << Numa(n.numa_node);
    if (!n.netdev.empty() && n.netdev != n.name) out << ", netdev " << n.netdev;
    out << "\n";
  }
  if (!topo.warnings.empty()) {
    out << "\nWarnings:\n";
    for (const std::string& w : topo.warnings) out << "  " << w << "\n";
  }
  return out.str();
}

namespace {

// A quoted Graphviz string; each element of `lines` is one line of the label.
std::string DotQuote(const std::vector<std::string>& lines) {
  std::string out = "\"";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\\n";
    for (char c : lines[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c == '\n' ? ' ' : c;
    }
  }
  return out + "\"";
}

std::string DotQuote(const std::string& s) { return DotQuote(std::vector<std::string>{s}); }

}  // namespace

std::string RenderDot(const NodeTopology& topo) {
  std::ostringstream out;
  out << "graph " << DotQuote(topo.hostname.empty() ? "node" : topo.hostname) << " {\n"
      << "  node [shape=box];\n";
  std::vector<int> numa_ids;
  for (const NumaNode& n : topo.numa_nodes) numa_ids.push_back(n.id);
  numa_ids.push_back(-1);  // devices with no known NUMA node: outside every cluster
  for (int id : numa_ids) {
    const NumaNode* numa = topo.FindNuma(id);
    const std::string indent = numa ? "    " : "  ";
    if (numa) {
      out << "  subgraph cluster_numa" << id << " {\n"
          << "    label="
          << DotQuote("NUMA " + std::to_string(id) + ": CPUs " + FormatCpuList(numa->cpus))
          << ";\n";
    }
    for (const Gpu& g : topo.gpus) {
      if ((numa ? g.numa_node == id : !topo.FindNuma(g.numa_node))) {
        out << indent << "gpu" << g.index
            << " [label=" << DotQuote({"GPU" + std::to_string(g.index), g.name, g.pci_bus_id})
            << "];\n";
      }
    }
    for (std::size_t i = 0; i < topo.nics.size(); ++i) {
      const Nic& n = topo.nics[i];
      if ((numa ? n.numa_node == id : !topo.FindNuma(n.numa_node))) {
        out << indent << "nic" << i << " [shape=ellipse, label="
            << DotQuote({n.name, ToString(n.kind) + " " + Rate(n.rate_bytes_per_second)}) << "];\n";
      }
    }
    if (numa) out << "  }\n";
  }
  for (const GpuLink& l : topo.gpu_links) {
    out << "  gpu" << l.gpu_a << " -- gpu" << l.gpu_b
        << " [label=" << DotQuote(l.Label() + (l.via_nvswitch ? " (NVSwitch)" : ""))
        << (l.IsNvlink() ? ", penwidth=2" : ", style=dashed") << "];\n";
  }
  for (const Gpu& g : topo.gpus) {
    const auto nic = NearestNic(topo, g.index);
    if (!nic) continue;
    for (std::size_t i = 0; i < topo.nics.size(); ++i) {
      if (topo.nics[i].name != *nic) continue;
      const auto it = g.nic_paths.find(*nic);
      out << "  gpu" << g.index << " -- nic" << i
          << " [label=" << DotQuote(it == g.nic_paths.end() ? "unknown" : ToString(it->second))
          << ", style=dotted];\n";
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace ringpilot::topology
