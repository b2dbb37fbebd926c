// The GPUs of this node through NVML (topology/nvml_api.h: dlopen'ed, so the build needs
// neither the driver nor its headers), and the NVLink wiring between them.
#include <algorithm>
#include <fstream>
#include <map>

#include "topology/nvml_api.h"
#include "topology/probe.h"

namespace ringpilot::topology {
namespace {

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
      const int switched = std::min(switch_links[i], switch_links[j]);
      count += switched;
      if (count == 0) continue;
      GpuLink l;
      l.gpu_a = std::min(a, b);
      l.gpu_b = std::max(a, b);
      l.nvlink_count = count;
      l.via_nvswitch = switched > 0;
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
  std::string error;
  const std::unique_ptr<NvmlApi> api = NvmlApi::Load(library, &error);
  if (!api) {
    if (error.rfind("cannot load", 0) == 0) {
      warnings->push_back("NVML: cannot load " + library +
                          " (no NVIDIA driver?): no GPUs reported");
    } else {
      warnings->push_back("NVML: " + error + ": no GPUs reported");
    }
    return {};
  }
  const NvmlApi& nvml = *api;
  if (!nvml.DeviceGetName || !nvml.DeviceGetUUID || !nvml.DeviceGetPciInfo ||
      !nvml.DeviceGetCudaComputeCapability || !nvml.DeviceGetMemoryInfo) {
    warnings->push_back("NVML: " + library + " lacks a required entry point: no GPUs reported");
    return {};
  }
  const bool have_nvlink = nvml.DeviceGetNvLinkState && nvml.DeviceGetNvLinkRemotePciInfo;
  nvmlReturn_t rc = nvml.Init();
  if (rc != kNvmlSuccess) {
    warnings->push_back("NVML: nvmlInit failed: " + nvml.Error(rc) + ": no GPUs reported");
    return {};
  }
  std::vector<NvmlGpu> out;
  unsigned count = 0;
  rc = nvml.DeviceGetCount(&count);
  if (rc != kNvmlSuccess) {
    warnings->push_back("NVML: nvmlDeviceGetCount failed: " + nvml.Error(rc));
    count = 0;
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    rc = nvml.DeviceGetHandleByIndex(i, &dev);
    if (rc != kNvmlSuccess) {
      warnings->push_back("NVML: GPU " + std::to_string(i) + ": " + nvml.Error(rc) + ": skipped");
      continue;
    }
    const std::string what = "NVML: GPU " + std::to_string(i) + ": ";
    NvmlGpu rec;
    rec.gpu.index = static_cast<int>(i);
    char text[kNvmlBufferSize] = {};
    if ((rc = nvml.DeviceGetName(dev, text, kNvmlBufferSize)) == kNvmlSuccess) {
      rec.gpu.name = text;
    } else {
      warnings->push_back(what + "name: " + nvml.Error(rc));
    }
    char uuid[kNvmlBufferSize] = {};
    if ((rc = nvml.DeviceGetUUID(dev, uuid, kNvmlBufferSize)) == kNvmlSuccess) {
      rec.gpu.uuid = uuid;
    } else {
      warnings->push_back(what + "UUID: " + nvml.Error(rc));
    }
    nvmlPciInfo_t pci{};
    if ((rc = nvml.DeviceGetPciInfo(dev, &pci)) == kNvmlSuccess) {
      rec.gpu.pci_bus_id = NormalizePciBusId(pci.busId);
    } else {
      warnings->push_back(what + "PCI info: " + nvml.Error(rc) + ": skipped");
      continue;
    }
    int major = 0, minor = 0;
    if ((rc = nvml.DeviceGetCudaComputeCapability(dev, &major, &minor)) == kNvmlSuccess) {
      rec.gpu.compute_capability = {major, minor};
    } else {
      warnings->push_back(what + "compute capability: " + nvml.Error(rc));
    }
    nvmlMemory_t mem{};
    if ((rc = nvml.DeviceGetMemoryInfo(dev, &mem)) == kNvmlSuccess) {
      rec.gpu.memory_bytes = mem.total;
    } else {
      warnings->push_back(what + "memory: " + nvml.Error(rc));
    }
    rec.gpu.numa_node = SysfsNuma(sysfs_root, rec.gpu.pci_bus_id);
    for (unsigned link = 0; have_nvlink && link < kNvmlNvlinkMaxLinks; ++link) {
      int active = 0;
      // Links beyond the GPU's count answer NOT_SUPPORTED / INVALID_ARGUMENT: not an error.
      if (nvml.DeviceGetNvLinkState(dev, link, &active) != kNvmlSuccess) continue;
      if (active != kNvmlFeatureEnabled) continue;
      nvmlPciInfo_t remote{};
      if (nvml.DeviceGetNvLinkRemotePciInfo(dev, link, &remote) != kNvmlSuccess) continue;
      rec.nvlink_remote_bus_ids.push_back(NormalizePciBusId(remote.busId));
    }
    out.push_back(std::move(rec));
  }
  nvml.Shutdown();
  return out;
}

}  // namespace ringpilot::topology
