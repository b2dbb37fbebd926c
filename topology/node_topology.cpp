#include "topology/node_topology.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace ringpilot::topology {

using nlohmann::json;

std::string ToString(LinkClass c) {
  switch (c) {
    case LinkClass::kPix:
      return "PIX";
    case LinkClass::kPxb:
      return "PXB";
    case LinkClass::kPhb:
      return "PHB";
    case LinkClass::kNode:
      return "NODE";
    case LinkClass::kSys:
      return "SYS";
    case LinkClass::kUnknown:
      break;
  }
  return "unknown";
}

std::optional<LinkClass> ParseLinkClass(const std::string& s) {
  for (LinkClass c : {LinkClass::kPix, LinkClass::kPxb, LinkClass::kPhb, LinkClass::kNode,
                      LinkClass::kSys, LinkClass::kUnknown}) {
    if (ToString(c) == s) return c;
  }
  return std::nullopt;
}

std::string ToString(NicKind k) {
  switch (k) {
    case NicKind::kInfiniBand:
      return "IB";
    case NicKind::kRoce:
      return "RoCE";
    case NicKind::kEthernet:
      break;
  }
  return "Ethernet";
}

std::optional<NicKind> ParseNicKind(const std::string& s) {
  for (NicKind k : {NicKind::kInfiniBand, NicKind::kRoce, NicKind::kEthernet}) {
    if (ToString(k) == s) return k;
  }
  return std::nullopt;
}

std::string GpuLink::Label() const {
  return IsNvlink() ? "NV" + std::to_string(nvlink_count) : ToString(pcie_path);
}

bool Nic::IsUp() const {
  std::string s = port_state;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (kind == NicKind::kEthernet) return s == "up" || s == "unknown" || s.empty();
  return s == "active";
}

const Gpu* NodeTopology::FindGpu(int index) const {
  for (const Gpu& g : gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

const Nic* NodeTopology::FindNic(const std::string& name) const {
  for (const Nic& n : nics) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const NumaNode* NodeTopology::FindNuma(int id) const {
  for (const NumaNode& n : numa_nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

const GpuLink* NodeTopology::FindLink(int gpu_a, int gpu_b) const {
  for (const GpuLink& l : gpu_links) {
    if ((l.gpu_a == gpu_a && l.gpu_b == gpu_b) || (l.gpu_a == gpu_b && l.gpu_b == gpu_a)) {
      return &l;
    }
  }
  return nullptr;
}

std::vector<int> NodeTopology::AllCpus() const {
  std::set<int> all;
  for (const NumaNode& n : numa_nodes) all.insert(n.cpus.begin(), n.cpus.end());
  return {all.begin(), all.end()};
}

std::string FormatCpuList(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> ParseCpuList(const std::string& text) {
  std::set<int> cpus;
  std::string trimmed = text;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) {
    trimmed.pop_back();
  }
  if (trimmed.empty()) return {};
  std::stringstream in(trimmed);
  std::string part;
  const auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 7 ||
        !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); })) {
      throw std::invalid_argument("'" + text + "' is not a CPU list (e.g. 0-3,8)");
    }
    return std::stoi(s);
  };
  while (std::getline(in, part, ',')) {
    const std::size_t dash = part.find('-');
    const int lo = number(part.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (hi < lo) throw std::invalid_argument("'" + text + "': range " + part + " is reversed");
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return {cpus.begin(), cpus.end()};
}

std::string NormalizePciBusId(const std::string& bus_id) {
  static const std::regex kBusId("^([0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}\\.[0-7]$");
  if (!std::regex_match(bus_id, kBusId)) return "";
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  char extra = 0;
  int n = std::sscanf(bus_id.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &extra);
  if (n != 4) {
    domain = 0;
    n = std::sscanf(bus_id.c_str(), "%x:%x.%x%c", &bus, &dev, &fn, &extra);
    if (n != 3) return "";
  }
  if (domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
  return buf;
}

// ---- JSON ----------------------------------------------------------------------------

namespace {

std::string CcString(const ComputeCapability& cc) {
  return std::to_string(cc.major) + "." + std::to_string(cc.minor);
}

// Reads typed fields of one JSON object, naming the field path in every error.
class Reader {
 public:
  Reader(const json& obj, std::string path) : obj_(obj), path_(std::move(path)) {
    if (!obj_.is_object()) Fail(path_.empty() ? "(top level)" : path_, "must be an object");
  }

  [[noreturn]] static void Fail(const std::string& field, const std::string& problem) {
    throw SnapshotError(field + ": " + problem);
  }
  std::string Field(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  bool Has(const std::string& key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const json& Get(const std::string& key) const {
    if (!obj_.contains(key)) Fail(Field(key), "missing");
    return obj_[key];
  }
  std::string String(const std::string& key) const {
    const json& v = Get(key);
    if (!v.is_string()) Fail(Field(key), "must be a string");
    return v.get<std::string>();
  }
  std::string OptString(const std::string& key) const { return Has(key) ? String(key) : ""; }
  bool OptBool(const std::string& key) const {
    if (!Has(key)) return false;
    const json& v = Get(key);
    if (!v.is_boolean()) Fail(Field(key), "must be true or false");
    return v.get<bool>();
  }
  std::int64_t Int(const std::string& key, std::int64_t min) const {
    const json& v = Get(key);
    if (!v.is_number_integer()) Fail(Field(key), "must be an integer");
    const std::int64_t x = v.get<std::int64_t>();
    if (x < min) Fail(Field(key), "must be >= " + std::to_string(min));
    return x;
  }
  std::uint64_t Bytes(const std::string& key) const {
    const json& v = Get(key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
      Fail(Field(key), "must be a non-negative integer");
    }
    return v.get<std::uint64_t>();
  }
  double Rate(const std::string& key) const {
    const json& v = Get(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      Fail(Field(key), "must be a non-negative number (bytes/s)");
    }
    return v.get<double>();
  }
  const json& Array(const std::string& key) const {
    const json& v = Get(key);
    if (!v.is_array()) Fail(Field(key), "must be an array");
    return v;
  }
  LinkClass Class(const std::string& key) const { return ClassOf(Get(key), Field(key)); }
  static LinkClass ClassOf(const json& v, const std::string& field) {
    const auto c = v.is_string() ? ParseLinkClass(v.get<std::string>()) : std::nullopt;
    if (!c) Fail(field, "must be one of PIX, PXB, PHB, NODE, SYS, unknown");
    return *c;
  }

 private:
  const json& obj_;
  std::string path_;
};

std::string Indexed(const std::string& key, std::size_t i) {
  return key + "[" + std::to_string(i) + "]";
}

}  // namespace

nlohmann::ordered_json ToJson(const NodeTopology& topo) {
  using json = nlohmann::ordered_json;
  json doc;
  doc["format"] = "ringpilot-topology";
  doc["version"] = NodeTopology::kFormatVersion;
  doc["hostname"] = topo.hostname;
  doc["source"] = topo.source;
  doc["numa_nodes"] = json::array();
  for (const NumaNode& n : topo.numa_nodes) {
    doc["numa_nodes"].push_back(
        {{"id", n.id}, {"cpus", FormatCpuList(n.cpus)}, {"memory_bytes", n.memory_bytes}});
  }
  doc["gpus"] = json::array();
  for (const Gpu& g : topo.gpus) {
    json paths = json::object();
    for (const auto& [nic, cls] : g.nic_paths) paths[nic] = ToString(cls);
    doc["gpus"].push_back({{"index", g.index},
                           {"name", g.name},
                           {"uuid", g.uuid},
                           {"pci_bus_id", g.pci_bus_id},
                           {"compute_capability", CcString(g.compute_capability)},
                           {"memory_bytes", g.memory_bytes},
                           {"numa_node", g.numa_node},
                           {"nic_paths", paths}});
  }
  doc["gpu_links"] = json::array();
  for (const GpuLink& l : topo.gpu_links) {
    json link = {{"gpus", {l.gpu_a, l.gpu_b}}, {"nvlink_count", l.nvlink_count}};
    if (l.IsNvlink()) {
      link["nvlink_bytes_per_second_per_link"] = l.nvlink_bytes_per_second_per_link;
      link["nvlink_bytes_per_second"] = l.NvlinkBytesPerSecond();
    }
    link["pcie_path"] = ToString(l.pcie_path);
    if (l.via_nvswitch) link["via_nvswitch"] = true;  // absent: direct links (older snapshots)
    doc["gpu_links"].push_back(link);
  }
  doc["nics"] = json::array();
  for (const Nic& n : topo.nics) {
    json paths = json::object();
    for (const auto& [nic, cls] : n.nic_paths) paths[nic] = ToString(cls);
    doc["nics"].push_back({{"name", n.name},
                           {"kind", ToString(n.kind)},
                           {"netdev", n.netdev},
                           {"port_state", n.port_state},
                           {"rate_bytes_per_second", n.rate_bytes_per_second},
                           {"pci_bus_id", n.pci_bus_id},
                           {"numa_node", n.numa_node},
                           {"nic_paths", paths}});
  }
  doc["warnings"] = topo.warnings;
  return doc;
}

NodeTopology FromJson(const json& doc) {
  const Reader top(doc, "");
  if (top.Has("format") && top.String("format") != "ringpilot-topology") {
    Reader::Fail("format", "must be \"ringpilot-topology\"");
  }
  const std::int64_t version = top.Int("version", 1);
  if (version != NodeTopology::kFormatVersion) {
    Reader::Fail("version", "unsupported version " + std::to_string(version) +
                                " (this build reads " +
                                std::to_string(NodeTopology::kFormatVersion) + ")");
  }
  NodeTopology topo;
  topo.hostname = top.String("hostname");
  topo.source = top.OptString("source");

  const json& numas = top.Array("numa_nodes");
  for (std::size_t i = 0; i < numas.size(); ++i) {
    const Reader r(numas[i], Indexed("numa_nodes", i));
    NumaNode n;
    n.id = static_cast<int>(r.Int("id", 0));
    try {
      n.cpus = ParseCpuList(r.String("cpus"));
    } catch (const std::invalid_argument& e) {
      Reader::Fail(r.Field("cpus"), e.what());
    }
    n.memory_bytes = r.Bytes("memory_bytes");
    if (topo.FindNuma(n.id)) Reader::Fail(r.Field("id"), "duplicate NUMA node id");
    topo.numa_nodes.push_back(std::move(n));
  }

  const json& nics = top.Array("nics");
  for (std::size_t i = 0; i < nics.size(); ++i) {
    const Reader r(nics[i], Indexed("nics", i));
    Nic n;
    n.name = r.String("name");
    if (n.name.empty()) Reader::Fail(r.Field("name"), "must not be empty");
    if (topo.FindNic(n.name)) Reader::Fail(r.Field("name"), "duplicate NIC '" + n.name + "'");
    const auto kind = ParseNicKind(r.String("kind"));
    if (!kind) Reader::Fail(r.Field("kind"), "must be one of IB, RoCE, Ethernet");
    n.kind = *kind;
    n.netdev = r.OptString("netdev");
    n.port_state = r.String("port_state");
    n.rate_bytes_per_second = r.Rate("rate_bytes_per_second");
    n.pci_bus_id = r.OptString("pci_bus_id");
    if (!n.pci_bus_id.empty() && NormalizePciBusId(n.pci_bus_id) != n.pci_bus_id) {
      Reader::Fail(r.Field("pci_bus_id"), "must look like 0000:18:00.0");
    }
    n.numa_node = static_cast<int>(r.Int("numa_node", -1));
    topo.nics.push_back(std::move(n));
  }
  // NIC-NIC paths once every NIC is known.
  for (std::size_t i = 0; i < nics.size(); ++i) {
    const Reader r(nics[i], Indexed("nics", i));
    if (!r.Has("nic_paths")) continue;
    const json& paths = r.Get("nic_paths");
    if (!paths.is_object()) Reader::Fail(r.Field("nic_paths"), "must be an object");
    for (auto it = paths.begin(); it != paths.end(); ++it) {
      const std::string field = r.Field("nic_paths") + "." + it.key();
      if (!topo.FindNic(it.key()) || it.key() == topo.nics[i].name) {
        Reader::Fail(field, "must name another NIC in 'nics'");
      }
      topo.nics[i].nic_paths[it.key()] = Reader::ClassOf(it.value(), field);
    }
  }

  const json& gpus = top.Array("gpus");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const Reader r(gpus[i], Indexed("gpus", i));
    Gpu g;
    g.index = static_cast<int>(r.Int("index", 0));
    if (topo.FindGpu(g.index)) Reader::Fail(r.Field("index"), "duplicate GPU index");
    g.name = r.String("name");
    g.uuid = r.String("uuid");
    g.pci_bus_id = r.String("pci_bus_id");  // "" when not recorded (hand-written snapshot)
    if (!g.pci_bus_id.empty() && NormalizePciBusId(g.pci_bus_id) != g.pci_bus_id) {
      Reader::Fail(r.Field("pci_bus_id"), "must look like 0000:18:00.0");
    }
    const std::string cc = r.String("compute_capability");
    char extra = 0;
    if (std::sscanf(cc.c_str(), "%d.%d%c", &g.compute_capability.major, &g.compute_capability.minor,
                    &extra) != 2 ||
        g.compute_capability.major < 0 || g.compute_capability.minor < 0) {
      Reader::Fail(r.Field("compute_capability"), "must look like \"9.0\"");
    }
    g.memory_bytes = r.Bytes("memory_bytes");
    g.numa_node = static_cast<int>(r.Int("numa_node", -1));
    if (r.Has("nic_paths")) {
      const json& paths = r.Get("nic_paths");
      if (!paths.is_object()) Reader::Fail(r.Field("nic_paths"), "must be an object");
      for (auto it = paths.begin(); it != paths.end(); ++it) {
        const std::string field = r.Field("nic_paths") + "." + it.key();
        if (!topo.FindNic(it.key())) Reader::Fail(field, "no NIC of that name in 'nics'");
        g.nic_paths[it.key()] = Reader::ClassOf(it.value(), field);
      }
    }
    topo.gpus.push_back(std::move(g));
  }

  const json& links = top.Array("gpu_links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    const Reader r(links[i], Indexed("gpu_links", i));
    const json& pair = r.Array("gpus");
    if (pair.size() != 2 || !pair[0].is_number_integer() || !pair[1].is_number_integer()) {
      Reader::Fail(r.Field("gpus"), "must be two GPU indices");
    }
    GpuLink l;
    l.gpu_a = std::min(pair[0].get<int>(), pair[1].get<int>());
    l.gpu_b = std::max(pair[0].get<int>(), pair[1].get<int>());
    if (l.gpu_a == l.gpu_b || !topo.FindGpu(l.gpu_a) || !topo.FindGpu(l.gpu_b)) {
      Reader::Fail(r.Field("gpus"), "must name two different GPUs listed in 'gpus'");
    }
    if (topo.FindLink(l.gpu_a, l.gpu_b)) Reader::Fail(r.Field("gpus"), "duplicate link");
    l.nvlink_count = static_cast<int>(r.Int("nvlink_count", 0));
    if (l.IsNvlink()) {
      l.nvlink_bytes_per_second_per_link = r.Rate("nvlink_bytes_per_second_per_link");
      if (l.nvlink_bytes_per_second_per_link <= 0) {
        Reader::Fail(r.Field("nvlink_bytes_per_second_per_link"), "must be > 0 with NVLinks");
      }
      if (r.Has("nvlink_bytes_per_second") &&
          std::abs(r.Rate("nvlink_bytes_per_second") - l.NvlinkBytesPerSecond()) >
              1e-6 * l.NvlinkBytesPerSecond()) {
        Reader::Fail(r.Field("nvlink_bytes_per_second"),
                     "must equal nvlink_count x nvlink_bytes_per_second_per_link");
      }
    }
    l.pcie_path = r.Has("pcie_path") ? r.Class("pcie_path") : LinkClass::kUnknown;
    l.via_nvswitch = r.OptBool("via_nvswitch");
    if (l.via_nvswitch && !l.IsNvlink()) {
      Reader::Fail(r.Field("via_nvswitch"), "needs nvlink_count > 0");
    }
    if (!l.IsNvlink() && l.pcie_path == LinkClass::kUnknown) {
      Reader::Fail(r.Field("pcie_path"), "required when nvlink_count is 0");
    }
    topo.gpu_links.push_back(l);
  }

  if (top.Has("warnings")) {
    const json& w = top.Array("warnings");
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (!w[i].is_string()) Reader::Fail(Indexed("warnings", i), "must be a string");
      topo.warnings.push_back(w[i].get<std::string>());
    }
  }
  return topo;
}

NodeTopology LoadSnapshot(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SnapshotError(path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const std::size_t at = what.find("] ");
    if (at != std::string::npos) what = what.substr(at + 2);
    throw SnapshotError(path + ": not valid JSON: " + what);
  }
  try {
    return FromJson(doc);
  } catch (const SnapshotError& e) {
    throw SnapshotError(path + ": " + e.what());
  } catch (const json::exception& e) {
    throw SnapshotError(path + ": " + e.what());
  }
}

}  // namespace ringpilot::topology
