// NVML, loaded with dlopen: the few types and entry points used here are declared below
// (NVML's ABI is stable), so the build needs neither the driver nor its headers.
#include <dlfcn.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "topology/probe.h"

namespace ringpilot::topology {
namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlPciInfo_t {  // nvmlPciInfo_st as of NVML's _v3 PCI info
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned kNvlinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr int kNvmlFeatureEnabled = 1;
constexpr unsigned kNameSize =
    96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*Init)() = nullptr;
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*GetCount)(unsigned*) = nullptr;
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*GetUuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*GetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*GetCc)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*GetMemory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*GetNvLinkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*GetNvLinkRemotePci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;

  ~Nvml() {
    if (handle) ::dlclose(handle);
  }
  std::string Error(nvmlReturn_t rc) const {
    return ErrorString ? ErrorString(rc) : "NVML error " + std::to_string(rc);
  }
};

template <typename F>
bool Bind(void* handle, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(::dlsym(handle, name));
  return *fn != nullptr;
}

int SysfsNuma(const std::string& sysfs_root, const std::string& bus_id) {
  std::ifstream in(sysfs_root + "/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

}  // namespace

double NvlinkBytesPerSecondPerLink(const ComputeCapability& cc) {
  const int v = cc.major * 10 + cc.minor;
  if (v >= 100) return 50e9;      // NVLink 5 (Blackwell): 100 GB/s per link, both ways
  if (v >= 90) return 26.5625e9;  // NVLink 4 (Hopper): 26.5625 GB/s per link, per direction
  if (v == 86) return 14.0625e9;  // NVLink 3 on GA102 (A40, RTX 3090): 4 links, 56.25 GB/s
  if (v >= 70) return 25e9;       // NVLink 2 (Volta) and 3 (A100)
  return 20e9;                    // NVLink 1 (Pascal P100)
}

std::vector<GpuLink> NvlinkConnections(const std::vector<NvmlGpu>& gpus) {
  std::map<std::string, int> gpu_by_bus;
  for (const NvmlGpu& g : gpus) gpu_by_bus[g.gpu.pci_bus_id] = g.gpu.index;
  std::vector<std::map<int, int>> direct(gpus.size());  // per GPU: peer index -> links
  std::vector<int> switch_links(gpus.size(), 0);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (const std::string& remote : gpus[i].nvlink_remote_bus_ids) {
      const auto it = gpu_by_bus.find(remote);
      if (it == gpu_by_bus.end()) {
        ++switch_links[i];
      } else if (it->second != gpus[i].gpu.index) {
        ++direct[i][it->second];
      }
    }
  }
  std::vector<GpuLink> links;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      const int a = gpus[i].gpu.index;
      const int b = gpus[j].gpu.index;
      int count = std::max(direct[i].count(b) ? direct[i].at(b) : 0,
                           direct[j].count(a) ? direct[j].at(a) : 0);
      count += std::min(switch_links[i], switch_links[j]);
      if (count == 0) continue;
      GpuLink l;
      l.gpu_a = std::min(a, b);
      l.gpu_b = std::max(a, b);
      l.nvlink_count = count;
      l.nvlink_bytes_per_second_per_link =
          std::min(NvlinkBytesPerSecondPerLink(gpus[i].gpu.compute_capability),
                   NvlinkBytesPerSecondPerLink(gpus[j].gpu.compute_capability));
      links.push_back(l);
    }
  }
  return links;
}

std::vector<NvmlGpu> ProbeNvml(const std::string& library, const std::string& sysfs_root,
                               std::vector<std::string>* warnings) {
  Nvml nvml;
  nvml.handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nvml.handle) {
    warnings->push_back("NVML: cannot load " + library + " (no NVIDIA driver?): no GPUs reported");
    return {};
  }
  Bind(nvml.handle, "nvmlErrorString", &nvml.ErrorString);
  if (!Bind(nvml.handle, "nvmlInit_v2", &nvml.Init) ||
      !Bind(nvml.handle, "nvmlShutdown", &nvml.Shutdown) ||
      !Bind(nvml.handle, "nvmlDeviceGetCount_v2", &nvml.GetCount) ||
      !Bind(nvml.handle, "nvmlDeviceGetHandleByIndex_v2", &nvml.GetHandleByIndex) ||
      !Bind(nvml.handle, "nvmlDeviceGetName", &nvml.GetName) ||
      !Bind(nvml.handle, "nvmlDeviceGetUUID", &nvml.GetUuid) ||
      !Bind(nvml.handle, "nvmlDeviceGetPciInfo_v3", &nvml.GetPciInfo) ||
      !Bind(nvml.handle, "nvmlDeviceGetCudaComputeCapability", &nvml.GetCc) ||
      !Bind(nvml.handle, "nvmlDeviceGetMemoryInfo", &nvml.GetMemory)) {
    warnings->push_back("NVML: " + library + " lacks a required entry point: no GPUs reported");
    return {};
  }
  const bool have_nvlink =
      Bind(nvml.handle, "nvmlDeviceGetNvLinkState", &nvml.GetNvLinkState) &&
      Bind(nvml.handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &nvml.GetNvLinkRemotePci);
  nvmlReturn_t rc = nvml.Init();
  if (rc != kNvmlSuccess) {
    warnings->push_back("NVML: nvmlInit failed: " + nvml.Error(rc) + ": no GPUs reported");
    return {};
  }
  std::vector<NvmlGpu> out;
  unsigned count = 0;
  rc = nvml.GetCount(&count);
  if (rc != kNvmlSuccess) {
    warnings->push_back("NVML: nvmlDeviceGetCount failed: " + nvml.Error(rc));
    count = 0;
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    rc = nvml.GetHandleByIndex(i, &dev);
    if (rc != kNvmlSuccess) {
      warnings->push_back("NVML: GPU " + std::to_string(i) + ": " + nvml.Error(rc) + ": skipped");
      continue;
    }
    const std::string what = "NVML: GPU " + std::to_string(i) + ": ";
    NvmlGpu rec;
    rec.gpu.index = static_cast<int>(i);
    char text[kNameSize] = {};
    if ((rc = nvml.GetName(dev, text, kNameSize)) == kNvmlSuccess) {
      rec.gpu.name = text;
    } else {
      warnings->push_back(what + "name: " + nvml.Error(rc));
    }
    char uuid[kNameSize] = {};
    if ((rc = nvml.GetUuid(dev, uuid, kNameSize)) == kNvmlSuccess) {
      rec.gpu.uuid = uuid;
    } else {
      warnings->push_back(what + "UUID: " + nvml.Error(rc));
    }
    nvmlPciInfo_t pci{};
    if ((rc = nvml.GetPciInfo(dev, &pci)) == kNvmlSuccess) {
      rec.gpu.pci_bus_id = NormalizePciBusId(pci.busId);
    } else {
      warnings->push_back(what + "PCI info: " + nvml.Error(rc) + ": skipped");
      continue;
    }
    int major = 0, minor = 0;
    if ((rc = nvml.GetCc(dev, &major, &minor)) == kNvmlSuccess) {
      rec.gpu.compute_capability = {major, minor};
    } else {
      warnings->push_back(what + "compute capability: " + nvml.Error(rc));
    }
    nvmlMemory_t mem{};
    if ((rc = nvml.GetMemory(dev, &mem)) == kNvmlSuccess) {
      rec.gpu.memory_bytes = mem.total;
    } else {
      warnings->push_back(what + "memory: " + nvml.Error(rc));
    }
    rec.gpu.numa_node = SysfsNuma(sysfs_root, rec.gpu.pci_bus_id);
    for (unsigned link = 0; have_nvlink && link < kNvlinkMaxLinks; ++link) {
      int active = 0;
      // Links beyond the GPU's count answer NOT_SUPPORTED / INVALID_ARGUMENT: not an error.
      if (nvml.GetNvLinkState(dev, link, &active) != kNvmlSuccess) continue;
      if (active != kNvmlFeatureEnabled) continue;
      nvmlPciInfo_t remote{};
      if (nvml.GetNvLinkRemotePci(dev, link, &remote) != kNvmlSuccess) continue;
      rec.nvlink_remote_bus_ids.push_back(NormalizePciBusId(remote.busId));
    }
    out.push_back(std::move(rec));
  }
  nvml.Shutdown();
  return out;
}

}  // namespace ringpilot::topology
