// `ringpilot doctor`: preflight checks of one node's environment (driver vs CUDA runtime,
// GPUs visible vs present, NVLink, ECC, throttling, /dev/shm, memlock, InfiniBand, PCIe ACS,
// IOMMU, NUMA affinity, MPI, the trainer's libraries, GPU compute capability vs LibTorch's
// architectures, peer-to-peer access). Every check is a pure function of a
// DoctorEnv, a struct of roots, readers and runners, so tests can fake a bad environment;
// SystemDoctorEnv() is the real machine. docs/doctor.md describes every check.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "config/job.h"

namespace ringpilot::doctor {

enum class CheckStatus { kPass, kWarn, kFail, kSkip };
std::string ToString(CheckStatus s);  ///< "PASS", "WARN", "FAIL", "SKIP"

struct CheckResult {
  std::string name;
  CheckStatus status = CheckStatus::kSkip;
  std::string detail;
  std::string hint;  ///< what to do about a WARN or FAIL; "" for PASS
};

/// A command run to completion (or killed at its timeout).
struct CommandResult {
  bool started = false;  ///< false: could not be executed (not found, fork failed)
  bool timed_out = false;
  int exit_code = -1;  ///< -1 when killed by a signal
  std::string output;  ///< stdout and stderr together
};

/// RLIMIT_MEMLOCK soft limit.
struct MemlockLimit {
  bool unlimited = false;
  std::uint64_t bytes = 0;
};

/// One GPU as the driver (NVML) reports it; optionals are empty where NVML does not say.
struct DriverGpu {
  int index = 0;
  std::string name;
  std::string pci_bus_id;          ///< "0000:18:00.0"
  std::vector<int> nvlink_states;  ///< per link NVML reports: 1 active, 0 inactive
  std::optional<std::uint64_t> ecc_uncorrected_volatile;  ///< since the last driver load
  std::optional<std::uint64_t> retired_pages;             ///< single + double bit
  std::optional<bool> retired_pages_pending;              ///< retirement waits for a reset
  std::optional<unsigned> remapped_rows_uncorrectable;    ///< Ampere and later
  std::optional<bool> remapping_failed;
  std::optional<std::uint64_t> throttle_reasons;  ///< nvmlClocksEventReason bit mask
};

/// One GPU as the CUDA driver API enumerates it (after CUDA_VISIBLE_DEVICES).
struct CudaDevice {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;  ///< compute capability, e.g. 9.0 for H100; 0 unknown
  int cc_minor = 0;
};

/// What the NVIDIA driver says, through libnvidia-ml.so.1 and libcuda.so.1 (dlopen).
struct DriverInfo {
  bool nvml_loaded = false;
  std::string nvml_error;      ///< why not, when !nvml_loaded
  std::string driver_version;  ///< "580.65.06" (NVML); "" unknown
  int nvml_device_count = -1;  ///< every GPU the driver manages; -1 unknown
  bool cuda_loaded = false;
  std::string cuda_error;
  int cuda_driver_version = 0;  ///< cuDriverGetVersion: 12080 = CUDA 12.8; 0 unknown
  int cuda_device_count = -1;   ///< cuDeviceGetCount (after CUDA_VISIBLE_DEVICES); -1 unknown
  std::vector<DriverGpu> gpus;
  std::vector<CudaDevice> cuda_devices;  ///< libcuda's view, CUDA ordinal order
  /// cuDeviceCanAccessPeer(i, j) for CUDA ordinals: 1 can, 0 cannot, -1 not queried; empty
  /// when fewer than two devices or libcuda did not answer. The diagonal is 1.
  std::vector<std::vector<int>> peer_access;
};

/// GPU architectures compiled into a CUDA library's fat binaries (ELF section .nv_fatbin),
/// as SM numbers (major * 10 + minor: 90 = sm_90 / compute_90). Each map counts the fatbin
/// containers (one per compiled translation unit) that hold code for that architecture.
struct FatbinArchitectures {
  int containers = 0;
  std::map<int, int> sass;  ///< ELF cubins: run as-is on a binary-compatible GPU
  std::map<int, int> ptx;   ///< PTX: JIT-compiled by the driver for newer GPUs
};

/// Reads N bytes at OFFSET into BUF; false when the range is not readable.
using ByteReader = std::function<bool(std::uint64_t offset, void* buf, std::size_t n)>;

/// A shared library opened to read its version (NCCL's ncclGetVersion).
struct LibraryInfo {
  bool loaded = false;
  std::string error;  ///< dlerror() or the missing symbol, when !loaded
  int version = 0;    ///< ncclGetVersion: 22105 = 2.21.5; 0 unknown
};

/// Everything the checks read. Tests replace the roots and the functions.
struct DoctorEnv {
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  std::string dev_root = "/dev";
  std::string shm_path = "/dev/shm";
  base::Environment vars;            ///< process environment (CUDA_VISIBLE_DEVICES, PATH, ...)
  std::string self_dir;              ///< directory of the ringpilot executable
  std::string cuda_runtime_version;  ///< CUDA the trainer was built with ("12.8"); "" unknown
  bool is_root = false;
  /// Total size in bytes of the file system holding PATH (statvfs); nullopt when unreadable.
  std::function<std::optional<std::uint64_t>(const std::string& path)> fs_size;
  std::function<MemlockLimit()> memlock_limit;
  /// Runs ARGV (PATH lookup through `vars`), killing it after TIMEOUT_S seconds.
  std::function<CommandResult(const std::vector<std::string>& argv, int timeout_s)> run;
  std::function<DriverInfo()> query_driver;
  /// Opens NAME_OR_PATH (a bare soname uses the loader's search path) and reads NCCL's version.
  std::function<LibraryInfo(const std::string& name_or_path)> load_nccl;
  /// Architectures in the .nv_fatbin section of the ELF file at PATH (ReadElfFatbin);
  /// throws std::runtime_error when the file is unreadable or malformed.
  std::function<FatbinArchitectures(const std::string& path)> read_fatbin;
  /// Quick mode (the `ringpilot run` preflight): no command that takes longer than a few
  /// tens of milliseconds (the 2-process mpirun and dmesg are not run; ldd is).
  bool quick = false;
  /// The job runs its own program (launch.command), not ringpilot-trainer: the checks of
  /// the trainer's build (cuda_arch, trainer_libraries, library_versions) SKIP.
  bool program = false;
};

/// The real machine: /sys, /proc, /dev, statvfs, getrlimit, fork/exec, NVML and libcuda.
DoctorEnv SystemDoctorEnv();

// ---- the checks (each returns one result; GPU checks SKIP for config::Device::kCpu) -------

/// PCI functions of NVIDIA display/3D controllers under SYSFS/bus/pci/devices, sorted.
std::vector<std::string> SysfsNvidiaGpus(const std::string& sysfs_root);
/// GPUs present: /proc/driver/nvidia/gpus/*, else /dev/nvidia[0-9]*, else the PCI scan.
int PresentGpuCount(const DoctorEnv& env);

/// Minimum driver branch for a CUDA runtime "MAJOR.MINOR" from the table in doctor_gpu.cpp
/// (docs/doctor.md): the largest entry not above it; 0 when older than every entry.
int MinimumDriverFor(int cuda_major, int cuda_minor);
/// Oldest driver branch a CUDA major version runs on at all (minor version compatibility).
int MinorCompatibilityFloor(int cuda_major);

CheckResult CheckDriverVsRuntime(const DoctorEnv& env, const DriverInfo& drv, config::Device dev);
CheckResult CheckGpusVisible(const DoctorEnv& env, const DriverInfo& drv, config::Device dev);
CheckResult CheckNvlink(const DoctorEnv& env, const DriverInfo& drv, config::Device dev);
/// ECC, retired pages and row remapping from NVML; XID lines from the kernel log (`dmesg`,
/// where readable).
CheckResult CheckEcc(const DoctorEnv& env, const DriverInfo& drv, config::Device dev);
CheckResult CheckThrottle(const DoctorEnv& env, const DriverInfo& drv, config::Device dev);
CheckResult CheckDevShm(const DoctorEnv& env);
CheckResult CheckMemlock(const DoctorEnv& env);
CheckResult CheckInfinibandPorts(const DoctorEnv& env);
CheckResult CheckPcieAcs(const DoctorEnv& env, config::Device dev);
CheckResult CheckIommu(const DoctorEnv& env);
CheckResult CheckNumaAffinity(const DoctorEnv& env, config::Device dev);
CheckResult CheckMpi(const DoctorEnv& env);
CheckResult CheckTrainerLibraries(const DoctorEnv& env, config::Device dev);
/// `TRAINER --versions` (trainer/telemetry/versions.h): LibTorch, CUDA, cuDNN, NCCL and MPI
/// versions; FAIL when the NCCL loaded has another major or an older minor than the nccl.h built
/// against (or the command fails), WARN when only its patch (or a newer minor) differs or the
/// loaded cuDNN is not LibTorch's major.minor. SKIP without a trainer and in quick mode (LibTorch
/// loads).
CheckResult CheckLibraryVersions(const DoctorEnv& env);

/// How long `ringpilot-trainer --versions` may take: LibTorch loads in a second or two, a
/// cold page cache on a network file system is slower.
inline constexpr int kTrainerVersionsTimeoutS = 60;

/// `TRAINER --versions` (trainer/telemetry/versions.h), run through env.run: the one reading
/// of it, for CheckLibraryVersions and `ringpilot --version` (cli/version_command.h).
struct TrainerVersions {
  CommandResult run;
  /// The last line of its output that parses as a JSON object (LibTorch may warn on stderr
  /// first), when it exited 0; nullopt otherwise.
  std::optional<nlohmann::json> versions;
  /// versions[key] when it is a string, else "".
  std::string Field(const char* key) const;
};
TrainerVersions RunTrainerVersions(const DoctorEnv& env, const std::string& trainer);
/// Each visible GPU's compute capability vs the SASS / PTX architectures in the trainer's
/// libtorch_cuda.so (ldd of the trainer, or $RINGPILOT_LIBTORCH_CUDA).
CheckResult CheckCudaArchitectures(const DoctorEnv& env, const DriverInfo& drv, config::Device dev);
/// cuDeviceCanAccessPeer for every ordered pair of visible GPUs.
CheckResult CheckPeerAccess(const DoctorEnv& env, const DriverInfo& drv, config::Device dev);

/// Every check, in the documented order; *DRIVER_OUT (when given) receives what the driver said.
std::vector<CheckResult> RunDoctor(const DoctorEnv& env, config::Device dev,
                                   DriverInfo* driver_out = nullptr);

/// {"checks": [{"name", "status", "detail", "hint"}, ...]}
nlohmann::ordered_json DoctorJson(const std::vector<CheckResult>& checks);
/// Aligned table: NAME  STATUS  DETAIL, with hints indented below WARN/FAIL rows.
void RenderDoctorTable(const std::vector<CheckResult>& checks, std::ostream& out);
/// 1 when any check FAILed, else 0.
int DoctorExitStatus(const std::vector<CheckResult>& checks);

/// One node's results, for the Prometheus rendering and the across-nodes mode.
struct NodeChecks {
  std::string node;  ///< host name; "" for this node in single-node mode (no `node` label)
  std::vector<CheckResult> checks;
};

/// Prometheus text exposition (node_exporter textfile collector format):
/// `ringpilot_doctor_check_status{check, status}` 1 for each check's status and 0 for the
/// other three, `ringpilot_doctor_checks{status}` counts, and
/// `ringpilot_doctor_last_run_timestamp_seconds` UNIX_TIME; a `node` label on the first two
/// where NodeChecks::node is not empty.
std::string DoctorPrometheus(const std::vector<NodeChecks>& nodes, double unix_time);
/// Writes TEXT to PATH atomically (temp file beside it, fsync, rename), so the textfile
/// collector never reads a partial file. Throws std::runtime_error naming PATH.
void WriteDoctorFile(const std::string& path, const std::string& text);

// ---- helpers, exposed for tests --------------------------------------------------------

/// ACS Control register of a PCI config space (bytes read from sysfs `config`); nullopt when
/// the extended space is not there (fewer than 4096 bytes: not root) or has no ACS capability.
std::optional<std::uint16_t> AcsControl(const std::string& config);
/// Walks the fatbin containers in the SIZE bytes READ gives (a .nv_fatbin section: containers
/// of magic 0xBA55ED50, each a 16-byte header then entries of kind 1 PTX / 2 or 0x10 ELF, each
/// entry's header giving its own size, its payload size and its SM number). Only headers are
/// read. Zero padding between containers is skipped; throws std::runtime_error on anything
/// else (bad magic, an entry running past its container).
FatbinArchitectures ParseFatbin(const ByteReader& read, std::uint64_t size);
/// Finds the .nv_fatbin section of the 64-bit little-endian ELF file at PATH and parses it
/// (reads only the ELF and section headers and the fatbin headers, not the ~GB payload). A
/// file without the section yields no architectures. Throws std::runtime_error naming PATH.
FatbinArchitectures ReadElfFatbin(const std::string& path);
/// How a GPU of compute capability MAJOR.MINOR runs code from ARCHS: kPass with SASS for it
/// (or for a lower minor of the same major, binary compatible), kWarn with only PTX at or
/// below it (JIT at start-up), kFail otherwise. Architectures in fewer than half of the
/// containers (a few hand-tuned kernels, e.g. sm_90a) do not count. *WHY says which.
CheckStatus ArchitectureSupport(const FatbinArchitectures& archs, int major, int minor,
                                std::string* why);
/// "sm_75, sm_80, sm_90" / "compute_90" lists of the architectures that count, "(none)".
std::string ArchitectureList(const std::map<int, int>& archs, int containers, const char* prefix);

/// "mpirun (Open MPI) 4.1.4" -> "Open MPI 4.1.4"; "" when not recognised.
std::string ParseMpiVersion(const std::string& version_output);
/// Path ldd printed for SONAME ("libnccl.so.2 => /x/libnccl.so.2 (0x...)"): the path,
/// "not found", or "" when SONAME is not in the output.
std::string LddResolution(const std::string& ldd_output, const std::string& soname_prefix);

}  // namespace ringpilot::doctor
