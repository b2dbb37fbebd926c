// Doctor checks that read the NVIDIA driver: driver vs CUDA runtime, GPUs visible vs present,
// NVLink state, ECC / retired pages / XID, clock throttle reasons.
#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

#include "base/environment.h"
#include "base/files.h"
#include "doctor/check_context.h"
#include "doctor/detail_text.h"
#include "doctor/doctor.h"

namespace ringpilot::doctor {
namespace {

using base::ListDir;

// Minimum NVIDIA driver branch per CUDA runtime (CUDA release notes, "CUDA Toolkit and
// Corresponding Driver Versions", Linux x86_64). A runtime between two rows needs at least the
// lower row's driver; docs/doctor.md carries the same table.
struct DriverRow {
  int cuda_major;
  int cuda_minor;
  int min_driver;
};
constexpr DriverRow kDriverTable[] = {
    {13, 0, 580}, {12, 8, 570}, {12, 4, 550}, {12, 0, 525}, {11, 8, 520},
};

// Oldest driver a CUDA major release runs on at all, through minor version compatibility
// (PTX JIT and some newer APIs need the table's driver).
struct FloorRow {
  int cuda_major;
  int min_driver;
};
constexpr FloorRow kMinorCompatFloor[] = {{13, 580}, {12, 525}, {11, 450}};

std::string Plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

int DriverBranch(const std::string& version) { return std::atoi(version.c_str()); }

std::string CudaVersionText(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

bool ParseMajorMinor(const std::string& text, int* major, int* minor) {
  std::smatch m;
  static const std::regex re(R"(^(\d+)\.(\d+))");
  if (!std::regex_search(text, m, re)) return false;
  *major = std::stoi(m[1]);
  *minor = std::stoi(m[2]);
  return true;
}

CheckResult Result(const std::string& name, CheckStatus status, std::string detail,
                   std::string hint = "") {
  return {name, status, std::move(detail), std::move(hint)};
}

// GPUs CUDA will enumerate given CUDA_VISIBLE_DEVICES and TOTAL devices: the list is read up
// to its first invalid entry (as the CUDA runtime does).
int VisibleFromEnv(const base::Environment& vars, int total) {
  const auto it = vars.find("CUDA_VISIBLE_DEVICES");
  if (it == vars.end()) return total;
  std::set<std::string> seen;
  int count = 0;
  std::stringstream in(it->second);
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(std::remove_if(item.begin(), item.end(), ::isspace), item.end());
    if (item.empty() || !seen.insert(item).second) break;
    if (item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0) {
      ++count;
      continue;
    }
    if (item.find_first_not_of("0123456789") != std::string::npos) break;
    if (std::atoi(item.c_str()) >= total) break;
    ++count;
  }
  return count;
}

}  // namespace

bool GpuGate(const std::string& name, const DoctorEnv& env, const DriverInfo& drv,
             config::Device dev, bool needs_nvml, CheckResult* out) {
  // Only the driver and visibility checks FAIL for `--device cuda` without a GPU; the
  // per-GPU checks SKIP instead of repeating it.
  const bool primary = name == "driver_cuda_runtime" || name == "gpus_visible";
  if (dev == config::Device::kCpu) {
    *out = CheckResult{name, CheckStatus::kSkip, "--device cpu: GPU check not run", ""};
    return true;
  }
  const int present = PresentGpuCount(env);
  if (present == 0 && drv.nvml_device_count <= 0 && drv.cuda_device_count <= 0) {
    if (dev == config::Device::kCuda && primary) {
      *out = CheckResult{name, CheckStatus::kFail, "--device cuda but no NVIDIA GPU is present",
                         "run on a GPU node, or use --device cpu; in a container pass the GPUs "
                         "(docker --gpus all, k8s resource nvidia.com/gpu)"};
    } else {
      *out = CheckResult{name, CheckStatus::kSkip, "no NVIDIA GPU present", ""};
    }
    return true;
  }
  if (needs_nvml && !drv.nvml_loaded) {
    *out = CheckResult{name, CheckStatus::kSkip, "NVML not available: " + drv.nvml_error, ""};
    return true;
  }
  return false;
}

int MinimumDriverFor(int cuda_major, int cuda_minor) {
  for (const DriverRow& row : kDriverTable) {
    if (cuda_major > row.cuda_major ||
        (cuda_major == row.cuda_major && cuda_minor >= row.cuda_minor)) {
      return row.min_driver;
    }
  }
  return 0;
}

int MinorCompatibilityFloor(int cuda_major) {
  for (const FloorRow& row : kMinorCompatFloor) {
    if (row.cuda_major == cuda_major) return row.min_driver;
  }
  return MinimumDriverFor(cuda_major, 0);
}

std::vector<std::string> SysfsNvidiaGpus(const std::string& sysfs_root) {
  std::vector<std::string> gpus;
  const std::string base = sysfs_root + "/bus/pci/devices/";
  for (const std::string& fn : ListDir(base)) {
    if (ReadTrimmed(base + fn + "/vendor") != "0x10de") continue;
    const std::string cls = ReadTrimmed(base + fn + "/class");
    // 0x0300xx VGA controller, 0x0302xx 3D controller (data-centre GPUs).
    if (cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0) gpus.push_back(fn);
  }
  return gpus;
}

int PresentGpuCount(const DoctorEnv& env) {
  const auto proc = ListDir(env.proc_root + "/driver/nvidia/gpus");
  if (!proc.empty()) return static_cast<int>(proc.size());
  static const std::regex dev_re(R"(^nvidia\d+$)");
  int devs = 0;
  for (const std::string& n : ListDir(env.dev_root)) devs += std::regex_match(n, dev_re) ? 1 : 0;
  if (devs > 0) return devs;
  return static_cast<int>(SysfsNvidiaGpus(env.sysfs_root).size());
}

CheckResult CheckDriverVsRuntime(const DoctorEnv& env, const DriverInfo& drv, config::Device dev) {
  const std::string name = "driver_cuda_runtime";
  CheckResult skip;
  if (GpuGate(name, env, drv, dev, /*needs_nvml=*/false, &skip)) return skip;
  const int branch = DriverBranch(drv.driver_version);
  if (branch <= 0 && drv.cuda_driver_version <= 0) {
    return Result(name, CheckStatus::kFail,
                  "GPUs present but the driver cannot be queried (NVML: " +
                      (drv.nvml_loaded ? std::string("no version") : drv.nvml_error) +
                      "; libcuda: " + (drv.cuda_loaded ? "no version" : drv.cuda_error) + ")",
                  "install the NVIDIA driver on the host; in a container use the NVIDIA "
                  "Container Toolkit (docker --gpus all) so libcuda.so.1 and "
                  "libnvidia-ml.so.1 are mounted");
  }
  std::string have = branch > 0 ? "driver " + drv.driver_version : "driver (branch unknown)";
  if (drv.cuda_driver_version > 0) {
    have += " (supports CUDA " + CudaVersionText(drv.cuda_driver_version) + ")";
  }
  int major = 0;
  int minor = 0;
  if (env.cuda_runtime_version.empty() || env.cuda_runtime_version == "unknown" ||
      !ParseMajorMinor(env.cuda_runtime_version, &major, &minor)) {
    return Result(name, CheckStatus::kSkip,
                  have +
                      "; the trainer's CUDA runtime version is unknown (ringpilot was "
                      "configured without the CUDA toolkit), nothing to compare");
  }
  const std::string want = "CUDA " + std::to_string(major) + "." + std::to_string(minor);
  const int need = MinimumDriverFor(major, minor);
  const int floor = MinorCompatibilityFloor(major);
  const std::string upgrade = "upgrade the NVIDIA driver to " + std::to_string(need) +
                              " or newer (or build the trainer against an older CUDA "
                              "toolkit / LibTorch wheel); see the table in docs/doctor.md";
  if (branch > 0) {
    const std::string cmp =
        have + " vs " + want + " runtime (needs driver >= " + std::to_string(need) + ")";
    if (branch >= need) return Result(name, CheckStatus::kPass, cmp);
    if (branch >= floor) {
      return Result(name, CheckStatus::kWarn,
                    cmp + ": runs only through minor version compatibility (no PTX JIT)", upgrade);
    }
    return Result(name, CheckStatus::kFail, cmp + ": the CUDA runtime will not initialise",
                  upgrade);
  }
  // Only the CUDA version the driver supports is known.
  const int want_v = major * 1000 + minor * 10;
  const std::string cmp = have + " vs " + want + " runtime";
  if (drv.cuda_driver_version >= want_v) return Result(name, CheckStatus::kPass, cmp);
  if (drv.cuda_driver_version / 1000 == major) {
    return Result(name, CheckStatus::kWarn, cmp + ": minor version compatibility only", upgrade);
  }
  return Result(name, CheckStatus::kFail, cmp + ": the CUDA runtime will not initialise", upgrade);
}

CheckResult CheckGpusVisible(const DoctorEnv& env, const DriverInfo& drv, config::Device dev) {
  const std::string name = "gpus_visible";
  CheckResult skip;
  if (GpuGate(name, env, drv, dev, /*needs_nvml=*/false, &skip)) return skip;
  const int present = PresentGpuCount(env);
  if (drv.nvml_device_count >= 0 && drv.nvml_device_count < present) {
    return Result(name, CheckStatus::kFail,
                  "the driver manages " + std::to_string(drv.nvml_device_count) + " of " +
                      std::to_string(present) + " GPUs present",
                  "a GPU fell off the bus or failed to initialise: check `nvidia-smi` and "
                  "`dmesg | grep -e NVRM -e Xid`; reset the GPU or reboot the node");
  }
  const int total = drv.nvml_device_count >= 0 ? drv.nvml_device_count : present;
  const int visible =
      drv.cuda_device_count >= 0 ? drv.cuda_device_count : VisibleFromEnv(env.vars, total);
  const auto cvd = env.vars.find("CUDA_VISIBLE_DEVICES");
  const std::string cvd_text =
      cvd == env.vars.end() ? "CUDA_VISIBLE_DEVICES unset" : "CUDA_VISIBLE_DEVICES=" + cvd->second;
  const std::string detail = std::to_string(visible) + " of " + std::to_string(total) +
                             " GPUs visible to CUDA (" + cvd_text + ")";
  if (visible == 0) {
    return Result(name, dev == config::Device::kCuda ? CheckStatus::kFail : CheckStatus::kWarn,
                  detail,
                  "no GPU is visible: fix CUDA_VISIBLE_DEVICES, or the container's GPU list "
                  "(docker --gpus, NVIDIA_VISIBLE_DEVICES, the device cgroup)");
  }
  if (visible < total) {
    return Result(name, CheckStatus::kWarn, detail,
                  "intended when sharing the node; otherwise unset CUDA_VISIBLE_DEVICES or "
                  "widen the container's GPU list: a GPU hidden from its NVLink peers sends "
                  "NCCL traffic over PCIe or the network");
  }
  return Result(name, CheckStatus::kPass, detail);
}

CheckResult CheckNvlink(const DoctorEnv& env, const DriverInfo& drv, config::Device dev) {
  const std::string name = "nvlink";
  CheckResult skip;
  if (GpuGate(name, env, drv, dev, /*needs_nvml=*/true, &skip)) return skip;
  std::size_t max_active = 0;
  std::size_t links = 0;
  for (const DriverGpu& g : drv.gpus) {
    max_active = std::max<std::size_t>(
        max_active, std::count(g.nvlink_states.begin(), g.nvlink_states.end(), 1));
    links += g.nvlink_states.size();
  }
  if (links == 0) return Result(name, CheckStatus::kSkip, "no NVLink on these GPUs (PCIe only)");
  std::vector<std::string> short_gpus;
  std::size_t inactive_total = 0;
  for (const DriverGpu& g : drv.gpus) {
    const auto active =
        static_cast<std::size_t>(std::count(g.nvlink_states.begin(), g.nvlink_states.end(), 1));
    inactive_total += g.nvlink_states.size() - active;
    if (active < max_active) {
      short_gpus.push_back("GPU " + std::to_string(g.index) + ": " + std::to_string(active) +
                           " of " + std::to_string(g.nvlink_states.size()) + " active");
    }
  }
  if (!short_gpus.empty()) {
    return Result(name, CheckStatus::kFail,
                  Join(short_gpus, "; ") + " (peers have " + std::to_string(max_active) + ")",
                  "inactive NVLinks: check `nvidia-smi nvlink -s` and `nvidia-smi -q | grep "
                  "-i remap`; reset the GPU or reseat it; on NVSwitch systems restart "
                  "nvidia-fabricmanager");
  }
  if (max_active == 0) {
    return Result(name, CheckStatus::kWarn,
                  "all " + Plural(links, "NVLink", "NVLinks") + " inactive on every GPU",
                  "NVSwitch systems need nvidia-fabricmanager running (systemctl status "
                  "nvidia-fabricmanager); PCIe cards need their NVLink bridge installed");
  }
  return Result(name, CheckStatus::kPass,
                std::to_string(max_active) + " NVLinks active on each of " +
                    Plural(drv.gpus.size(), "GPU", "GPUs") +
                    (inactive_total ? " (" + std::to_string(inactive_total) +
                                          " unused links, same on every GPU)"
                                    : ""));
}

CheckResult CheckEcc(const DoctorEnv& env, const DriverInfo& drv, config::Device dev) {
  const std::string name = "ecc_xid";
  CheckResult skip;
  if (GpuGate(name, env, drv, dev, /*needs_nvml=*/true, &skip)) return skip;
  std::vector<std::string> fails;
  std::vector<std::string> warns;
  bool any = false;
  for (const DriverGpu& g : drv.gpus) {
    const std::string id = "GPU " + std::to_string(g.index) + ": ";
    if (g.ecc_uncorrected_volatile) {
      any = true;
      if (*g.ecc_uncorrected_volatile > 0) {
        fails.push_back(id + std::to_string(*g.ecc_uncorrected_volatile) +
                        " uncorrected ECC errors since driver load");
      }
    }
    if (g.remapping_failed) {
      any = true;
      if (*g.remapping_failed) fails.push_back(id + "row remapping failed");
    }
    if (g.remapped_rows_uncorrectable && *g.remapped_rows_uncorrectable > 0) {
      warns.push_back(id + std::to_string(*g.remapped_rows_uncorrectable) +
                      " rows remapped for uncorrectable errors");
    }
    if (g.retired_pages) {
      any = true;
      if (*g.retired_pages > 0)
        warns.push_back(id + std::to_string(*g.retired_pages) + " retired pages");
    }
    if (g.retired_pages_pending && *g.retired_pages_pending) {
      warns.push_back(id + "page retirement pending a GPU reset");
    }
  }
  // XID lines from the kernel log, where this process may read it.
  std::string xid_note =
      env.quick ? "quick preflight, XIDs not checked" : "kernel log not readable, XIDs not checked";
  const CommandResult dmesg = env.run && !env.quick ? env.run({"dmesg"}, 5) : CommandResult{};
  if (dmesg.started && dmesg.exit_code == 0) {
    std::vector<std::string> xids;
    std::istringstream in(dmesg.output);
    for (std::string line; std::getline(in, line);) {
      if (line.find("NVRM: Xid") != std::string::npos) xids.push_back(line);
    }
    xid_note = xids.empty() ? "no XID in the kernel log"
                            : std::to_string(xids.size()) +
                                  " XID lines in the kernel log, last: " + xids.back();
    if (!xids.empty()) warns.push_back(xid_note);
  }
  if (!any && fails.empty() && warns.empty()) {
    return Result(name, CheckStatus::kSkip,
                  "NVML reports no ECC or page retirement counters (ECC off or not "
                  "supported); " +
                      xid_note);
  }
  const std::string hint =
      "look up the XID / ECC event in NVIDIA's XID catalogue; drain the node and reset the "
      "GPU (nvidia-smi -r) to apply pending retirements; repeated uncorrected errors mean RMA";
  if (!fails.empty()) {
    fails.insert(fails.end(), warns.begin(), warns.end());
    return Result(name, CheckStatus::kFail, Join(fails, "; "), hint);
  }
  if (!warns.empty()) return Result(name, CheckStatus::kWarn, Join(warns, "; "), hint);
  return Result(name, CheckStatus::kPass,
                "no uncorrected ECC errors or retired pages on " +
                    Plural(drv.gpus.size(), "GPU", "GPUs") + "; " + xid_note);
}

CheckResult CheckThrottle(const DoctorEnv& env, const DriverInfo& drv, config::Device dev) {
  const std::string name = "clock_throttle";
  CheckResult skip;
  if (GpuGate(name, env, drv, dev, /*needs_nvml=*/true, &skip)) return skip;
  struct Reason {
    std::uint64_t bit;
    const char* text;
    bool hardware;
  };
  // nvmlClocksEventReason* bits; idle, application clocks, sync boost and display clock
  // settings are benign and not listed.
  constexpr Reason kReasons[] = {
      {0x4, "SW power cap", false},         {0x8, "HW slowdown", true},
      {0x20, "SW thermal slowdown", false}, {0x40, "HW thermal slowdown", true},
      {0x80, "HW power brake", true},
  };
  std::vector<std::string> found;
  bool hardware = false;
  bool any = false;
  for (const DriverGpu& g : drv.gpus) {
    if (!g.throttle_reasons) continue;
    any = true;
    std::vector<std::string> names;
    for (const Reason& r : kReasons) {
      if (*g.throttle_reasons & r.bit) {
        names.push_back(r.text);
        hardware = hardware || r.hardware;
      }
    }
    if (!names.empty())
      found.push_back("GPU " + std::to_string(g.index) + ": " + Join(names, ", "));
  }
  if (!any) return Result(name, CheckStatus::kSkip, "NVML does not report throttle reasons");
  if (found.empty()) {
    return Result(name, CheckStatus::kPass,
                  "no power or thermal throttling on " + Plural(drv.gpus.size(), "GPU", "GPUs"));
  }
  return Result(name, hardware ? CheckStatus::kFail : CheckStatus::kWarn, Join(found, "; "),
                "a throttled GPU makes its rank a straggler: check cooling and power "
                "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER), the power limit "
                "(nvidia-smi -pl) and the chassis fans");
}

}  // namespace ringpilot::doctor
