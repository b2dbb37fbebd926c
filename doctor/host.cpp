// Doctor checks of the host outside the GPUs: /dev/shm, memlock, InfiniBand ports, the MPI
// runtime, the trainer's shared libraries (LibTorch, NCCL and its version).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <sstream>

#include "base/environment.h"
#include "base/files.h"
#include "doctor/check_context.h"
#include "doctor/detail_text.h"
#include "doctor/doctor.h"
#include "topology/probe.h"

namespace ringpilot::doctor {
namespace {

using base::ListDir;
using base::Lookup;

constexpr std::uint64_t kMiB = 1024ull * 1024;
constexpr std::uint64_t kShmFailBelow = 512 * kMiB;
constexpr std::uint64_t kShmWarnBelow = 1024 * kMiB;
constexpr std::uint64_t kMemlockWarnFrom = 1024 * kMiB;  // below: FAIL with RDMA devices
constexpr int kMpiVersionTimeoutS = 10;
constexpr int kMpiRunTimeoutS = 30;
constexpr int kLddTimeoutS = 10;

// "4: ACTIVE" -> "ACTIVE".
std::string AfterColon(const std::string& s) {
  const auto pos = s.find(':');
  std::string v = pos == std::string::npos ? s : s.substr(pos + 1);
  v.erase(0, v.find_first_not_of(' '));
  return v;
}

}  // namespace

std::string ParseMpiVersion(const std::string& out) {
  std::smatch m;
  static const std::regex ompi(R"(\(Open MPI\)\s+([0-9][0-9A-Za-z.\-]*))");
  static const std::regex mpich(R"(HYDRA build details:[\s\S]*?Version:\s+([0-9][0-9.a-z]*))");
  static const std::regex intel(R"(Intel\(R\) MPI Library[^\n]*Version\s+([0-9][^\s]*))");
  if (std::regex_search(out, m, ompi)) return "Open MPI " + m[1].str();
  if (std::regex_search(out, m, mpich)) return "MPICH " + m[1].str();
  if (std::regex_search(out, m, intel)) return "Intel MPI " + m[1].str();
  return "";
}

std::string LddResolution(const std::string& ldd_output, const std::string& soname_prefix) {
  std::istringstream in(ldd_output);
  for (std::string line; std::getline(in, line);) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, soname_prefix.size(), soname_prefix)) {
      continue;
    }
    const auto arrow = line.find("=> ");
    if (arrow == std::string::npos) return "";
    std::string rest = line.substr(arrow + 3);
    if (rest.rfind("not found", 0) == 0) return "not found";
    return rest.substr(0, rest.find(" ("));
  }
  return "";
}

CheckResult CheckDevShm(const DoctorEnv& env) {
  const std::string name = "dev_shm";
  const std::string hint =
      "NCCL's SHM transport and MPI's shared-memory BTL live in /dev/shm: docker run "
      "--shm-size=16g (or --ipc=host); on Kubernetes mount an emptyDir with medium: Memory "
      "at /dev/shm (ringpilot k8s render does)";
  const auto size = env.fs_size ? env.fs_size(env.shm_path) : std::nullopt;
  if (!size) {
    return {name, CheckStatus::kFail, env.shm_path + " is missing or not a file system", hint};
  }
  const std::string detail = env.shm_path + " is " + FormatBytes(*size);
  if (*size < kShmFailBelow) {
    return {name, CheckStatus::kFail, detail + " (below 512 MiB: NCCL/MPI shared memory fails)",
            hint};
  }
  if (*size < kShmWarnBelow) {
    return {name, CheckStatus::kWarn, detail + " (below 1 GiB: large jobs may run out)", hint};
  }
  return {name, CheckStatus::kPass, detail, ""};
}

CheckResult CheckMemlock(const DoctorEnv& env) {
  const std::string name = "memlock";
  const MemlockLimit lim = env.memlock_limit ? env.memlock_limit() : MemlockLimit{};
  const std::vector<std::string> rdma = ListDir(env.sysfs_root + "/class/infiniband");
  const std::string limit_text = lim.unlimited ? "unlimited" : FormatBytes(lim.bytes);
  if (lim.unlimited) return {name, CheckStatus::kPass, "RLIMIT_MEMLOCK unlimited", ""};
  if (rdma.empty()) {
    return {name, CheckStatus::kPass,
            "RLIMIT_MEMLOCK " + limit_text +
                "; no RDMA devices, so pinned registrations are "
                "not needed",
            ""};
  }
  const std::string detail =
      "RLIMIT_MEMLOCK " + limit_text + " with RDMA devices (" + Join(rdma, ", ") + ")";
  const std::string hint =
      "RDMA memory registration (NCCL IB, MPI over verbs) needs memlock unlimited: "
      "`ulimit -l unlimited`, `* - memlock unlimited` in /etc/security/limits.conf, "
      "LimitMEMLOCK=infinity for systemd/slurmd, docker --ulimit memlock=-1, IPC_LOCK on k8s";
  if (lim.bytes < kMemlockWarnFrom) {
    return {name, CheckStatus::kFail, detail + ": registrations of large buffers fail", hint};
  }
  return {name, CheckStatus::kWarn, detail + ": not unlimited", hint};
}

CheckResult CheckInfinibandPorts(const DoctorEnv& env) {
  const std::string name = "infiniband_ports";
  const std::string base = env.sysfs_root + "/class/infiniband/";
  struct Port {
    std::string id;
    std::string state;
    std::string rate_text;
    double rate = 0;
    std::string link_layer;
  };
  std::vector<Port> ports;
  for (const std::string& dev : ListDir(base)) {
    for (const std::string& p : ListDir(base + dev + "/ports")) {
      const std::string dir = base + dev + "/ports/" + p + "/";
      Port port;
      port.id = dev + "/" + p;
      port.state = AfterColon(ReadTrimmed(dir + "state"));
      port.rate_text = ReadTrimmed(dir + "rate");
      port.rate = topology::ParseIbRate(port.rate_text);
      port.link_layer = ReadTrimmed(dir + "link_layer");
      ports.push_back(port);
    }
  }
  if (ports.empty()) return {name, CheckStatus::kSkip, "no InfiniBand/RoCE devices", ""};
  double best = 0;
  for (const Port& p : ports) {
    if (p.state == "ACTIVE") best = std::max(best, p.rate);
  }
  std::vector<std::string> rows;
  std::vector<std::string> down;
  std::vector<std::string> slow;
  for (const Port& p : ports) {
    const std::string layer = p.link_layer.empty() ? "" : " " + p.link_layer;
    rows.push_back(p.id + " " + (p.state.empty() ? "state unknown" : p.state) +
                   (p.rate_text.empty() ? "" : " " + p.rate_text) + layer);
    if (p.state != "ACTIVE") {
      down.push_back(p.id + " " + (p.state.empty() ? "state unknown" : p.state));
    } else if (p.rate > 0 && p.rate < best) {
      slow.push_back(p.id + " " + p.rate_text);
    }
  }
  const std::string detail = Join(rows, "; ");
  const std::string hint_down =
      "check the cable and switch port (ibstat, ibstatus, `ip link` for RoCE); a port in INIT "
      "needs the subnet manager (opensm); exclude unused ports with NCCL_IB_HCA";
  if (down.size() == ports.size()) {
    return {name, CheckStatus::kFail, "no active port: " + detail, hint_down};
  }
  if (!down.empty()) {
    return {name, CheckStatus::kWarn, "not active: " + Join(down, ", ") + " (" + detail + ")",
            hint_down};
  }
  if (!slow.empty()) {
    return {name, CheckStatus::kWarn, "below the fastest port's rate: " + Join(slow, ", "),
            "a port trained at reduced width or speed: reseat or replace the cable, check "
            "`ibstat` / `mlxlink`"};
  }
  return {name, CheckStatus::kPass, detail, ""};
}

CheckResult CheckMpi(const DoctorEnv& env) {
  const std::string name = "mpi";
  if (env.quick) {
    return {name, CheckStatus::kSkip,
            "quick preflight: mpirun not exercised (ringpilot run starts it next)", ""};
  }
  const std::string mpirun = Lookup(env.vars, "RINGPILOT_MPIRUN", "mpirun");
  const std::string install_hint =
      "install OpenMPI (apt-get install openmpi-bin) or point RINGPILOT_MPIRUN at mpirun";
  const CommandResult ver = env.run({mpirun, "--version"}, kMpiVersionTimeoutS);
  if (!ver.started) return {name, CheckStatus::kFail, mpirun + ": not found", install_hint};
  if (ver.timed_out || ver.exit_code != 0) {
    return {name, CheckStatus::kFail,
            mpirun + " --version " +
                (ver.timed_out ? "timed out" : "exited " + std::to_string(ver.exit_code)) + ": " +
                LastLine(ver.output),
            install_hint};
  }
  const std::string version = ParseMpiVersion(ver.output);
  const std::string shown = version.empty() ? LastLine(ver.output) : version;
  std::vector<std::string> argv{mpirun};
  if (version.rfind("Open MPI", 0) == 0) {
    if (env.is_root) argv.push_back("--allow-run-as-root");
    argv.push_back("--oversubscribe");
  }
  for (const char* a : {"-np", "2", "true"}) argv.emplace_back(a);
  const auto t0 = std::chrono::steady_clock::now();
  const CommandResult run = env.run(argv, kMpiRunTimeoutS);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ostringstream took;
  took.precision(1);
  took << std::fixed << secs;
  const std::string cmd = Join(argv, " ");
  if (run.started && !run.timed_out && run.exit_code == 0) {
    return {name, CheckStatus::kPass, shown + "; `" + cmd + "` ok in " + took.str() + " s", ""};
  }
  return {name, CheckStatus::kFail,
          shown + "; `" + cmd + "` " +
              (run.timed_out ? "timed out after " + std::to_string(kMpiRunTimeoutS) + " s"
                             : "exited " + std::to_string(run.exit_code)) +
              (LastLine(run.output).empty() ? "" : ": " + LastLine(run.output)),
          "run the command by hand; as root OpenMPI needs --allow-run-as-root (or "
          "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1); a hang usually means a "
          "firewall or a wrong interface (OMPI_MCA_btl_tcp_if_include)"};
}

CheckResult CheckTrainerLibraries(const DoctorEnv& env, config::Device dev) {
  const std::string name = "trainer_libraries";
  const std::string trainer = TrainerPath(env);
  if (::access(trainer.c_str(), X_OK) != 0) {
    return {name, CheckStatus::kWarn,
            "ringpilot-trainer not found at " + trainer +
                " (ringpilot run needs it; LibTorch/NCCL versions not determinable)",
            "build it (scripts/build.sh, RINGPILOT_TRAINER=ON) or set RINGPILOT_TRAINER"};
  }
  const CommandResult ldd = env.run({"ldd", trainer}, kLddTimeoutS);
  if (!ldd.started || ldd.timed_out) {
    return {name, CheckStatus::kSkip,
            trainer + " exists; `ldd` not runnable, its libraries not determinable", ""};
  }
  std::vector<std::string> missing;
  std::istringstream in(ldd.output);
  for (std::string line; std::getline(in, line);) {
    if (line.find("=> not found") != std::string::npos) {
      line.erase(0, line.find_first_not_of(" \t"));
      missing.push_back(line.substr(0, line.find(' ')));
    }
  }
  std::vector<std::string> parts{trainer};
  const std::string torch = LddResolution(ldd.output, "libtorch_cpu.so");
  if (!torch.empty() && torch != "not found") parts.push_back("LibTorch " + torch);
  const std::string lib_hint =
      "the trainer cannot start: add the libraries' directory (pip LibTorch: "
      "site-packages/torch/lib, NCCL: site-packages/nvidia/nccl/lib) to LD_LIBRARY_PATH, or "
      "rebuild so the RPATH points at them";
  const std::string nccl = LddResolution(ldd.output, "libnccl.so");
  if (nccl == "not found" || !missing.empty()) {
    return {name, CheckStatus::kFail, "missing: " + Join(missing, ", ") + " (" + trainer + ")",
            lib_hint};
  }
  if (nccl.empty()) {
    parts.push_back("no NCCL (CPU-only trainer)");
    if (dev == config::Device::kCuda) {
      return {name, CheckStatus::kFail, Join(parts, "; "),
              "--device cuda needs a trainer built against CUDA LibTorch and NCCL"};
    }
    return {name, CheckStatus::kPass, Join(parts, "; "), ""};
  }
  const LibraryInfo lib = env.load_nccl(nccl);
  if (!lib.loaded) {
    return {name, CheckStatus::kFail, "NCCL " + nccl + " not loadable: " + lib.error, lib_hint};
  }
  parts.push_back("NCCL " + NcclVersionText(lib.version) + " (" + nccl + ")");
  return {name, CheckStatus::kPass, Join(parts, "; "), ""};
}

}  // namespace ringpilot::doctor
