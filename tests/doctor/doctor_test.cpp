// `ringpilot doctor`: each check against a fake environment (fake sysfs/proc trees, a fake
// statvfs / rlimit / command runner / library loader), one check against a real 16 MiB tmpfs
// in a private mount namespace, the binary end to end on this machine, and the binary in
// bad environments (16 MiB /dev/shm, low memlock with InfiniBand, NCCL not on the path).
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "doctor/doctor.h"
#include "tests/test_util.h"

namespace ringpilot::doctor {
namespace {

using testing::RingpilotBinary;
using testing::RunProcess;
using testing::TempDir;
using testing::WriteFile;

constexpr std::uint64_t kMiB = 1024ull * 1024;

void MakeDirs(const std::string& path) { std::filesystem::create_directories(path); }

// A healthy, empty machine under TMP: no GPUs, no RDMA devices, 8 GiB /dev/shm, memlock
// unlimited, no commands, no libraries.
DoctorEnv FakeEnv(const TempDir& tmp) {
  DoctorEnv env;
  env.sysfs_root = tmp.path() + "/sys";
  env.proc_root = tmp.path() + "/proc";
  env.dev_root = tmp.path() + "/dev";
  env.shm_path = tmp.path() + "/dev/shm";
  MakeDirs(env.sysfs_root);
  MakeDirs(env.proc_root);
  MakeDirs(env.shm_path);
  env.self_dir = tmp.path() + "/bin";
  env.cuda_runtime_version = "unknown";
  env.fs_size = [](const std::string&) { return std::optional<std::uint64_t>(8192 * kMiB); };
  env.memlock_limit = [] { return MemlockLimit{true, 0}; };
  env.run = [](const std::vector<std::string>&, int) { return CommandResult{}; };
  env.query_driver = [] { return DriverInfo{}; };
  env.load_nccl = [](const std::string&) { return LibraryInfo{false, "not found", 0}; };
  return env;
}

void AddIbPort(const DoctorEnv& env, const std::string& dev, int port, const std::string& state,
               const std::string& rate) {
  const std::string dir =
      env.sysfs_root + "/class/infiniband/" + dev + "/ports/" + std::to_string(port);
  MakeDirs(dir);
  WriteFile(dir + "/state", state + "\n");
  WriteFile(dir + "/rate", rate + "\n");
  WriteFile(dir + "/link_layer", "InfiniBand\n");
}

void AddPresentGpus(const DoctorEnv& env, int n) {
  for (int i = 0; i < n; ++i) {
    MakeDirs(env.proc_root + "/driver/nvidia/gpus/0000:" + std::to_string(10 + i) + ":00.0");
  }
}

// ---- /dev/shm --------------------------------------------------------------------------

TEST(DoctorDevShm, SixteenMegabytesFailsWithHint) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  env.fs_size = [](const std::string&) { return std::optional<std::uint64_t>(16 * kMiB); };
  const CheckResult r = CheckDevShm(env);
  EXPECT_EQ(r.name, "dev_shm");
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("16 MiB"), std::string::npos) << r.detail;
  EXPECT_NE(r.hint.find("--shm-size"), std::string::npos) << r.hint;
  EXPECT_NE(r.hint.find("Memory"), std::string::npos) << r.hint;
}

TEST(DoctorDevShm, ThresholdsAndMissing) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  env.fs_size = [](const std::string&) { return std::optional<std::uint64_t>(768 * kMiB); };
  EXPECT_EQ(CheckDevShm(env).status, CheckStatus::kWarn);
  EXPECT_FALSE(CheckDevShm(env).hint.empty());
  env.fs_size = [](const std::string&) { return std::optional<std::uint64_t>(2048 * kMiB); };
  EXPECT_EQ(CheckDevShm(env).status, CheckStatus::kPass);
  env.fs_size = [](const std::string&) { return std::optional<std::uint64_t>(); };
  EXPECT_EQ(CheckDevShm(env).status, CheckStatus::kFail);
}

// A real 16 MiB tmpfs, mounted in a private mount namespace by a child process (needs root
// and unshare(CLONE_NEWNS); skipped where either is missing).
TEST(DoctorDevShm, RealSixteenMegabyteTmpfsInMountNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a mount namespace";
  TempDir tmp;
  const std::string mnt = tmp.path() + "/shm";
  MakeDirs(mnt);
  const base::ProcessStatus status =
      base::Subprocess::Fork([&] {
        if (::unshare(CLONE_NEWNS) != 0) return 77;
        if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
        if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=16m") != 0) return 77;
        DoctorEnv env = SystemDoctorEnv();
        env.shm_path = mnt;
        const CheckResult r = CheckDevShm(env);
        const bool ok = r.status == CheckStatus::kFail && !r.hint.empty() &&
                        r.detail.find("16 MiB") != std::string::npos;
        ::umount(mnt.c_str());
        return ok ? 0 : 1;
      }).Wait();
  ASSERT_EQ(status.term_signal, 0);
  if (status.exit_code == 77) GTEST_SKIP() << "unshare/mount not permitted here";
  EXPECT_EQ(status.exit_code, 0) << "16 MiB tmpfs not reported as FAIL with a hint";
}

// ---- memlock ---------------------------------------------------------------------------

TEST(DoctorMemlock, LowLimitWithInfinibandFails) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  AddIbPort(env, "mlx5_0", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)");
  env.memlock_limit = [] { return MemlockLimit{false, 64 * 1024}; };
  const CheckResult r = CheckMemlock(env);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("mlx5_0"), std::string::npos) << r.detail;
  EXPECT_NE(r.hint.find("memlock"), std::string::npos) << r.hint;

  env.memlock_limit = [] { return MemlockLimit{false, 4096 * kMiB}; };
  EXPECT_EQ(CheckMemlock(env).status, CheckStatus::kWarn);
  EXPECT_FALSE(CheckMemlock(env).hint.empty());
  env.memlock_limit = [] { return MemlockLimit{true, 0}; };
  EXPECT_EQ(CheckMemlock(env).status, CheckStatus::kPass);
}

TEST(DoctorMemlock, LowLimitWithoutRdmaPasses) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  env.memlock_limit = [] { return MemlockLimit{false, 64 * 1024}; };
  const CheckResult r = CheckMemlock(env);
  EXPECT_EQ(r.status, CheckStatus::kPass);
  EXPECT_NE(r.detail.find("64 KiB"), std::string::npos) << r.detail;
}

// ---- InfiniBand ports ------------------------------------------------------------------

TEST(DoctorInfiniband, OnlyPortDownFails) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  EXPECT_EQ(CheckInfinibandPorts(env).status, CheckStatus::kSkip);
  AddIbPort(env, "mlx5_0", 1, "1: DOWN", "10 Gb/sec (4X SDR)");
  const CheckResult r = CheckInfinibandPorts(env);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("mlx5_0/1 DOWN"), std::string::npos) << r.detail;
  EXPECT_FALSE(r.hint.empty());
}

TEST(DoctorInfiniband, OneOfTwoDownWarnsAndSlowPortWarns) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  AddIbPort(env, "mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)");
  AddIbPort(env, "mlx5_1", 1, "1: DOWN", "10 Gb/sec (4X SDR)");
  CheckResult r = CheckInfinibandPorts(env);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_FALSE(r.hint.empty());
  AddIbPort(env, "mlx5_1", 1, "4: ACTIVE", "100 Gb/sec (1X NDR)");
  r = CheckInfinibandPorts(env);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_NE(r.detail.find("mlx5_1/1"), std::string::npos) << r.detail;
  AddIbPort(env, "mlx5_1", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)");
  EXPECT_EQ(CheckInfinibandPorts(env).status, CheckStatus::kPass);
}

// ---- driver vs CUDA runtime --------------------------------------------------------------

TEST(DoctorDriver, TableRows) {
  EXPECT_EQ(MinimumDriverFor(13, 0), 580);
  EXPECT_EQ(MinimumDriverFor(12, 8), 570);
  EXPECT_EQ(MinimumDriverFor(12, 6), 550);
  EXPECT_EQ(MinimumDriverFor(12, 4), 550);
  EXPECT_EQ(MinimumDriverFor(12, 1), 525);
  EXPECT_EQ(MinimumDriverFor(11, 8), 520);
  EXPECT_EQ(MinimumDriverFor(11, 0), 0);
  EXPECT_EQ(MinorCompatibilityFloor(12), 525);
}

TEST(DoctorDriver, Driver535WithCuda13RuntimeFails) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  AddPresentGpus(env, 1);
  env.cuda_runtime_version = "13.0";
  DriverInfo drv;
  drv.nvml_loaded = true;
  drv.driver_version = "535.129.03";
  drv.cuda_driver_version = 12020;
  drv.nvml_device_count = 1;
  const CheckResult r = CheckDriverVsRuntime(env, drv, config::Device::kAuto);
  EXPECT_EQ(r.name, "driver_cuda_runtime");
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("535.129.03"), std::string::npos) << r.detail;
  EXPECT_NE(r.hint.find("580"), std::string::npos) << r.hint;

  env.cuda_runtime_version = "12.8";
  drv.driver_version = "550.54.15";
  EXPECT_EQ(CheckDriverVsRuntime(env, drv, config::Device::kAuto).status, CheckStatus::kWarn);
  env.cuda_runtime_version = "12.4";
  EXPECT_EQ(CheckDriverVsRuntime(env, drv, config::Device::kAuto).status, CheckStatus::kPass);
  // Only cuDriverGetVersion known (no NVML): CUDA 12.2 driver vs a 13.0 runtime.
  env.cuda_runtime_version = "13.0";
  drv.driver_version.clear();
  EXPECT_EQ(CheckDriverVsRuntime(env, drv, config::Device::kAuto).status, CheckStatus::kFail);
}

TEST(DoctorDriver, SkipsWithoutGpuOrRuntimeAndFailsForCudaWithoutGpu) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  EXPECT_EQ(CheckDriverVsRuntime(env, {}, config::Device::kAuto).status, CheckStatus::kSkip);
  EXPECT_EQ(CheckDriverVsRuntime(env, {}, config::Device::kCpu).status, CheckStatus::kSkip);
  const CheckResult cuda = CheckDriverVsRuntime(env, {}, config::Device::kCuda);
  EXPECT_EQ(cuda.status, CheckStatus::kFail);
  EXPECT_FALSE(cuda.hint.empty());
  AddPresentGpus(env, 1);
  DriverInfo drv;
  drv.driver_version = "580.65.06";
  const CheckResult unknown = CheckDriverVsRuntime(env, drv, config::Device::kAuto);
  EXPECT_EQ(unknown.status, CheckStatus::kSkip);
  EXPECT_NE(unknown.detail.find("unknown"), std::string::npos) << unknown.detail;
  // GPUs present, driver libraries missing.
  const CheckResult none = CheckDriverVsRuntime(env, {}, config::Device::kAuto);
  EXPECT_EQ(none.status, CheckStatus::kFail);
  EXPECT_FALSE(none.hint.empty());
}

// ---- GPUs visible, NVLink, ECC, throttling -----------------------------------------------

TEST(DoctorGpus, VisibleVersusPresent) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  AddPresentGpus(env, 8);
  DriverInfo drv;
  drv.nvml_loaded = true;
  drv.nvml_device_count = 8;
  EXPECT_EQ(CheckGpusVisible(env, drv, config::Device::kAuto).status, CheckStatus::kPass);
  env.vars["CUDA_VISIBLE_DEVICES"] = "0,1";
  CheckResult r = CheckGpusVisible(env, drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_NE(r.detail.find("2 of 8"), std::string::npos) << r.detail;
  EXPECT_FALSE(r.hint.empty());
  env.vars["CUDA_VISIBLE_DEVICES"] = "";
  EXPECT_EQ(CheckGpusVisible(env, drv, config::Device::kCuda).status, CheckStatus::kFail);
  drv.nvml_device_count = 7;  // one fell off the bus
  r = CheckGpusVisible(env, drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.detail.find("7 of 8"), std::string::npos) << r.detail;
}

DriverInfo TwoGpus() {
  DriverInfo drv;
  drv.nvml_loaded = true;
  drv.nvml_device_count = 2;
  for (int i = 0; i < 2; ++i) {
    DriverGpu g;
    g.index = i;
    g.nvlink_states.assign(18, 1);
    g.ecc_uncorrected_volatile = 0;
    g.retired_pages = 0;
    g.throttle_reasons = 0x1;  // idle: benign
    drv.gpus.push_back(g);
  }
  return drv;
}

TEST(DoctorGpus, NvlinkEccThrottle) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  AddPresentGpus(env, 2);
  DriverInfo drv = TwoGpus();
  EXPECT_EQ(CheckNvlink(env, drv, config::Device::kAuto).status, CheckStatus::kPass);
  EXPECT_EQ(CheckEcc(env, drv, config::Device::kAuto).status, CheckStatus::kPass);
  EXPECT_EQ(CheckThrottle(env, drv, config::Device::kAuto).status, CheckStatus::kPass);
  drv.gpus[1].nvlink_states[3] = 0;
  CheckResult r = CheckNvlink(env, drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.detail.find("GPU 1: 17 of 18"), std::string::npos) << r.detail;
  EXPECT_FALSE(r.hint.empty());
  drv.gpus[0].ecc_uncorrected_volatile = 3;
  r = CheckEcc(env, drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_FALSE(r.hint.empty());
  drv.gpus[0].throttle_reasons = 0x40;  // HW thermal slowdown
  r = CheckThrottle(env, drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.detail.find("HW thermal"), std::string::npos) << r.detail;
  EXPECT_EQ(CheckThrottle(env, drv, config::Device::kCpu).status, CheckStatus::kSkip);
  // --device cuda without any GPU: the visibility check FAILs, the per-GPU ones SKIP.
  TempDir empty;
  const DoctorEnv bare = FakeEnv(empty);
  EXPECT_EQ(CheckGpusVisible(bare, {}, config::Device::kCuda).status, CheckStatus::kFail);
  EXPECT_EQ(CheckNvlink(bare, {}, config::Device::kCuda).status, CheckStatus::kSkip);
  // XID lines from the kernel log.
  drv = TwoGpus();
  env.run = [](const std::vector<std::string>& argv, int) {
    CommandResult c;
    c.started = argv[0] == "dmesg";
    c.exit_code = 0;
    c.output = "[ 12.0] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n";
    return c;
  };
  r = CheckEcc(env, drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_NE(r.detail.find("Xid"), std::string::npos) << r.detail;
}

// ---- PCIe ACS ------------------------------------------------------------------------------

// A 4 KiB config space with an AER capability at 0x100 then ACS at 0x148 (control CONTROL).
std::string ConfigWithAcs(std::uint16_t control) {
  std::string c(4096, '\0');
  const auto put32 = [&](std::size_t at, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) c[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put32(0x100, 0x0001u | (1u << 16) | (0x148u << 20));  // AER, next 0x148
  put32(0x148, 0x000du | (1u << 16));                   // ACS, last
  put32(0x14c, 0x005fu | (static_cast<std::uint32_t>(control) << 16));
  return c;
}

TEST(DoctorAcs, ParsesControlRegister) {
  EXPECT_EQ(AcsControl(ConfigWithAcs(0x1d)), std::optional<std::uint16_t>(0x1d));
  EXPECT_FALSE(AcsControl(std::string(64, '\0')).has_value());  // not root: 64 bytes
  EXPECT_FALSE(AcsControl(std::string(4096, '\0')).has_value());
}

TEST(DoctorAcs, RedirectOnBridgeAboveGpuWarns) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  const std::string tree = env.sysfs_root + "/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  MakeDirs(tree);
  MakeDirs(env.sysfs_root + "/bus/pci/devices");
  WriteFile(tree + "/vendor", "0x10de\n");
  WriteFile(tree + "/class", "0x030200\n");
  const std::string bridge = env.sysfs_root + "/devices/pci0000:00/0000:00:01.0";
  WriteFile(bridge + "/config", ConfigWithAcs(0x1d));
  std::filesystem::create_directory_symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
                                            env.sysfs_root + "/bus/pci/devices/0000:01:00.0");
  CheckResult r = CheckPcieAcs(env, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_NE(r.detail.find("0000:00:01.0"), std::string::npos) << r.detail;
  EXPECT_FALSE(r.hint.empty());
  WriteFile(bridge + "/config", ConfigWithAcs(0x11));  // source validation + upstream fwd
  EXPECT_EQ(CheckPcieAcs(env, config::Device::kAuto).status, CheckStatus::kPass);
  WriteFile(bridge + "/config", std::string(64, '\0'));  // not root
  EXPECT_EQ(CheckPcieAcs(env, config::Device::kAuto).status, CheckStatus::kSkip);
}

// ---- MPI, trainer libraries ---------------------------------------------------------------

TEST(DoctorMpi, VersionAndRun) {
  EXPECT_EQ(ParseMpiVersion("mpirun (Open MPI) 4.1.4\n\nReport bugs to ..."), "Open MPI 4.1.4");
  EXPECT_EQ(ParseMpiVersion("something else"), "");
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  CheckResult r = CheckMpi(env);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_FALSE(r.hint.empty());
  env.vars["RINGPILOT_MPIRUN"] = "/opt/mpi/bin/mpirun";
  std::vector<std::vector<std::string>> calls;
  env.is_root = true;
  env.run = [&calls](const std::vector<std::string>& argv, int) {
    calls.push_back(argv);
    CommandResult c;
    c.started = true;
    c.exit_code = argv.back() == "true" ? 1 : 0;
    c.output = argv.back() == "true" ? "ORTE failed\n" : "mpirun (Open MPI) 4.1.4\n";
    return c;
  };
  r = CheckMpi(env);
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.detail.find("Open MPI 4.1.4"), std::string::npos) << r.detail;
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1][0], "/opt/mpi/bin/mpirun");
  EXPECT_EQ(calls[1][1], "--allow-run-as-root");
}

struct TrainerFixture {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  std::string trainer = tmp.path() + "/ringpilot-trainer";
  explicit TrainerFixture(const std::string& ldd_output) {
    WriteFile(trainer, "#!/bin/sh\n", true);
    env.vars["RINGPILOT_TRAINER"] = trainer;
    env.run = [ldd_output](const std::vector<std::string>& argv, int) {
      CommandResult c;
      c.started = argv[0] == "ldd";
      c.exit_code = 0;
      c.output = ldd_output;
      return c;
    };
  }
};

TEST(DoctorTrainer, MissingNcclLibraryFails) {
  TrainerFixture f(
      "\tlibtorch_cpu.so => /opt/torch/lib/libtorch_cpu.so (0x00007f)\n"
      "\tlibnccl.so.2 => not found\n");
  const CheckResult r = CheckTrainerLibraries(f.env, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("libnccl.so.2"), std::string::npos) << r.detail;
  EXPECT_NE(r.hint.find("LD_LIBRARY_PATH"), std::string::npos) << r.hint;
}

TEST(DoctorTrainer, NcclResolvedButNotLoadableFailsAndLoadableReportsVersion) {
  TrainerFixture f("\tlibnccl.so.2 => /gone/libnccl.so.2 (0x00007f)\n");
  f.env.load_nccl = SystemDoctorEnv().load_nccl;  // the real dlopen: the file is not there
  CheckResult r = CheckTrainerLibraries(f.env, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("/gone/libnccl.so.2"), std::string::npos) << r.detail;
  EXPECT_FALSE(r.hint.empty());
  f.env.load_nccl = [](const std::string&) { return LibraryInfo{true, "", 22105}; };
  r = CheckTrainerLibraries(f.env, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kPass);
  EXPECT_NE(r.detail.find("NCCL 2.21.5"), std::string::npos) << r.detail;
}

TEST(DoctorTrainer, MissingTrainerWarnsAndCpuTrainerForCudaFails) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  CheckResult r = CheckTrainerLibraries(env, config::Device::kCpu);
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_FALSE(r.hint.empty());
  TrainerFixture f("\tlibtorch_cpu.so => /opt/torch/lib/libtorch_cpu.so (0x00007f)\n");
  EXPECT_EQ(CheckTrainerLibraries(f.env, config::Device::kCpu).status, CheckStatus::kPass);
  EXPECT_EQ(CheckTrainerLibraries(f.env, config::Device::kCuda).status, CheckStatus::kFail);
}

// ---- whole run, rendering, exit status ------------------------------------------------------

TEST(DoctorRun, JsonShapeAndExitStatus) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp);
  env.fs_size = [](const std::string&) { return std::optional<std::uint64_t>(16 * kMiB); };
  const auto checks = RunDoctor(env, config::Device::kCpu);
  EXPECT_EQ(DoctorExitStatus(checks), 1);
  const auto doc = DoctorJson(checks);
  ASSERT_TRUE(doc["checks"].is_array());
  EXPECT_EQ(doc["checks"].size(), checks.size());
  for (const auto& c : doc["checks"]) {
    EXPECT_EQ(c.size(), 4u);
    for (const char* key : {"name", "status", "detail", "hint"}) {
      EXPECT_TRUE(c.at(key).is_string()) << key;
    }
  }
  std::ostringstream table;
  RenderDoctorTable(checks, table);
  EXPECT_NE(table.str().find("dev_shm"), std::string::npos);
  EXPECT_NE(table.str().find("hint:"), std::string::npos);
}

TEST(DoctorCli, JsonOnThisMachineMatchesExitStatus) {
  const auto r = RunProcess({RingpilotBinary(), "doctor", "--json", "--device", "cpu"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.exit_code << "\n" << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc.at("checks").is_array());
  ASSERT_FALSE(doc["checks"].empty());
  bool any_fail = false;
  for (const auto& c : doc["checks"]) {
    const std::string status = c.at("status");
    EXPECT_TRUE(status == "PASS" || status == "WARN" || status == "FAIL" || status == "SKIP")
        << status;
    EXPECT_FALSE(c.at("name").get<std::string>().empty());
    if (status == "FAIL" || status == "WARN") {
      EXPECT_FALSE(c.at("hint").get<std::string>().empty()) << c.dump();
    }
    any_fail = any_fail || status == "FAIL";
  }
  EXPECT_EQ(r.exit_code, any_fail ? 1 : 0) << r.out;
}

TEST(DoctorCli, TableAndBadDevice) {
  const auto table = RunProcess({RingpilotBinary(), "doctor", "--device", "cpu"});
  EXPECT_NE(table.out.find("CHECK"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("mpi"), std::string::npos) << table.out;
  const auto bad = RunProcess({RingpilotBinary(), "doctor", "--device", "tpu"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

// ---- bad environments, real processes ---------------------------------------------------------

// The check named NAME in `ringpilot doctor --json` output; fails the test when absent.
nlohmann::json CheckIn(const std::string& json_text, const std::string& name) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    ADD_FAILURE() << "not JSON: " << json_text;
    return {};
  }
  for (const auto& c : doc.at("checks")) {
    if (c.at("name") == name) return c;
  }
  ADD_FAILURE() << "no check " << name << " in " << json_text;
  return {};
}

// SCRIPT under `unshare -m` (a private mount namespace) after `mount --make-rprivate /`; the
// script's setup failing exits 77. Needs root and unshare(1).
testing::ProcessResult InMountNamespace(const std::string& script) {
  return RunProcess({"unshare", "-m", "sh", "-c", "mount --make-rprivate / || exit 77; " + script});
}

TEST(DoctorBadEnv, SixteenMegabyteDevShmInMountNamespaceFails) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a mount namespace";
  const auto r = InMountNamespace("mount -t tmpfs -o size=16m tmpfs /dev/shm || exit 77; exec '" +
                                  RingpilotBinary() + "' doctor --json --device cpu");
  if (r.exit_code == 77 || r.exit_code == 127) GTEST_SKIP() << "unshare/mount not permitted";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto c = CheckIn(r.out, "dev_shm");
  EXPECT_EQ(c.value("status", ""), "FAIL") << c.dump();
  EXPECT_NE(c.value("detail", "").find("16 MiB"), std::string::npos) << c.dump();
  EXPECT_NE(c.value("hint", "").find("--shm-size"), std::string::npos) << c.dump();
}

// A low `ulimit -l` next to an (emulated) InfiniBand port: a tmpfs over /sys/class holding
// class/infiniband/mlx5_0/ports/1, in a private mount namespace.
TEST(DoctorBadEnv, LowMemlockWithInfinibandFails) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a mount namespace";
  const auto r = InMountNamespace(
      "mount -t tmpfs none /sys/class || exit 77; d=/sys/class/infiniband/mlx5_0/ports/1; "
      "mkdir -p $d && echo '4: ACTIVE' >$d/state && echo '100 Gb/sec (4X EDR)' >$d/rate && "
      "echo InfiniBand >$d/link_layer || exit 77; ulimit -l 64 || exit 77; exec '" +
      RingpilotBinary() + "' doctor --json --device cpu");
  if (r.exit_code == 77 || r.exit_code == 127) GTEST_SKIP() << "unshare/mount not permitted";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto mem = CheckIn(r.out, "memlock");
  EXPECT_EQ(mem.value("status", ""), "FAIL") << mem.dump();
  EXPECT_NE(mem.value("detail", "").find("64 KiB"), std::string::npos) << mem.dump();
  EXPECT_NE(mem.value("detail", "").find("mlx5_0"), std::string::npos) << mem.dump();
  EXPECT_NE(mem.value("hint", "").find("memlock unlimited"), std::string::npos) << mem.dump();
  EXPECT_EQ(CheckIn(r.out, "infiniband_ports").value("status", ""), "PASS");
}

// A trainer that NEEDS libnccl.so.99 with no RPATH (tests/doctor/fixture): FAIL
// without the library path, PASS with the version once LD_LIBRARY_PATH names it.
TEST(DoctorBadEnv, MissingNcclLibraryPathFails) {
  const char* build = std::getenv("RINGPILOT_BUILD_DIR");
  const std::string dir = std::string(build ? build : "build") + "/tests/doctor_fixture";
  const std::string trainer = dir + "/doctor_fake_trainer";
  ASSERT_TRUE(std::filesystem::exists(trainer)) << trainer << ": build doctor_fake_trainer";
  const auto missing = RunProcess({RingpilotBinary(), "doctor", "--json", "--device", "cpu"},
                                  {{"RINGPILOT_TRAINER", trainer}, {"LD_LIBRARY_PATH", ""}});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  const auto c = CheckIn(missing.out, "trainer_libraries");
  EXPECT_EQ(c.value("status", ""), "FAIL") << c.dump();
  EXPECT_NE(c.value("detail", "").find("libnccl.so.99"), std::string::npos) << c.dump();
  EXPECT_NE(c.value("hint", "").find("LD_LIBRARY_PATH"), std::string::npos) << c.dump();
  const auto found = RunProcess({RingpilotBinary(), "doctor", "--json", "--device", "cpu"},
                                {{"RINGPILOT_TRAINER", trainer}, {"LD_LIBRARY_PATH", dir}});
  const auto ok = CheckIn(found.out, "trainer_libraries");
  EXPECT_EQ(ok.value("status", ""), "PASS") << ok.dump();
  EXPECT_NE(ok.value("detail", "").find("NCCL 2.21.5"), std::string::npos) << ok.dump();
}

}  // namespace
}  // namespace ringpilot::doctor
