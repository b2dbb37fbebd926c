// Doctor checks of what CUDA code can run on the GPUs: each GPU's compute capability vs the
// architectures compiled into LibTorch (the .nv_fatbin section of libtorch_cuda.so, walked
// header by header), and the peer-to-peer access matrix from cuDeviceCanAccessPeer.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "base/environment.h"
#include "base/files.h"
#include "doctor/check_context.h"
#include "doctor/detail_text.h"
#include "doctor/doctor.h"

namespace ringpilot::doctor {
namespace {

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr std::size_t kContainerHeaderSize = 16;
constexpr std::size_t kEntryHeaderMin = 32;  // kind .. arch, the fields read here
constexpr std::uint16_t kEntryPtx = 0x1;
constexpr std::uint16_t kEntryElf = 0x2;
constexpr std::uint16_t kEntryElfAlt = 0x10;
constexpr int kLddTimeoutS = 10;

std::uint16_t Le16(const unsigned char* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }
std::uint32_t Le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
std::uint64_t Le64(const unsigned char* p) {
  return static_cast<std::uint64_t>(Le32(p)) | static_cast<std::uint64_t>(Le32(p + 4)) << 32;
}

std::string Hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// An open file read with pread, closed at scope exit.
class File {
 public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  bool ok() const { return fd_ >= 0; }
  bool Read(std::uint64_t offset, void* buf, std::size_t n) const {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
      offset += static_cast<std::uint64_t>(got);
    }
    return true;
  }

 private:
  int fd_;
};

std::string SmText(int arch) { return std::to_string(arch / 10) + "." + std::to_string(arch % 10); }

// Architectures that count: present in at least half of the containers.
std::vector<int> Counted(const std::map<int, int>& archs, int containers) {
  std::vector<int> out;
  for (const auto& [arch, n] : archs) {
    if (containers > 0 && 2 * n >= containers) out.push_back(arch);
  }
  return out;
}

std::string Yn(int v) { return v == 1 ? "Y" : v == 0 ? "N" : "?"; }

}  // namespace

FatbinArchitectures ParseFatbin(const ByteReader& read, std::uint64_t size) {
  FatbinArchitectures out;
  std::uint64_t pos = 0;
  while (pos + kContainerHeaderSize <= size) {
    unsigned char h[kContainerHeaderSize];
    if (!read(pos, h, sizeof h)) throw std::runtime_error("fatbin: unreadable at " + Hex(pos));
    const std::uint32_t magic = Le32(h);
    if (magic == 0 && Le32(h + 4) == 0) {  // padding between containers
      pos += 8;
      continue;
    }
    if (magic != kFatbinMagic) {
      throw std::runtime_error("fatbin: bad container magic " + Hex(magic) + " at " + Hex(pos));
    }
    const std::uint16_t header_size = Le16(h + 6);
    const std::uint64_t fat_size = Le64(h + 8);
    const std::uint64_t end = pos + header_size + fat_size;
    if (header_size < kContainerHeaderSize || end > size || end < pos) {
      throw std::runtime_error("fatbin: container at " + Hex(pos) + " runs past the section");
    }
    ++out.containers;
    std::map<int, bool> sass_here;
    std::map<int, bool> ptx_here;
    for (std::uint64_t e = pos + header_size; e < end;) {
      unsigned char eh[kEntryHeaderMin];
      if (e + sizeof eh > end || !read(e, eh, sizeof eh)) {
        throw std::runtime_error("fatbin: entry header at " + Hex(e) + " runs past its container");
      }
      const std::uint16_t kind = Le16(eh);
      const std::uint32_t entry_header = Le32(eh + 4);
      const std::uint64_t payload = Le64(eh + 8);
      const int arch = static_cast<int>(Le32(eh + 28));
      if (entry_header < kEntryHeaderMin || e + entry_header + payload > end) {
        throw std::runtime_error("fatbin: entry at " + Hex(e) + " runs past its container");
      }
      if (kind == kEntryPtx) ptx_here[arch] = true;
      if (kind == kEntryElf || kind == kEntryElfAlt) sass_here[arch] = true;
      e += entry_header + payload;
    }
    for (const auto& [arch, unused] : sass_here) ++out.sass[arch];
    for (const auto& [arch, unused] : ptx_here) ++out.ptx[arch];
    pos = end;
  }
  return out;
}

FatbinArchitectures ReadElfFatbin(const std::string& path) {
  const File f(path);
  if (!f.ok()) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  unsigned char eh[64];
  if (!f.Read(0, eh, sizeof eh) || std::memcmp(eh,
                                               "\x7f"
                                               "ELF",
                                               4) != 0) {
    throw std::runtime_error(path + ": not an ELF file");
  }
  if (eh[4] != 2 || eh[5] != 1) {
    throw std::runtime_error(path + ": not a 64-bit little-endian ELF file");
  }
  const std::uint64_t shoff = Le64(eh + 0x28);
  const std::uint16_t shentsize = Le16(eh + 0x3a);
  const std::uint16_t shnum = Le16(eh + 0x3c);
  const std::uint16_t shstrndx = Le16(eh + 0x3e);
  if (shentsize < 64 || shstrndx >= shnum) {
    throw std::runtime_error(path + ": malformed ELF section header table");
  }
  std::string table(static_cast<std::size_t>(shentsize) * shnum, '\0');
  if (!f.Read(shoff, table.data(), table.size())) {
    throw std::runtime_error(path + ": section header table unreadable");
  }
  const auto section = [&](std::size_t i, std::size_t field) {
    return reinterpret_cast<const unsigned char*>(table.data()) + i * shentsize + field;
  };
  const std::uint64_t str_off = Le64(section(shstrndx, 24));
  const std::uint64_t str_size = Le64(section(shstrndx, 32));
  if (str_size > (64u << 20)) throw std::runtime_error(path + ": section name table too large");
  std::string names(static_cast<std::size_t>(str_size), '\0');
  if (!f.Read(str_off, names.data(), names.size())) {
    throw std::runtime_error(path + ": section name table unreadable");
  }
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::uint32_t name_at = Le32(section(i, 0));
    if (name_at >= names.size() || std::strcmp(names.c_str() + name_at, ".nv_fatbin") != 0) {
      continue;
    }
    const std::uint64_t base = Le64(section(i, 24));
    const std::uint64_t size = Le64(section(i, 32));
    try {
      return ParseFatbin(
          [&](std::uint64_t off, void* buf, std::size_t n) { return f.Read(base + off, buf, n); },
          size);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  }
  return {};
}

std::string ArchitectureList(const std::map<int, int>& archs, int containers, const char* prefix) {
  std::vector<std::string> parts;
  for (int arch : Counted(archs, containers)) parts.push_back(prefix + std::to_string(arch));
  return parts.empty() ? "(none)" : Join(parts, ", ");
}

CheckStatus ArchitectureSupport(const FatbinArchitectures& archs, int major, int minor,
                                std::string* why) {
  const int target = major * 10 + minor;
  const std::vector<int> sass = Counted(archs.sass, archs.containers);
  const std::vector<int> ptx = Counted(archs.ptx, archs.containers);
  if (std::find(sass.begin(), sass.end(), target) != sass.end()) {
    *why = "sm_" + std::to_string(target) + " SASS";
    return CheckStatus::kPass;
  }
  // SASS runs on a GPU of the same major version and an equal or higher minor.
  for (auto it = sass.rbegin(); it != sass.rend(); ++it) {
    if (*it / 10 == major && *it < target) {
      *why = "sm_" + std::to_string(*it) + " SASS (binary compatible with " + SmText(target) + ")";
      return CheckStatus::kPass;
    }
  }
  for (auto it = ptx.rbegin(); it != ptx.rend(); ++it) {
    if (*it <= target) {
      *why = "only compute_" + std::to_string(*it) + " PTX: JIT-compiled for " + SmText(target) +
             " at start-up";
      return CheckStatus::kWarn;
    }
  }
  *why = "no sm_" + std::to_string(major) + "x SASS at or below sm_" + std::to_string(target) +
         " and no PTX at or below compute_" + std::to_string(target);
  return CheckStatus::kFail;
}

CheckResult CheckCudaArchitectures(const DoctorEnv& env, const DriverInfo& drv,
                                   config::Device dev) {
  const std::string name = "cuda_arch";
  CheckResult skip;
  if (GpuGate(name, env, drv, dev, /*needs_nvml=*/false, &skip)) return skip;
  if (drv.cuda_devices.empty()) {
    return {name, CheckStatus::kSkip,
            "compute capability unknown: libcuda enumerated no GPU" +
                (drv.cuda_error.empty() ? std::string() : " (" + drv.cuda_error + ")"),
            ""};
  }
  std::string lib = base::Lookup(env.vars, "RINGPILOT_LIBTORCH_CUDA", "");
  if (lib.empty()) {
    const std::string trainer = TrainerPath(env);
    if (::access(trainer.c_str(), X_OK) != 0) {
      return {name, CheckStatus::kSkip,
              "ringpilot-trainer not found at " + trainer +
                  ", so its libtorch_cuda.so is unknown (set RINGPILOT_LIBTORCH_CUDA to check one)",
              ""};
    }
    const CommandResult ldd = env.run ? env.run({"ldd", trainer}, kLddTimeoutS) : CommandResult{};
    if (!ldd.started || ldd.timed_out) {
      return {name, CheckStatus::kSkip, "`ldd " + trainer + "` not runnable", ""};
    }
    lib = LddResolution(ldd.output, "libtorch_cuda.so");
    if (lib.empty()) {
      return {name, CheckStatus::kSkip,
              trainer + " links no libtorch_cuda.so (CPU-only LibTorch; see trainer_libraries)",
              ""};
    }
    if (lib == "not found") {
      return {name, CheckStatus::kSkip,
              "libtorch_cuda.so not found by the loader (see trainer_libraries)", ""};
    }
  }
  FatbinArchitectures archs;
  try {
    if (!env.read_fatbin) return {name, CheckStatus::kSkip, "no fatbin reader", ""};
    archs = env.read_fatbin(lib);
  } catch (const std::runtime_error& e) {
    return {name, CheckStatus::kSkip, std::string("architectures not determinable: ") + e.what(),
            ""};
  }
  if (archs.containers == 0) {
    return {name, CheckStatus::kSkip, lib + " holds no CUDA fat binary (.nv_fatbin)", ""};
  }
  const std::string built = "LibTorch " + lib + ": SASS " +
                            ArchitectureList(archs.sass, archs.containers, "sm_") + "; PTX " +
                            ArchitectureList(archs.ptx, archs.containers, "compute_");
  CheckStatus worst = CheckStatus::kPass;
  std::vector<std::string> rows;
  std::string bad_cc;
  for (const CudaDevice& d : drv.cuda_devices) {
    std::string why;
    const CheckStatus s = ArchitectureSupport(archs, d.cc_major, d.cc_minor, &why);
    const std::string cc = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
    const std::string row = d.name + " (" + cc + "): " + why;
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    if (s == CheckStatus::kFail || (s == CheckStatus::kWarn && worst == CheckStatus::kPass)) {
      worst = s;
      bad_cc = cc;
    }
  }
  const std::string detail = Join(rows, "; ") + " [" + built + "]";
  if (worst == CheckStatus::kPass) return {name, CheckStatus::kPass, detail, ""};
  const std::string rebuild = "TORCH_CUDA_ARCH_LIST=\"" + bad_cc + "\"";
  if (worst == CheckStatus::kWarn) {
    return {name, CheckStatus::kWarn, detail,
            "the driver JIT-compiles every kernel at first use (minutes; cached in "
            "~/.nv/ComputeCache, size CUDA_CACHE_MAXSIZE): install a LibTorch wheel built for "
            "compute capability " +
                bad_cc + " or rebuild with " + rebuild};
  }
  return {name, CheckStatus::kFail, detail,
          "this LibTorch has no kernels for compute capability " + bad_cc +
              " (\"no kernel image is available for execution on the device\"): install a "
              "wheel whose CUDA version supports the GPU (e.g. a newer cu12x/cu13x wheel from "
              "download.pytorch.org) or build LibTorch with " +
              rebuild + " (add +PTX for newer GPUs)"};
}

CheckResult CheckPeerAccess(const DoctorEnv& env, const DriverInfo& drv, config::Device dev) {
  const std::string name = "p2p_access";
  CheckResult skip;
  if (GpuGate(name, env, drv, dev, /*needs_nvml=*/false, &skip)) return skip;
  const std::size_t n = drv.cuda_devices.size();
  if (n < 2) {
    return {name, CheckStatus::kSkip, std::to_string(n) + " GPU visible to CUDA: no pair to check",
            ""};
  }
  if (drv.peer_access.size() != n) {
    return {name, CheckStatus::kSkip, "libcuda did not report peer access", ""};
  }
  std::vector<std::string> missing;
  std::vector<std::string> rows;
  bool asymmetric = false;
  for (std::size_t i = 0; i < n; ++i) {
    std::string row = std::to_string(i) + ":";
    for (std::size_t j = 0; j < n; ++j) {
      const int v = j < drv.peer_access[i].size() ? drv.peer_access[i][j] : -1;
      row += " " + (i == j ? std::string("-") : Yn(v));
      if (i == j) continue;
      if (v != 1) missing.push_back(std::to_string(i) + "->" + std::to_string(j));
      const int back = i < drv.peer_access[j].size() ? drv.peer_access[j][i] : -1;
      if (v >= 0 && back >= 0 && v != back) asymmetric = true;
    }
    rows.push_back(row);
  }
  const std::string pairs = std::to_string(n * (n - 1)) + " ordered GPU pairs";
  if (missing.empty()) {
    return {name, CheckStatus::kPass, "all " + pairs + " have peer-to-peer access", ""};
  }
  bool nvlink = false;
  for (const DriverGpu& g : drv.gpus) {
    nvlink = nvlink || std::count(g.nvlink_states.begin(), g.nvlink_states.end(), 1) > 0;
  }
  const std::string detail = std::to_string(missing.size()) + " of " + pairs +
                             " without peer access (" + Join(missing, ", ") +
                             "); matrix, row can access column: " + Join(rows, "; ");
  std::string hint =
      "NCCL then copies through host memory (much slower all-reduce): disable PCIe ACS on the "
      "switches above the GPUs (see pcie_acs) or set the IOMMU to passthrough, iommu=pt (see "
      "iommu); in a VM the "
      "hypervisor must allow P2P (pass through whole PCIe switches); in a container all GPUs "
      "must be in the device cgroup; some consumer GPUs have no P2P at all";
  if (asymmetric || nvlink) {
    hint = std::string(asymmetric ? "access differs by direction (driver or platform fault); "
                                  : "GPUs with active NVLinks must reach each other: on "
                                    "NVSwitch systems check nvidia-fabricmanager; ") +
           hint;
    return {name, CheckStatus::kFail, detail, hint};
  }
  return {name, CheckStatus::kWarn, detail, hint};
}

}  // namespace ringpilot::doctor
