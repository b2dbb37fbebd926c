// A stand-in for libnvidia-ml.so.1 for the NVML probe test: two H200s whose 18 NVLinks
// each end at an NVSwitch, as on an HGX board. Only the entry points the probe uses.
#include <cstring>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr unsigned kGpus = 2;
const char* const kBusIds[kGpus] = {"00000000:18:00.0", "00000000:2A:00.0"};

struct PciInfo {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct Memory {
  unsigned long long total, free, used;
};

unsigned IndexOf(void* dev) {
  return static_cast<unsigned>(reinterpret_cast<unsigned long>(dev)) - 1;
}

}  // namespace

extern "C" {

int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int) { return "fake NVML error"; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kGpus;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** dev) {
  if (index >= kGpus) return kInvalidArgument;
  *dev = reinterpret_cast<void*>(static_cast<unsigned long>(index) + 1);
  return kSuccess;
}
int nvmlDeviceGetName(void*, char* name, unsigned len) {
  std::strncpy(name, "NVIDIA H200", len);
  return kSuccess;
}
int nvmlDeviceGetUUID(void* dev, char* uuid, unsigned len) {
  std::strncpy(uuid, IndexOf(dev) == 0 ? "GPU-fake-0" : "GPU-fake-1", len);
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(void* dev, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::strcpy(pci->busId, kBusIds[IndexOf(dev)]);
  return kSuccess;
}
int nvmlDeviceGetCudaComputeCapability(void*, int* major, int* minor) {
  *major = 9;
  *minor = 0;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void*, Memory* mem) {
  mem->total = 143771ull << 20;
  mem->free = mem->total;
  mem->used = 0;
  return kSuccess;
}
int nvmlDeviceGetNvLinkState(void*, unsigned link, int* active) {
  if (link >= 18) return kInvalidArgument;
  *active = 1;
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void*, unsigned link, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::strcpy(pci->busId, link % 2 ? "00000000:05:00.0" : "00000000:06:00.0");  // NVSwitches
  return kSuccess;
}

}  // extern "C"
