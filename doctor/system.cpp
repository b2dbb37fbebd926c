// The real DoctorEnv (statvfs, getrlimit, commands with a timeout, NVML and libcuda and NCCL
// through dlopen, so `ringpilot` links neither CUDA nor NCCL), the check sequence, and the
// JSON and table renderings.
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <memory>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/subprocess.h"
#include "doctor/doctor.h"
#include "topology/node_topology.h"
#include "topology/nvml_api.h"

#ifndef RINGPILOT_CUDA_RUNTIME_VERSION
#define RINGPILOT_CUDA_RUNTIME_VERSION "unknown"
#endif

namespace ringpilot::doctor {
namespace {

// A command's output (stdout and stderr together) kept for the checks; the rest is dropped.
constexpr std::size_t kMaxCommandOutputBytes = 1 << 20;

// ---- NVML and the CUDA driver API, declared here (stable C ABIs) --------------------------

// NVML: topology/nvml_api.h (one table shared with the topology probe and the GPU sampler).
using topology::kNvmlSuccess;
using topology::nvmlDevice_t;

class Library {
 public:
  explicit Library(const std::string& name)
      : handle_(::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (!handle_) {
      const char* e = ::dlerror();
      error_ = e ? e : name + ": cannot be opened";
    }
  }
  ~Library() {
    if (handle_) ::dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  bool ok() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  template <typename F>
  F Get(const char* symbol) const {
    return handle_ ? reinterpret_cast<F>(::dlsym(handle_, symbol)) : nullptr;
  }

 private:
  void* handle_;
  std::string error_;
};

void QueryNvml(DriverInfo* info) {
  const std::unique_ptr<topology::NvmlApi> api =
      topology::NvmlApi::Load("libnvidia-ml.so.1", &info->nvml_error);
  if (!api) return;
  const topology::NvmlApi& nvml = *api;
  if (const int rc = nvml.Init(); rc != kNvmlSuccess) {
    info->nvml_error = "nvmlInit: " + nvml.Error(rc);
    return;
  }
  info->nvml_loaded = true;
  char buf[topology::kNvmlBufferSize] = {};
  if (nvml.SystemGetDriverVersion && nvml.SystemGetDriverVersion(buf, sizeof buf) == kNvmlSuccess) {
    info->driver_version = buf;
  }
  unsigned count = 0;
  if (nvml.DeviceGetCount(&count) == kNvmlSuccess)
    info->nvml_device_count = static_cast<int>(count);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (nvml.DeviceGetHandleByIndex(i, &dev) != kNvmlSuccess) continue;
    DriverGpu g;
    g.index = static_cast<int>(i);
    char nbuf[topology::kNvmlBufferSize] = {};
    if (nvml.DeviceGetName && nvml.DeviceGetName(dev, nbuf, sizeof nbuf) == kNvmlSuccess) {
      g.name = nbuf;
    }
    topology::nvmlPciInfo_t p{};
    if (nvml.DeviceGetPciInfo && nvml.DeviceGetPciInfo(dev, &p) == kNvmlSuccess) {
      g.pci_bus_id = topology::NormalizePciBusId(p.busId);
    }
    for (unsigned l = 0; nvml.DeviceGetNvLinkState && l < topology::kNvmlNvlinkMaxLinks; ++l) {
      int state = 0;
      if (nvml.DeviceGetNvLinkState(dev, l, &state) == kNvmlSuccess) {
        g.nvlink_states.push_back(state ? 1 : 0);
      }
    }
    unsigned long long n = 0;
    if (nvml.DeviceGetTotalEccErrors &&
        nvml.DeviceGetTotalEccErrors(dev, topology::kNvmlMemoryErrorUncorrected,
                                     topology::kNvmlVolatileEcc, &n) == kNvmlSuccess) {
      g.ecc_uncorrected_volatile = n;
    }
    if (nvml.DeviceGetRetiredPages) {
      std::uint64_t total = 0;
      bool ok = true;
      for (int cause : {0, 1}) {  // multiple single-bit, double-bit
        unsigned pages = 0;
        const int rc = nvml.DeviceGetRetiredPages(dev, cause, &pages, nullptr);
        ok = ok && (rc == kNvmlSuccess || rc == topology::kNvmlErrorInsufficientSize);
        total += pages;
      }
      if (ok) g.retired_pages = total;
    }
    int is_pending = 0;
    if (nvml.DeviceGetRetiredPagesPendingStatus &&
        nvml.DeviceGetRetiredPagesPendingStatus(dev, &is_pending) == kNvmlSuccess) {
      g.retired_pages_pending = is_pending;
    }
    unsigned corr = 0, unc = 0, rpending = 0, failed = 0;
    if (nvml.DeviceGetRemappedRows &&
        nvml.DeviceGetRemappedRows(dev, &corr, &unc, &rpending, &failed) == kNvmlSuccess) {
      g.remapped_rows_uncorrectable = unc;
      g.remapping_failed = failed != 0;
    }
    unsigned long long mask = 0;
    if (nvml.DeviceGetCurrentClocksEventReasons &&
        nvml.DeviceGetCurrentClocksEventReasons(dev, &mask) == kNvmlSuccess) {
      g.throttle_reasons = mask;
    }
    info->gpus.push_back(g);
  }
  nvml.Shutdown();
}

// Name and compute capability of each of the N devices libcuda enumerates, and the
// cuDeviceCanAccessPeer matrix (CUdevice is an int ordinal handle).
void QueryCudaDevices(const Library& lib, int n, DriverInfo* info) {
  const auto get = lib.Get<int (*)(int*, int)>("cuDeviceGet");
  const auto name = lib.Get<int (*)(char*, int, int)>("cuDeviceGetName");
  const auto attr = lib.Get<int (*)(int*, int, int)>("cuDeviceGetAttribute");
  const auto can_peer = lib.Get<int (*)(int*, int, int)>("cuDeviceCanAccessPeer");
  if (!get || !attr) return;
  constexpr int kCcMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  constexpr int kCcMinor = 76;
  std::vector<int> handles;
  for (int i = 0; i < n; ++i) {
    int h = 0;
    if (get(&h, i) != 0) return;
    handles.push_back(h);
    CudaDevice d;
    d.ordinal = i;
    char buf[256] = {};
    if (name && name(buf, static_cast<int>(sizeof buf), h) == 0) d.name = buf;
    if (attr(&d.cc_major, kCcMajor, h) != 0 || attr(&d.cc_minor, kCcMinor, h) != 0) {
      d.cc_major = d.cc_minor = 0;
    }
    info->cuda_devices.push_back(d);
  }
  if (!can_peer || n < 2) return;
  const auto count = static_cast<std::size_t>(n);
  info->peer_access.assign(count, std::vector<int>(count, -1));
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t j = 0; j < count; ++j) {
      int can = 0;
      if (i == j) {
        info->peer_access[i][j] = 1;
      } else if (can_peer(&can, handles[i], handles[j]) == 0) {
        info->peer_access[i][j] = can ? 1 : 0;
      }
    }
  }
}

void QueryCuda(DriverInfo* info) {
  Library lib("libcuda.so.1");
  if (!lib.ok()) {
    info->cuda_error = lib.error();
    return;
  }
  const auto driver_version = lib.Get<int (*)(int*)>("cuDriverGetVersion");
  const auto init = lib.Get<int (*)(unsigned)>("cuInit");
  const auto count = lib.Get<int (*)(int*)>("cuDeviceGetCount");
  if (!driver_version || !init || !count) {
    info->cuda_error = "libcuda.so.1 lacks cuDriverGetVersion/cuInit/cuDeviceGetCount";
    return;
  }
  info->cuda_loaded = true;
  int v = 0;
  if (driver_version(&v) == 0) info->cuda_driver_version = v;
  int n = 0;
  const int rc = init(0);
  if (rc == 0 && count(&n) == 0) {
    info->cuda_device_count = n;
  } else if (rc == 100) {  // CUDA_ERROR_NO_DEVICE: none visible
    info->cuda_device_count = 0;
  } else {
    info->cuda_error = "cuInit failed with CUresult " + std::to_string(rc);
  }
  QueryCudaDevices(lib, n, info);
}

LibraryInfo LoadNccl(const std::string& name_or_path) {
  LibraryInfo info;
  Library lib(name_or_path);
  if (!lib.ok()) {
    info.error = lib.error();
    return info;
  }
  const auto get_version = lib.Get<int (*)(int*)>("ncclGetVersion");
  if (!get_version) {
    info.error = name_or_path + " has no ncclGetVersion";
    return info;
  }
  int v = 0;
  if (get_version(&v) != 0) {
    info.error = "ncclGetVersion failed";
    return info;
  }
  info.loaded = true;
  info.version = v;
  return info;
}

CommandResult RunWithTimeout(const base::Environment& vars, const std::vector<std::string>& argv,
                             int timeout_s) {
  CommandResult result;
  const auto path_it = vars.find("PATH");
  base::SpawnOptions options;
  options.argv = argv;
  options.path = base::ResolveExecutable(argv.at(0), path_it == vars.end() ? "" : path_it->second);
  if (options.path.empty()) return result;
  options.own_process_group = true;
  options.stdin_from = base::ChildInput::kNull;
  options.stdout_to = base::ChildOutput::kPipe;
  options.stderr_to = base::ChildOutput::kMerge;
  base::RunResult run;
  try {
    run = base::RunToEnd(options, {static_cast<double>(timeout_s), kMaxCommandOutputBytes});
  } catch (const base::SpawnError&) {
    return result;
  }
  result.started = true;
  if (run.exec_errno != 0) {
    result.exit_code = base::kExitNotFound;  // as the child that failed to exec exits
    return result;
  }
  result.output = std::move(run.output);
  result.timed_out = run.timed_out;
  if (!result.timed_out) result.exit_code = run.status.exit_code;
  return result;
}

std::string SelfDir() { return base::DirName(base::SelfExecutablePath()); }

}  // namespace

std::string ToString(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "PASS";
    case CheckStatus::kWarn:
      return "WARN";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kSkip:
      return "SKIP";
  }
  return "SKIP";
}

DoctorEnv SystemDoctorEnv() {
  DoctorEnv env;
  env.vars = base::CurrentEnvironment();
  env.self_dir = SelfDir();
  env.cuda_runtime_version = RINGPILOT_CUDA_RUNTIME_VERSION;
  env.is_root = ::geteuid() == 0;
  env.fs_size = [](const std::string& path) -> std::optional<std::uint64_t> {
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) != 0) return std::nullopt;
    return static_cast<std::uint64_t>(st.f_blocks) * st.f_frsize;
  };
  env.memlock_limit = [] {
    MemlockLimit lim;
    rlimit rl{};
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
      lim.unlimited = rl.rlim_cur == RLIM_INFINITY;
      lim.bytes = lim.unlimited ? 0 : static_cast<std::uint64_t>(rl.rlim_cur);
    }
    return lim;
  };
  const base::Environment vars = env.vars;
  env.run = [vars](const std::vector<std::string>& argv, int timeout_s) {
    return RunWithTimeout(vars, argv, timeout_s);
  };
  env.query_driver = [] {
    DriverInfo info;
    QueryNvml(&info);
    QueryCuda(&info);
    return info;
  };
  env.load_nccl = LoadNccl;
  env.read_fatbin = ReadElfFatbin;
  return env;
}

std::vector<CheckResult> RunDoctor(const DoctorEnv& env, config::Device dev,
                                   DriverInfo* driver_out) {
  const DriverInfo drv =
      dev == config::Device::kCpu || !env.query_driver ? DriverInfo{} : env.query_driver();
  if (driver_out) *driver_out = drv;
  std::vector<CheckResult> checks = {
      CheckDriverVsRuntime(env, drv, dev),
      CheckGpusVisible(env, drv, dev),
      CheckNvlink(env, drv, dev),
      CheckEcc(env, drv, dev),
      CheckThrottle(env, drv, dev),
      CheckCudaArchitectures(env, drv, dev),
      CheckPeerAccess(env, drv, dev),
      CheckPcieAcs(env, dev),
      CheckIommu(env),
      CheckNumaAffinity(env, dev),
      CheckDevShm(env),
      CheckMemlock(env),
      CheckInfinibandPorts(env),
      CheckMpi(env),
      CheckTrainerLibraries(env, dev),
      CheckLibraryVersions(env),
  };
  if (env.program) {
    // The user's program brings its own CUDA libraries; the trainer's build is not used.
    for (CheckResult& c : checks) {
      if (c.name == "cuda_arch" || c.name == "trainer_libraries" || c.name == "library_versions") {
        c = {c.name, CheckStatus::kSkip,
             "the job runs its own program (launch.command), not ringpilot-trainer", ""};
      }
    }
  }
  return checks;
}

nlohmann::ordered_json DoctorJson(const std::vector<CheckResult>& checks) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const CheckResult& c : checks) {
    list.push_back(
        {{"name", c.name}, {"status", ToString(c.status)}, {"detail", c.detail}, {"hint", c.hint}});
  }
  nlohmann::ordered_json doc;
  doc["checks"] = list;
  return doc;
}

void RenderDoctorTable(const std::vector<CheckResult>& checks, std::ostream& out) {
  std::size_t width = 5;
  for (const CheckResult& c : checks) width = std::max(width, c.name.size());
  const auto pad = [](const std::string& s, std::size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
  };
  out << pad("CHECK", width) << "  STATUS  DETAIL\n";
  int counts[4] = {0, 0, 0, 0};
  for (const CheckResult& c : checks) {
    ++counts[static_cast<int>(c.status)];
    out << pad(c.name, width) << "  " << pad(ToString(c.status), 6) << "  " << c.detail << "\n";
    if (!c.hint.empty()) out << pad("", width) << "          hint: " << c.hint << "\n";
  }
  out << "\n"
      << counts[0] << " passed, " << counts[1] << " warnings, " << counts[2] << " failed, "
      << counts[3] << " skipped\n";
}

int DoctorExitStatus(const std::vector<CheckResult>& checks) {
  for (const CheckResult& c : checks) {
    if (c.status == CheckStatus::kFail) return 1;
  }
  return 0;
}

}  // namespace ringpilot::doctor
