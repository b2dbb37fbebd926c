// A stand-in for libnvidia-ml.so.1 for the NVML probe and GPU sampler tests: two H200s
// whose 18 NVLinks each end at an NVSwitch, as on an HGX board, with fixed readings for the
// sampler (tests/metrics/gpu_sampler_test.cpp states them). Only the entry points
// ringpilot uses (topology/nvml_api.h).
#include <cstdio>
#include <cstring>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kTimeout = 10;
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
struct Utilization {
  unsigned gpu, memory;
};
struct FieldValue {
  unsigned fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType, nvmlReturn;
  unsigned long long value;
};
struct EventData {
  void* device;
  unsigned long long eventType, eventData;
  unsigned gpuInstanceId, computeInstanceId;
};

// NVLink data counters (KiB) grow by 1000 TX / 3000 RX per read.
unsigned long long nvlink_reads[kGpus] = {};
unsigned long long violation_reads[kGpus][2] = {};
// The energy counter (mJ) grows by 612,500 per read: 612.5 W over each second between reads.
unsigned long long energy_reads[kGpus] = {};
bool xid_delivered = false;

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
int nvmlDeviceGetIndex(void* dev, unsigned* index) {
  *index = IndexOf(dev);
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
  mem->used = 40ull << 30;
  mem->free = mem->total - mem->used;
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

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** dev) {
  // Like NVML, any spelling of domain:bus:device.function ("0000:2a:00.0") matches.
  unsigned want[4] = {}, have[4] = {};
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &want[0], &want[1], &want[2], &want[3]) != 4) {
    return kInvalidArgument;
  }
  for (unsigned i = 0; i < kGpus; ++i) {
    std::sscanf(kBusIds[i], "%x:%x:%x.%x", &have[0], &have[1], &have[2], &have[3]);
    if (std::memcmp(want, have, sizeof want) == 0) return nvmlDeviceGetHandleByIndex_v2(i, dev);
  }
  return kNotFound;
}
int nvmlDeviceGetUtilizationRates(void*, Utilization* u) {
  u->gpu = 87;
  u->memory = 42;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* milliwatts) {
  *milliwatts = 612500;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void*, int sensor, unsigned* celsius) {
  if (sensor != 0) return kInvalidArgument;
  *celsius = 67;
  return kSuccess;
}
int nvmlDeviceGetClockInfo(void*, int type, unsigned* mhz) {
  if (type != 1) return kNotSupported;  // SM clock only
  *mhz = 1980;
  return kSuccess;
}
int nvmlDeviceGetMaxClockInfo(void*, int type, unsigned* mhz) {
  if (type != 1) return kNotSupported;
  *mhz = 1980;
  return kSuccess;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* milliwatts) {
  *milliwatts = 700000;
  return kSuccess;
}
int nvmlDeviceGetTotalEnergyConsumption(void* dev, unsigned long long* millijoules) {
  *millijoules = 5'000'000'000ULL + 612'500ULL * ++energy_reads[IndexOf(dev)];
  return kSuccess;
}
int nvmlDeviceGetPcieThroughput(void*, int counter, unsigned* kb_per_s) {
  *kb_per_s = counter == 0 ? 2000 : 8000;  // TX, RX
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksEventReasons(void*, unsigned long long* mask) {
  *mask = 0x4 | 0x20;  // SW power cap, SW thermal slowdown
  return kSuccess;
}
int nvmlDeviceGetTotalEccErrors(void*, int error_type, int counter_type,
                                unsigned long long* count) {
  if (counter_type != 0) return kNotSupported;  // volatile only
  *count = error_type == 0 ? 5 : 1;
  return kSuccess;
}
int nvmlDeviceGetFieldValues(void* dev, int count, FieldValue* values) {
  const unsigned long long reads = ++nvlink_reads[IndexOf(dev)];
  for (int i = 0; i < count; ++i) {
    values[i].valueType = 3;  // unsigned long long
    values[i].nvmlReturn = kSuccess;
    if (values[i].fieldId == 138) {
      values[i].value = 1000 * reads;
    } else if (values[i].fieldId == 139) {
      values[i].value = 3000 * reads;
    } else {
      values[i].nvmlReturn = kNotSupported;
    }
  }
  return kSuccess;
}
// Each read finds 250 ms more under the power limit and 10 ms more under the thermal one.
struct ViolationTime {
  unsigned long long reference_us;
  unsigned long long violation_ns;
};
int nvmlDeviceGetViolationStatus(void* dev, int policy, ViolationTime* t) {
  if (policy != 0 && policy != 1) return kNotSupported;
  const unsigned long long reads = ++violation_reads[IndexOf(dev)][policy];
  t->reference_us = 1'000'000 * reads;
  t->violation_ns = (policy == 0 ? 250'000'000ULL : 10'000'000ULL) * reads;
  return kSuccess;
}
int nvmlEventSetCreate(void** set) {
  *set = reinterpret_cast<void*>(0x5e7);
  return kSuccess;
}
int nvmlDeviceRegisterEvents(void*, unsigned long long types, void*) {
  return types == 0x8 ? kSuccess : kNotSupported;
}
int nvmlEventSetWait_v2(void*, EventData* data, unsigned) {
  if (xid_delivered) return kTimeout;
  xid_delivered = true;  // one XID 79 (GPU fell off the bus), once
  std::memset(data, 0, sizeof *data);
  data->eventType = 0x8;
  data->eventData = 79;
  return kSuccess;
}
int nvmlEventSetFree(void*) { return kSuccess; }

}  // extern "C"
