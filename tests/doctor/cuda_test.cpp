// `ringpilot doctor` CUDA checks: the fatbin walker on blobs built here (and on the venv's
// real libtorch_cuda.so when present), compute capability vs architectures, and the
// peer-to-peer matrix, each against a fake environment.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/doctor.h"
#include "tests/test_util.h"

namespace ringpilot::doctor {
namespace {

using testing::TempDir;
using testing::WriteFile;

void Put16(std::string* b, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) b->push_back(static_cast<char>(v >> (8 * i)));
}
void Put32(std::string* b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<char>(v >> (8 * i)));
}
void Put64(std::string* b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(static_cast<char>(v >> (8 * i)));
}

struct Entry {
  std::uint16_t kind;  // 1 PTX, 2 ELF
  std::uint32_t arch;
  std::uint32_t header_size = 64;  // 64, or 112 for sm_100+ cubins
  std::size_t payload = 24;
};

// One fatbin container as nvcc lays it out: 16-byte header, then each entry's header and
// payload (the payload's bytes here are a recognisable filler, never read by the walker).
std::string Container(const std::vector<Entry>& entries) {
  std::string body;
  for (const Entry& e : entries) {
    std::string h;
    Put16(&h, e.kind);
    Put16(&h, 0x0101);
    Put32(&h, e.header_size);
    Put64(&h, e.payload);
    Put32(&h, 0);  // compressed size
    Put32(&h, 0);
    Put16(&h, 8);  // code version minor, major
    Put16(&h, 1);
    Put32(&h, e.arch);
    h.resize(e.header_size, '\0');
    body += h + std::string(e.payload, '\xab');
  }
  std::string c;
  Put32(&c, 0xBA55ED50u);
  Put16(&c, 1);
  Put16(&c, 16);
  Put64(&c, body.size());
  return c + body;
}

FatbinArchitectures Parse(const std::string& blob) {
  return ParseFatbin(
      [&](std::uint64_t off, void* buf, std::size_t n) {
        if (off + n > blob.size()) return false;
        std::memcpy(buf, blob.data() + off, n);
        return true;
      },
      blob.size());
}

// A minimal 64-bit little-endian ELF file: header, the sections' bytes, a section header
// table with a null section, .shstrtab and (when FATBIN is not empty) .nv_fatbin.
std::string Elf(const std::string& fatbin) {
  const std::string names = std::string("\0.shstrtab\0.nv_fatbin\0", 22);
  std::string f(64, '\0');
  const std::uint64_t names_at = f.size();
  f += names;
  const std::uint64_t fatbin_at = f.size();
  f += fatbin;
  while (f.size() % 8) f.push_back('\0');
  const std::uint64_t shoff = f.size();
  const auto section = [&](std::uint32_t name, std::uint32_t type, std::uint64_t off,
                           std::uint64_t size) {
    std::string s;
    Put32(&s, name);
    Put32(&s, type);
    Put64(&s, 0);
    Put64(&s, 0);
    Put64(&s, off);
    Put64(&s, size);
    s.resize(64, '\0');
    f += s;
  };
  section(0, 0, 0, 0);
  section(1, 3, names_at, names.size());
  const std::uint16_t count = fatbin.empty() ? 2 : 3;
  if (!fatbin.empty()) section(11, 1, fatbin_at, fatbin.size());
  std::string h =
      "\x7f"
      "ELF";
  h += std::string("\x02\x01\x01", 3);
  h.resize(0x28, '\0');
  Put64(&h, shoff);
  Put32(&h, 0);
  Put16(&h, 64);  // e_ehsize
  Put16(&h, 0);
  Put16(&h, 0);
  Put16(&h, 64);  // e_shentsize
  Put16(&h, count);
  Put16(&h, 1);  // e_shstrndx
  f.replace(0, h.size(), h);
  return f;
}

TEST(DoctorFatbin, WalksContainersEntriesAndPadding) {
  // Two translation units built for sm_80 + sm_90 (+ compute_90 PTX in the first), an
  // sm_100 cubin with a 112-byte header, 8 bytes of zero padding between the containers,
  // and an sm_90a-style kernel (arch 90 again) only in the second.
  const std::string blob = Container({{2, 80}, {2, 90}, {1, 90, 64, 40}, {2, 100, 112, 16}}) +
                           std::string(8, '\0') + Container({{2, 80}, {2, 90}, {2, 90}});
  const FatbinArchitectures a = Parse(blob);
  EXPECT_EQ(a.containers, 2);
  EXPECT_EQ(a.sass.at(80), 2);
  EXPECT_EQ(a.sass.at(90), 2);  // counted once per container
  EXPECT_EQ(a.sass.at(100), 1);
  EXPECT_EQ(a.ptx.at(90), 1);
  EXPECT_EQ(a.ptx.count(80), 0u);
  EXPECT_EQ(ArchitectureList(a.sass, a.containers, "sm_"), "sm_80, sm_90, sm_100");
  EXPECT_EQ(ArchitectureList({}, 0, "compute_"), "(none)");
}

TEST(DoctorFatbin, MalformedInputThrows) {
  std::string bad = Container({{2, 80}});
  bad[0] = 'X';
  EXPECT_THROW(Parse(bad), std::runtime_error);
  // An entry whose payload runs past its container.
  std::string truncated = Container({{2, 80, 64, 100}});
  truncated.resize(truncated.size() - 50);
  EXPECT_THROW(Parse(truncated), std::runtime_error);
  EXPECT_EQ(Parse("").containers, 0);
}

TEST(DoctorFatbin, ReadsOnlyTheElfSection) {
  TempDir tmp;
  const std::string lib = tmp.path() + "/libfake_cuda.so";
  WriteFile(lib, Elf(Container({{2, 75}, {2, 86}, {1, 86}})));
  const FatbinArchitectures a = ReadElfFatbin(lib);
  EXPECT_EQ(a.containers, 1);
  EXPECT_EQ(ArchitectureList(a.sass, a.containers, "sm_"), "sm_75, sm_86");
  EXPECT_EQ(ArchitectureList(a.ptx, a.containers, "compute_"), "compute_86");
  WriteFile(lib, Elf(""));
  EXPECT_EQ(ReadElfFatbin(lib).containers, 0);
  WriteFile(lib, "#!/bin/sh\n");
  EXPECT_THROW(ReadElfFatbin(lib), std::runtime_error);
  EXPECT_THROW(ReadElfFatbin(tmp.path() + "/missing.so"), std::runtime_error);
}

// The venv's LibTorch (scripts/setup.sh installs a CUDA wheel): sm_90 must be among its SASS
// architectures. Skipped where the venv or a CUDA wheel is missing.
TEST(DoctorFatbin, RealLibtorchCudaHasSm90) {
  const char* src = std::getenv("RINGPILOT_SOURCE_DIR");
  std::string lib;
  std::error_code ec;
  const std::string venv_lib = std::string(src ? src : ".") + "/.venv/lib";
  for (std::filesystem::directory_iterator it(venv_lib, ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto candidate = it->path() / "site-packages/torch/lib/libtorch_cuda.so";
    if (std::filesystem::exists(candidate)) lib = candidate.string();
  }
  if (lib.empty()) GTEST_SKIP() << "no libtorch_cuda.so under " << venv_lib;
  const auto t0 = std::chrono::steady_clock::now();
  const FatbinArchitectures a = ReadElfFatbin(lib);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(a.containers, 10);
  const std::string sass = ArchitectureList(a.sass, a.containers, "sm_");
  EXPECT_NE(sass.find("sm_90"), std::string::npos) << sass;
  EXPECT_NE(sass.find("sm_80"), std::string::npos) << sass;
  std::string why;
  EXPECT_EQ(ArchitectureSupport(a, 9, 0, &why), CheckStatus::kPass) << why;
  EXPECT_EQ(ArchitectureSupport(a, 3, 5, &why), CheckStatus::kFail) << why;
  EXPECT_LT(s, 5.0) << "walking the headers took " << s << " s";
  std::cout << "libtorch_cuda.so: " << a.containers << " containers; SASS " << sass << "; PTX "
            << ArchitectureList(a.ptx, a.containers, "compute_") << " (" << s << " s)\n";
}

TEST(DoctorFatbin, ComputeCapabilitySupport) {
  FatbinArchitectures a;
  a.containers = 4;
  a.sass = {{75, 4}, {80, 4}, {90, 4}, {100, 1}};  // sm_100 in 1 of 4: does not count
  a.ptx = {{90, 4}};
  std::string why;
  EXPECT_EQ(ArchitectureSupport(a, 9, 0, &why), CheckStatus::kPass);
  EXPECT_EQ(why, "sm_90 SASS");
  EXPECT_EQ(ArchitectureSupport(a, 8, 6, &why), CheckStatus::kPass);  // sm_80 runs on 8.6
  EXPECT_NE(why.find("sm_80"), std::string::npos) << why;
  EXPECT_EQ(ArchitectureSupport(a, 10, 0, &why), CheckStatus::kWarn);  // compute_90 JIT
  EXPECT_NE(why.find("compute_90"), std::string::npos) << why;
  EXPECT_EQ(ArchitectureSupport(a, 7, 0, &why), CheckStatus::kFail);  // sm_75 not on 7.0
  a.ptx.clear();
  EXPECT_EQ(ArchitectureSupport(a, 12, 0, &why), CheckStatus::kFail);
}

// ---- the checks against a fake environment --------------------------------------------------

struct Fake {
  TempDir tmp;
  DoctorEnv env;
  DriverInfo drv;
  std::string trainer;
  std::string ldd_output;
  FatbinArchitectures archs;

  explicit Fake(int gpus) {
    env.sysfs_root = tmp.path() + "/sys";
    env.proc_root = tmp.path() + "/proc";
    env.dev_root = tmp.path() + "/dev";
    for (int i = 0; i < gpus; ++i) {
      std::filesystem::create_directories(env.proc_root + "/driver/nvidia/gpus/0000:1" +
                                          std::to_string(i) + ":00.0");
    }
    drv.cuda_loaded = true;
    drv.cuda_device_count = gpus;
    for (int i = 0; i < gpus; ++i) drv.cuda_devices.push_back({i, "NVIDIA H100", 9, 0});
    trainer = tmp.path() + "/ringpilot-trainer";
    WriteFile(trainer, "#!/bin/sh\n", true);
    env.vars["RINGPILOT_TRAINER"] = trainer;
    ldd_output = "\tlibtorch_cuda.so => /venv/torch/lib/libtorch_cuda.so (0x00007f)\n";
    env.run = [this](const std::vector<std::string>& argv, int) {
      CommandResult r;
      if (argv.at(0) == "ldd") {
        r.started = true;
        r.exit_code = 0;
        r.output = ldd_output;
      }
      return r;
    };
    archs.containers = 2;
    archs.sass = {{80, 2}, {90, 2}};
    env.read_fatbin = [this](const std::string& path) {
      if (path != "/venv/torch/lib/libtorch_cuda.so") throw std::runtime_error(path + ": no");
      return archs;
    };
  }
};

TEST(DoctorCudaArch, PassWarnFailAndHints) {
  Fake f(2);
  CheckResult r = CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.name, "cuda_arch");
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.detail;
  EXPECT_NE(r.detail.find("NVIDIA H100 (9.0): sm_90 SASS"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("sm_80, sm_90"), std::string::npos) << r.detail;
  // A Blackwell GPU (10.0) with PTX compute_90 only: JIT.
  f.drv.cuda_devices[1] = {1, "NVIDIA B200", 10, 0};
  f.archs.ptx = {{90, 2}};
  r = CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_NE(r.hint.find("TORCH_CUDA_ARCH_LIST=\"10.0\""), std::string::npos) << r.hint;
  // No PTX either: FAIL naming the capability.
  f.archs.ptx.clear();
  r = CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kFail) << r.detail;
  EXPECT_NE(r.detail.find("NVIDIA B200 (10.0)"), std::string::npos) << r.detail;
  EXPECT_NE(r.hint.find("TORCH_CUDA_ARCH_LIST"), std::string::npos) << r.hint;
  EXPECT_NE(r.hint.find("wheel"), std::string::npos) << r.hint;
}

TEST(DoctorCudaArch, SkipsWithoutGpuTrainerOrCudaLibtorch) {
  Fake f(1);
  EXPECT_EQ(CheckCudaArchitectures(f.env, f.drv, config::Device::kCpu).status, CheckStatus::kSkip);
  f.ldd_output = "\tlibtorch_cpu.so => /venv/torch/lib/libtorch_cpu.so (0x00007f)\n";
  CheckResult r = CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kSkip);
  EXPECT_NE(r.detail.find("CPU-only"), std::string::npos) << r.detail;
  // RINGPILOT_LIBTORCH_CUDA names the library directly (no trainer needed).
  f.env.vars["RINGPILOT_TRAINER"] = f.tmp.path() + "/none";
  EXPECT_EQ(CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto).status, CheckStatus::kSkip);
  f.env.vars["RINGPILOT_LIBTORCH_CUDA"] = "/venv/torch/lib/libtorch_cuda.so";
  EXPECT_EQ(CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto).status, CheckStatus::kPass);
  f.env.vars["RINGPILOT_LIBTORCH_CUDA"] = "/elsewhere/libtorch_cuda.so";
  r = CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kSkip);
  EXPECT_NE(r.detail.find("/elsewhere"), std::string::npos) << r.detail;
  f.drv.cuda_devices.clear();
  EXPECT_EQ(CheckCudaArchitectures(f.env, f.drv, config::Device::kAuto).status, CheckStatus::kSkip);
}

TEST(DoctorPeerAccess, MatrixStatuses) {
  Fake f(3);
  CheckResult r = CheckPeerAccess(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.name, "p2p_access");
  EXPECT_EQ(r.status, CheckStatus::kSkip) << r.detail;  // not queried
  f.drv.peer_access = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
  r = CheckPeerAccess(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.detail;
  EXPECT_NE(r.detail.find("6 ordered GPU pairs"), std::string::npos) << r.detail;
  // GPU 2 behind another root port with ACS: no P2P to or from it.
  f.drv.peer_access = {{1, 1, 0}, {1, 1, 0}, {0, 0, 1}};
  r = CheckPeerAccess(f.env, f.drv, config::Device::kAuto);
  EXPECT_EQ(r.status, CheckStatus::kWarn) << r.detail;
  EXPECT_NE(r.detail.find("0->2, 1->2, 2->0, 2->1"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("0: - Y N; 1: Y - N; 2: N N -"), std::string::npos) << r.detail;
  EXPECT_NE(r.hint.find("ACS"), std::string::npos) << r.hint;
  EXPECT_NE(r.hint.find("IOMMU"), std::string::npos) << r.hint;
  // The same with NVLink active: a fault.
  DriverGpu g;
  g.nvlink_states = {1, 1};
  f.drv.gpus = {g};
  EXPECT_EQ(CheckPeerAccess(f.env, f.drv, config::Device::kAuto).status, CheckStatus::kFail);
  // Different by direction: a fault.
  f.drv.gpus.clear();
  f.drv.peer_access = {{1, 1, 1}, {0, 1, 1}, {1, 1, 1}};
  EXPECT_EQ(CheckPeerAccess(f.env, f.drv, config::Device::kAuto).status, CheckStatus::kFail);
  // One GPU: nothing to check.
  Fake one(1);
  EXPECT_EQ(CheckPeerAccess(one.env, one.drv, config::Device::kAuto).status, CheckStatus::kSkip);
  EXPECT_EQ(CheckPeerAccess(f.env, f.drv, config::Device::kCpu).status, CheckStatus::kSkip);
}

}  // namespace
}  // namespace ringpilot::doctor
