// Doctor checks of the PCI fabric around the GPUs: ACS on the bridges above them, IOMMU mode,
// NUMA affinity of each GPU to the CPUs this process may run on.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "base/environment.h"
#include "base/files.h"
#include "doctor/check_context.h"
#include "doctor/detail_text.h"
#include "doctor/doctor.h"
#include "topology/node_topology.h"

namespace ringpilot::doctor {
namespace {

using base::ListDir;

constexpr std::size_t kExtendedConfigStart = 0x100;
constexpr std::size_t kExtendedConfigSize = 4096;
constexpr std::uint16_t kAcsCapabilityId = 0x000d;
// ACS Control bits that send peer-to-peer traffic up to the root complex.
constexpr std::uint16_t kAcsRequestRedirect = 0x0004;
constexpr std::uint16_t kAcsCompletionRedirect = 0x0008;
constexpr std::uint16_t kAcsEgressControl = 0x0020;

std::uint32_t Le32(const std::string& b, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}

bool IsPciAddress(const std::string& name) {
  static const std::regex re(R"(^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$)");
  return std::regex_match(name, re);
}

// PCI functions above DEVICE (nearest first): its parent directories in the sysfs device tree
// that are PCI addresses.
std::vector<std::filesystem::path> UpstreamBridges(const std::string& sysfs_root,
                                                   const std::string& device) {
  std::error_code ec;
  const auto real = std::filesystem::canonical(sysfs_root + "/bus/pci/devices/" + device, ec);
  std::vector<std::filesystem::path> out;
  if (ec) return out;
  for (auto p = real.parent_path(); IsPciAddress(p.filename().string()); p = p.parent_path()) {
    out.push_back(p);
  }
  return out;
}

std::set<int> AllowedCpus(const std::string& proc_root) {
  std::istringstream in(ReadBytes(proc_root + "/self/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) != 0) continue;
    std::string list = line.substr(line.find(':') + 1);
    list.erase(std::remove_if(list.begin(), list.end(), ::isspace), list.end());
    try {
      const auto cpus = topology::ParseCpuList(list);
      return {cpus.begin(), cpus.end()};
    } catch (const std::invalid_argument&) {
      return {};
    }
  }
  return {};
}

}  // namespace

std::optional<std::uint16_t> AcsControl(const std::string& config) {
  if (config.size() < kExtendedConfigSize) return std::nullopt;
  std::size_t offset = kExtendedConfigStart;
  for (int hops = 0; hops < 64; ++hops) {
    const std::uint32_t header = Le32(config, offset);
    if (header == 0 || header == 0xffffffffu) return std::nullopt;
    if ((header & 0xffffu) == kAcsCapabilityId) {
      return static_cast<std::uint16_t>(Le32(config, offset + 4) >> 16);
    }
    const std::size_t next = (header >> 20) & 0xffcu;
    if (next < kExtendedConfigStart || next + 8 > config.size()) return std::nullopt;
    offset = next;
  }
  return std::nullopt;
}

CheckResult CheckPcieAcs(const DoctorEnv& env, config::Device dev) {
  const std::string name = "pcie_acs";
  if (dev == config::Device::kCpu) {
    return {name, CheckStatus::kSkip, "--device cpu: GPU check not run", ""};
  }
  const auto gpus = SysfsNvidiaGpus(env.sysfs_root);
  if (gpus.empty()) return {name, CheckStatus::kSkip, "no NVIDIA GPU on the PCI bus", ""};
  std::set<std::string> checked;
  std::set<std::string> unreadable;
  std::vector<std::string> redirecting;
  for (const std::string& gpu : gpus) {
    for (const auto& bridge : UpstreamBridges(env.sysfs_root, gpu)) {
      const std::string id = bridge.filename().string();
      if (checked.count(id) || unreadable.count(id)) continue;
      const std::string config = ReadBytes((bridge / "config").string());
      if (config.size() < kExtendedConfigSize) {
        unreadable.insert(id);
        continue;
      }
      checked.insert(id);
      const auto ctl = AcsControl(config);
      if (!ctl) continue;  // no ACS capability: nothing redirects
      std::vector<std::string> bits;
      if (*ctl & kAcsRequestRedirect) bits.push_back("ReqRedir");
      if (*ctl & kAcsCompletionRedirect) bits.push_back("CmpltRedir");
      if (*ctl & kAcsEgressControl) bits.push_back("EgressCtrl");
      if (!bits.empty())
        redirecting.push_back(id + " (" + Join(bits, "+") + ", above " + gpu + ")");
    }
  }
  if (!redirecting.empty()) {
    return {name, CheckStatus::kWarn,
            "ACS redirects peer-to-peer traffic on " + Join(redirecting, "; "),
            "GPU P2P and GPUDirect RDMA go through the root complex (slow, or hang): disable "
            "ACS in the BIOS, or `setpci -s BRIDGE ECAP_ACS+6.w=0` at boot; keep it on only "
            "where VMs need isolation"};
  }
  if (checked.empty()) {
    return {name, CheckStatus::kSkip,
            unreadable.empty()
                ? "no PCI bridges above the GPUs in sysfs"
                : "PCI extended config space of " + std::to_string(unreadable.size()) +
                      " bridges not readable (run as root)",
            ""};
  }
  return {
      name, CheckStatus::kPass,
      "no ACS redirect on " + std::to_string(checked.size()) + " bridges above " +
          std::to_string(gpus.size()) + " GPUs" +
          (unreadable.empty() ? "" : " (" + std::to_string(unreadable.size()) + " not readable)"),
      ""};
}

CheckResult CheckIommu(const DoctorEnv& env) {
  const std::string name = "iommu";
  const std::string cmdline = ReadTrimmed(env.proc_root + "/cmdline");
  std::vector<std::string> flags;
  {
    std::istringstream in(cmdline);
    for (std::string tok; in >> tok;) {
      if (tok == "--") break;
      if (tok.find("iommu") != std::string::npos) flags.push_back(tok);
    }
  }
  const bool pt_flag = std::find(flags.begin(), flags.end(), "iommu=pt") != flags.end();
  const std::string flag_text = flags.empty() ? "no iommu flags on the kernel command line"
                                              : "kernel command line: " + Join(flags, " ");
  const auto units = ListDir(env.sysfs_root + "/class/iommu");
  const std::string groups_dir = env.sysfs_root + "/kernel/iommu_groups/";
  std::set<std::string> types;
  const auto groups = ListDir(groups_dir);
  for (const std::string& g : groups) {
    const std::string t = ReadTrimmed(groups_dir + g + "/type");
    if (!t.empty()) types.insert(t);
  }
  if (units.empty() && groups.empty()) {
    return {name, CheckStatus::kPass, "no IOMMU active (DMA not remapped); " + flag_text, ""};
  }
  const bool translated = types.count("DMA") || types.count("DMA-FQ");
  const std::string detail = std::to_string(groups.size()) + " IOMMU groups, domain types " +
                             (types.empty() ? "unknown" : Join({types.begin(), types.end()}, "/")) +
                             "; " + flag_text;
  if (!translated && (pt_flag || types.count("identity"))) {
    return {name, CheckStatus::kPass, "IOMMU in passthrough mode: " + detail, ""};
  }
  if (translated) {
    const bool devices = !SysfsNvidiaGpus(env.sysfs_root).empty() ||
                         !ListDir(env.sysfs_root + "/class/infiniband").empty();
    if (!devices) return {name, CheckStatus::kPass, "IOMMU translates DMA: " + detail, ""};
    return {name, CheckStatus::kWarn, "IOMMU translates DMA for GPUs/NICs: " + detail,
            "translation slows or blocks GPU peer-to-peer and GPUDirect RDMA: add iommu=pt "
            "to the kernel command line (with intel_iommu=on / amd_iommu=on), unless VMs need "
            "the isolation"};
  }
  return {name, CheckStatus::kSkip, "IOMMU present, mode not determinable: " + detail, ""};
}

CheckResult CheckNumaAffinity(const DoctorEnv& env, config::Device dev) {
  const std::string name = "numa_affinity";
  if (dev == config::Device::kCpu) {
    return {name, CheckStatus::kSkip, "--device cpu: GPU check not run", ""};
  }
  const auto gpus = SysfsNvidiaGpus(env.sysfs_root);
  if (gpus.empty()) return {name, CheckStatus::kSkip, "no NVIDIA GPU on the PCI bus", ""};
  int numa_nodes = 0;
  for (const std::string& n : ListDir(env.sysfs_root + "/devices/system/node")) {
    numa_nodes += std::regex_match(n, std::regex(R"(node\d+)")) ? 1 : 0;
  }
  const std::set<int> allowed = AllowedCpus(env.proc_root);
  std::vector<std::string> rows;
  std::vector<std::string> unknown;
  std::vector<std::string> excluded;
  for (const std::string& gpu : gpus) {
    const std::string dir = env.sysfs_root + "/bus/pci/devices/" + gpu + "/";
    const std::string node_text = ReadTrimmed(dir + "numa_node");
    const int node = node_text.empty() ? -1 : std::atoi(node_text.c_str());
    const std::string local = ReadTrimmed(dir + "local_cpulist");
    rows.push_back(gpu + " NUMA " + (node < 0 ? "?" : std::to_string(node)) +
                   (local.empty() ? "" : " (CPUs " + local + ")"));
    if (node < 0 && numa_nodes > 1) unknown.push_back(gpu);
    if (!local.empty() && !allowed.empty()) {
      std::vector<int> cpus;
      try {
        cpus = topology::ParseCpuList(local);
      } catch (const std::invalid_argument&) {
      }
      const bool reachable =
          std::any_of(cpus.begin(), cpus.end(), [&](int c) { return allowed.count(c) > 0; });
      if (!cpus.empty() && !reachable) excluded.push_back(gpu);
    }
  }
  const std::string detail = Join(rows, "; ");
  if (!excluded.empty()) {
    return {name, CheckStatus::kWarn,
            "this process may run on no CPU local to " + Join(excluded, ", ") + ": " + detail,
            "the cpuset (taskset, cgroup, Slurm --cpu-bind, k8s CPU manager) keeps ranks off "
            "their GPU's NUMA node: widen it, or use topology-aware placement"};
  }
  if (!unknown.empty()) {
    return {name, CheckStatus::kWarn,
            std::to_string(numa_nodes) + " NUMA nodes but firmware reports none for " +
                Join(unknown, ", "),
            "enable ACPI SRAT/NUMA in the BIOS (or 'NPS' settings on AMD) so GPU placement can "
            "use NUMA locality"};
  }
  return {name, CheckStatus::kPass, detail, ""};
}

}  // namespace ringpilot::doctor
