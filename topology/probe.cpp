#include "topology/probe.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

namespace ringpilot::topology {
namespace fs = std::filesystem;

namespace {

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) {
    line.pop_back();
  }
  return line;
}

// The PCI function a sysfs device path sits under: the last path component that is a
// PCI bus id ("/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0" -> 0000:00:03.0).
std::string PciBusIdOf(const fs::path& device_path) {
  std::error_code ec;
  const fs::path real = fs::canonical(device_path, ec);
  if (ec) return "";
  std::string found;
  for (const fs::path& part : real) {
    const std::string s = part.string();
    if (s.size() == 12 && NormalizePciBusId(s) == s) found = s;
  }
  return found;
}

int PciNuma(const std::string& sysfs_root, const std::string& bus_id) {
  if (bus_id.empty()) return -1;
  const std::string text =
      ReadLine(fs::path(sysfs_root) / "bus/pci/devices" / bus_id / "numa_node");
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  return text.empty() || *end != '\0' || v < 0 ? -1 : static_cast<int>(v);
}

std::vector<std::string> SortedEntries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool IsVirtualNetdev(const std::string& name, const fs::path& class_entry) {
  for (const char* prefix : {"lo", "veth", "docker", "br-", "virbr", "cni", "flannel", "cali",
                             "vxlan", "tun", "tap", "ifb", "dummy"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  std::error_code ec;
  const std::string real = fs::canonical(class_entry, ec).string();
  if (ec || real.find("/devices/virtual/") != std::string::npos) return true;
  if (fs::exists(class_entry / "bridge", ec)) return true;
  return !fs::exists(class_entry / "device", ec);
}

}  // namespace

double ParseIbRate(const std::string& text) {
  std::istringstream in(text);
  double value = 0;
  std::string unit;
  if (!(in >> value >> unit) || value <= 0) return 0;
  if (unit == "Gb/sec" || unit == "Gb/s") return value * 1e9 / 8;
  if (unit == "Mb/sec" || unit == "Mb/s") return value * 1e6 / 8;
  return 0;
}

std::vector<Nic> ProbeNics(const std::string& sysfs_root, std::vector<std::string>* warnings) {
  std::vector<Nic> nics;
  std::set<std::string> rdma_netdevs;
  const fs::path ib_class = fs::path(sysfs_root) / "class/infiniband";
  for (const std::string& dev : SortedEntries(ib_class)) {
    const fs::path dir = ib_class / dev;
    const std::string bus_id = PciBusIdOf(dir / "device");
    std::vector<std::string> netdevs = SortedEntries(dir / "device/net");
    rdma_netdevs.insert(netdevs.begin(), netdevs.end());
    const std::vector<std::string> ports = SortedEntries(dir / "ports");
    if (ports.empty()) warnings->push_back("sysfs: " + dir.string() + ": no ports");
    for (const std::string& port : ports) {
      const fs::path p = dir / "ports" / port;
      Nic nic;
      nic.name = port == "1" ? dev : dev + ":" + port;
      nic.kind = ReadLine(p / "link_layer") == "Ethernet" ? NicKind::kRoce : NicKind::kInfiniBand;
      std::string state = ReadLine(p / "state");  // "4: ACTIVE"
      const std::size_t colon = state.find(": ");
      nic.port_state = colon == std::string::npos ? state : state.substr(colon + 2);
      nic.rate_bytes_per_second = ParseIbRate(ReadLine(p / "rate"));
      if (nic.rate_bytes_per_second == 0) {
        warnings->push_back("sysfs: " + (p / "rate").string() + ": unreadable rate");
      }
      nic.pci_bus_id = bus_id;
      nic.numa_node = PciNuma(sysfs_root, bus_id);
      if (!netdevs.empty()) nic.netdev = netdevs.front();
      nics.push_back(std::move(nic));
    }
  }
  const fs::path net_class = fs::path(sysfs_root) / "class/net";
  const std::vector<std::string> netdevs = SortedEntries(net_class);
  if (netdevs.empty()) warnings->push_back("sysfs: " + net_class.string() + ": no interfaces");
  for (const std::string& name : netdevs) {
    const fs::path dir = net_class / name;
    if (rdma_netdevs.count(name) || IsVirtualNetdev(name, dir)) continue;
    Nic nic;
    nic.name = name;
    nic.kind = NicKind::kEthernet;
    nic.netdev = name;
    nic.port_state = ReadLine(dir / "operstate");
    const std::string speed = ReadLine(dir / "speed");  // Mb/s; -1 or unreadable: unknown
    char* end = nullptr;
    const double mbps = std::strtod(speed.c_str(), &end);
    nic.rate_bytes_per_second = !speed.empty() && *end == '\0' && mbps > 0 ? mbps * 1e6 / 8 : 0;
    nic.pci_bus_id = PciBusIdOf(dir);
    nic.numa_node = PciNuma(sysfs_root, nic.pci_bus_id);
    nics.push_back(std::move(nic));
  }
  return nics;
}

LinkClass ClassifyPciPath(const std::vector<PciHop>& a, const std::vector<PciHop>& b,
                          bool same_numa) {
  for (std::size_t ia = 0; ia < a.size(); ++ia) {
    for (std::size_t ib = 0; ib < b.size(); ++ib) {
      if (a[ia].id != b[ib].id) continue;
      switch (a[ia].kind) {
        case HopKind::kPciBridge:
          // A switch is an upstream port with downstream ports below it: devices on one
          // switch meet at most one bridge below the common one.
          return ia <= 1 && ib <= 1 ? LinkClass::kPix : LinkClass::kPxb;
        case HopKind::kHostBridge:
          return LinkClass::kPhb;
        case HopKind::kOther:
          return same_numa ? LinkClass::kNode : LinkClass::kSys;
      }
    }
  }
  return same_numa ? LinkClass::kNode : LinkClass::kSys;
}

namespace {

std::vector<int> BitmapToList(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

// Ancestor chain of a PCI function in hwloc's tree; empty when hwloc does not have it.
std::vector<PciHop> PciChain(hwloc_topology_t topo, const std::string& bus_id) {
  std::vector<PciHop> chain;
  if (bus_id.empty()) return chain;
  hwloc_obj_t obj = hwloc_get_pcidev_by_busidstring(topo, bus_id.c_str());
  if (!obj) return chain;
  for (hwloc_obj_t p = obj->parent; p; p = p->parent) {
    HopKind kind = HopKind::kOther;
    if (p->type == HWLOC_OBJ_BRIDGE) {
      kind = p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? HopKind::kHostBridge
                                                                    : HopKind::kPciBridge;
    } else if (p->type == HWLOC_OBJ_PCI_DEVICE) {
      kind = HopKind::kPciBridge;
    }
    chain.push_back({reinterpret_cast<std::uintptr_t>(p), kind});
  }
  return chain;
}

class Hwloc {
 public:
  Hwloc() {
    if (hwloc_topology_init(&topo_) != 0) {
      topo_ = nullptr;
      return;
    }
    hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_load(topo_) != 0) {
      hwloc_topology_destroy(topo_);
      topo_ = nullptr;
    }
  }
  ~Hwloc() {
    if (topo_) hwloc_topology_destroy(topo_);
  }
  Hwloc(const Hwloc&) = delete;
  Hwloc& operator=(const Hwloc&) = delete;
  hwloc_topology_t get() const { return topo_; }

 private:
  hwloc_topology_t topo_ = nullptr;
};

}  // namespace

NodeTopology ProbeNode(const ProbeOptions& options) {
  NodeTopology topo;
  topo.source = "probe";
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) == 0) topo.hostname = host;

  Hwloc hwloc;
  if (!hwloc.get()) {
    topo.warnings.push_back("hwloc: topology load failed: no NUMA/CPU/PCI information");
  } else {
    const int n = hwloc_get_nbobjs_by_type(hwloc.get(), HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t obj = hwloc_get_obj_by_type(hwloc.get(), HWLOC_OBJ_NUMANODE, i);
      NumaNode node;
      node.id = static_cast<int>(obj->os_index);
      node.cpus = BitmapToList(obj->cpuset);
      node.memory_bytes = obj->attr->numanode.local_memory;
      topo.numa_nodes.push_back(std::move(node));
    }
    if (topo.numa_nodes.empty()) topo.warnings.push_back("hwloc: no NUMA node found");
  }
  // A machine with one NUMA node: every device is on it, whatever sysfs says (-1).
  const int only_numa = topo.numa_nodes.size() == 1 ? topo.numa_nodes.front().id : -1;
  const auto fix_numa = [&](int numa) { return numa < 0 ? only_numa : numa; };

  topo.nics = ProbeNics(options.sysfs_root, &topo.warnings);
  for (Nic& nic : topo.nics) nic.numa_node = fix_numa(nic.numa_node);

  std::vector<NvmlGpu> gpus;
  if (options.use_nvml) gpus = ProbeNvml(options.nvml_library, options.sysfs_root, &topo.warnings);
  for (NvmlGpu& g : gpus) g.gpu.numa_node = fix_numa(g.gpu.numa_node);
  topo.gpu_links = NvlinkConnections(gpus);

  const auto pcie_class = [&](const std::string& bus_a, int numa_a, const std::string& bus_b,
                              int numa_b) {
    if (!hwloc.get()) return LinkClass::kUnknown;
    const std::vector<PciHop> a = PciChain(hwloc.get(), bus_a);
    const std::vector<PciHop> b = PciChain(hwloc.get(), bus_b);
    if (a.empty() || b.empty()) return LinkClass::kUnknown;
    return ClassifyPciPath(a, b, numa_a >= 0 && numa_a == numa_b);
  };
  for (Nic& a : topo.nics) {
    for (const Nic& b : topo.nics) {
      if (&a == &b) continue;
      a.nic_paths[b.name] = pcie_class(a.pci_bus_id, a.numa_node, b.pci_bus_id, b.numa_node);
    }
  }
  for (NvmlGpu& g : gpus) {
    for (const Nic& nic : topo.nics) {
      const LinkClass c =
          pcie_class(g.gpu.pci_bus_id, g.gpu.numa_node, nic.pci_bus_id, nic.numa_node);
      g.gpu.nic_paths[nic.name] = c;
      if (c == LinkClass::kUnknown && !nic.pci_bus_id.empty()) {
        topo.warnings.push_back("hwloc: no PCI path between GPU " + std::to_string(g.gpu.index) +
                                " and " + nic.name);
      }
    }
    topo.gpus.push_back(g.gpu);
  }
  for (std::size_t i = 0; i < topo.gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < topo.gpus.size(); ++j) {
      const Gpu& a = topo.gpus[i];
      const Gpu& b = topo.gpus[j];
      const LinkClass c = pcie_class(a.pci_bus_id, a.numa_node, b.pci_bus_id, b.numa_node);
      GpuLink* link = nullptr;
      for (GpuLink& l : topo.gpu_links) {
        if (l.gpu_a == std::min(a.index, b.index) && l.gpu_b == std::max(a.index, b.index)) {
          link = &l;
        }
      }
      if (link) {
        link->pcie_path = c;
        continue;
      }
      GpuLink l;
      l.gpu_a = std::min(a.index, b.index);
      l.gpu_b = std::max(a.index, b.index);
      l.pcie_path = c == LinkClass::kUnknown ? LinkClass::kSys : c;
      if (c == LinkClass::kUnknown) {
        topo.warnings.push_back("hwloc: no PCI path between GPU " + std::to_string(a.index) +
                                " and GPU " + std::to_string(b.index) + ": assumed SYS");
      }
      topo.gpu_links.push_back(l);
    }
  }
  std::sort(topo.gpu_links.begin(), topo.gpu_links.end(), [](const GpuLink& x, const GpuLink& y) {
    return std::tie(x.gpu_a, x.gpu_b) < std::tie(y.gpu_a, y.gpu_b);
  });
  return topo;
}

}  // namespace ringpilot::topology
