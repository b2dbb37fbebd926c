#include "topology/cluster.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>

namespace ringpilot::topology {
namespace {

std::string Gbits(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g Gb/s", bytes_per_second * 8 / 1e9);
  return buf;
}

// "a, b, c, d +3 more".
std::string Names(const std::vector<std::string>& names) {
  std::string out;
  const std::size_t shown = std::min<std::size_t>(names.size(), 4);
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += " +" + std::to_string(names.size() - shown) + " more";
  return out;
}

// Values of `key` per node, grouped: value -> hostnames (in node order).
std::vector<std::pair<std::string, std::vector<std::string>>> GroupBy(
    const std::vector<NodeReport>& nodes,
    const std::function<std::string(const NodeReport&)>& key) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const NodeReport& n : nodes) {
    const std::string k = key(n);
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == k; });
    if (it == groups.end()) {
      groups.push_back({k, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(n.topology.hostname);
  }
  return groups;
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

int IntField(const nlohmann::json& doc, const char* key) {
  if (!doc.contains(key)) throw SnapshotError(std::string(key) + ": missing");
  const nlohmann::json& v = doc.at(key);
  if (!v.is_number_integer() || v.get<long long>() < -1 || v.get<long long>() > 1000000) {
    throw SnapshotError(std::string(key) + ": expected an integer >= -1, got " + v.dump());
  }
  return v.get<int>();
}

}  // namespace

nlohmann::ordered_json ToJson(const NodeReport& r) {
  nlohmann::ordered_json j;
  j["ranks"] = r.ranks;
  j["visible_gpus"] = r.visible_gpus;
  j["pci_gpus"] = r.pci_gpus;
  j["topology"] = ToJson(r.topology);
  return j;
}

NodeReport NodeReportFromJson(const nlohmann::json& doc) {
  if (!doc.is_object()) throw SnapshotError("node report: expected an object");
  NodeReport r;
  r.ranks = IntField(doc, "ranks");
  r.visible_gpus = IntField(doc, "visible_gpus");
  r.pci_gpus = IntField(doc, "pci_gpus");
  if (!doc.contains("topology")) throw SnapshotError("topology: missing");
  try {
    r.topology = FromJson(doc.at("topology"));
  } catch (const SnapshotError& e) {
    throw SnapshotError(std::string("topology: ") + e.what());
  }
  return r;
}

std::string GpuSummary(const NodeTopology& node) {
  if (node.gpus.empty()) return "no GPU";
  std::vector<std::pair<std::string, int>> models;
  for (const Gpu& g : node.gpus) {
    const std::string name = g.name.empty() ? "GPU" : g.name;
    auto it =
        std::find_if(models.begin(), models.end(), [&](const auto& m) { return m.first == name; });
    if (it == models.end()) {
      models.push_back({name, 1});
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [name, count] : models) {
    out += (out.empty() ? "" : " + ") + std::to_string(count) + "x " + name;
  }
  return out;
}

std::string LinkSummary(const NodeTopology& node) {
  if (node.gpus.size() < 2) return "-";
  // Best first: NVLink by count (descending), then PCIe classes in order, unrecorded last.
  std::map<std::tuple<int, int, int>, std::pair<std::string, int>> counts;
  for (std::size_t i = 0; i < node.gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < node.gpus.size(); ++j) {
      const GpuLink* l = node.FindLink(node.gpus[i].index, node.gpus[j].index);
      std::tuple<int, int, int> key;
      std::string label;
      if (!l) {
        key = {2, 0, 0};
        label = "unrecorded";
      } else if (l->IsNvlink()) {
        key = {0, -l->nvlink_count, 0};
        label = l->Label();
      } else {
        key = {1, 0, static_cast<int>(l->pcie_path)};
        label = l->Label();
      }
      auto& c = counts[key];
      c.first = label;
      ++c.second;
    }
  }
  std::string out;
  for (const auto& [key, c] : counts) {
    out += (out.empty() ? "" : ", ") + c.first + " x" + std::to_string(c.second);
  }
  return out;
}

std::string NicSummary(const NodeTopology& node) {
  if (node.nics.empty()) return "no NIC";
  // kind, rate -> (count, down)
  std::map<std::pair<std::string, double>, std::pair<int, int>> groups;
  for (const Nic& n : node.nics) {
    auto& g = groups[{ToString(n.kind), -n.rate_bytes_per_second}];
    ++g.first;
    if (!n.IsUp()) ++g.second;
  }
  std::string out;
  for (const auto& [key, g] : groups) {
    out += (out.empty() ? "" : ", ") + std::to_string(g.first) + "x " + key.first + " " +
           (key.second < 0 ? Gbits(-key.second) : std::string("rate unknown"));
    if (g.second) out += " (" + std::to_string(g.second) + " down)";
  }
  return out;
}

std::string CpuSummary(const NodeTopology& node) {
  return std::to_string(node.numa_nodes.size()) + " NUMA, " +
         std::to_string(node.AllCpus().size()) + " CPUs";
}

ClusterSummary SummarizeCluster(const std::vector<NodeReport>& nodes) {
  ClusterSummary s;
  int ranks = 0;
  std::size_t gpus = 0;
  for (const NodeReport& n : nodes) {
    ranks += n.ranks;
    gpus += n.topology.gpus.size();
  }
  s.lines.push_back("cluster: " + std::to_string(nodes.size()) + " node(s), " +
                    std::to_string(ranks) + " rank(s), " + std::to_string(gpus) + " GPU(s)");
  const auto kinds = GroupBy(nodes, [](const NodeReport& n) {
    return GpuSummary(n.topology) + "; links " + LinkSummary(n.topology) + "; NICs " +
           NicSummary(n.topology) + "; " + CpuSummary(n.topology) + "; " + std::to_string(n.ranks) +
           " rank(s)";
  });
  for (const auto& [kind, names] : kinds) {
    s.lines.push_back("  " + std::to_string(names.size()) + " node(s) [" + Names(names) +
                      "]: " + kind);
  }

  // Heterogeneity across nodes.
  const std::pair<const char*, std::function<std::string(const NodeReport&)>> attributes[] = {
      {"GPU count", [](const NodeReport& n) { return std::to_string(n.topology.gpus.size()); }},
      {"GPU model",
       [](const NodeReport& n) {
         std::set<std::string> models;
         for (const Gpu& g : n.topology.gpus) models.insert(g.name);
         std::string out;
         for (const std::string& m : models) out += (out.empty() ? "" : " + ") + m;
         return out.empty() ? std::string("no GPU") : out;
       }},
      {"GPU links", [](const NodeReport& n) { return LinkSummary(n.topology); }},
      {"NICs", [](const NodeReport& n) { return NicSummary(n.topology); }},
      {"ranks", [](const NodeReport& n) { return std::to_string(n.ranks); }},
  };
  for (const auto& [what, key] : attributes) {
    const auto groups = GroupBy(nodes, key);
    if (groups.size() < 2) continue;
    std::string w = std::string("heterogeneous nodes: ") + what + " differs:";
    for (std::size_t i = 0; i < groups.size(); ++i) {
      w += (i ? ";" : "") + std::string(" ") + groups[i].first + " on " + Names(groups[i].second);
    }
    s.warnings.push_back(w);
  }

  // Hidden devices and links, per node.
  for (const NodeReport& n : nodes) {
    const NodeTopology& t = n.topology;
    const int present = static_cast<int>(t.gpus.size());
    if (n.visible_gpus >= 0 && n.visible_gpus < present) {
      s.warnings.push_back(t.hostname + ": " + std::to_string(present) + " GPU(s) present, " +
                           std::to_string(n.visible_gpus) +
                           " visible to the job (CUDA_VISIBLE_DEVICES or a device cgroup)");
    }
    if (n.pci_gpus > present) {
      s.warnings.push_back(t.hostname + ": " + std::to_string(n.pci_gpus) +
                           " NVIDIA GPU(s) on the PCI bus, " + std::to_string(present) +
                           " reported by NVML (hidden by a cgroup/container, or driver trouble)");
    }
    int best_nvlink = 0, unrecorded = 0;
    for (std::size_t i = 0; i < t.gpus.size(); ++i) {
      for (std::size_t j = i + 1; j < t.gpus.size(); ++j) {
        const GpuLink* l = t.FindLink(t.gpus[i].index, t.gpus[j].index);
        if (!l) ++unrecorded;
        if (l) best_nvlink = std::max(best_nvlink, l->nvlink_count);
      }
    }
    if (unrecorded) {
      s.warnings.push_back(t.hostname + ": no link recorded for " + std::to_string(unrecorded) +
                           " GPU pair(s)");
    }
    if (best_nvlink > 0) {
      std::vector<std::string> weak;
      for (const GpuLink& l : t.gpu_links) {
        if (l.nvlink_count < best_nvlink) {
          weak.push_back("GPU" + std::to_string(l.gpu_a) + "-GPU" + std::to_string(l.gpu_b) + " " +
                         l.Label());
        }
      }
      if (!weak.empty()) {
        s.warnings.push_back(t.hostname + ": " + std::to_string(weak.size()) +
                             " GPU pair(s) below NV" + std::to_string(best_nvlink) +
                             " (NVLinks down or missing): " + Names(weak));
      }
    }
    std::vector<std::string> down;
    for (const Nic& nic : t.nics) {
      if (!nic.IsUp()) down.push_back(nic.name + " " + nic.port_state);
    }
    if (!down.empty()) s.warnings.push_back(t.hostname + ": NIC port(s) down: " + Names(down));
  }

  // Probe warnings, each message once.
  std::vector<std::pair<std::string, std::vector<std::string>>> probe;
  for (const NodeReport& n : nodes) {
    for (const std::string& w : n.topology.warnings) {
      auto it =
          std::find_if(probe.begin(), probe.end(), [&](const auto& p) { return p.first == w; });
      if (it == probe.end()) {
        probe.push_back({w, {}});
        it = probe.end() - 1;
      }
      it->second.push_back(n.topology.hostname);
    }
  }
  for (const auto& [w, names] : probe) {
    s.lines.push_back("  probe note [" + Names(names) + "]: " + w);
  }
  return s;
}

int CountPciGpus(const std::string& sysfs_root) {
  const std::string dir = sysfs_root + "/bus/pci/devices";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return -1;
  int count = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string vendor = ReadFirstLine(dir + "/" + name + "/vendor");
    const std::string cls = ReadFirstLine(dir + "/" + name + "/class");
    // class 0x030000 (VGA) or 0x030200 (3D controller).
    if (vendor == "0x10de" && cls.rfind("0x03", 0) == 0) ++count;
  }
  ::closedir(d);
  return count;
}

}  // namespace ringpilot::topology
