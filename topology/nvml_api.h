// NVML (libnvidia-ml.so.1) loaded with dlopen: the stable C ABI types and entry points that
// ringpilot uses, declared here so that nothing needs nvml.h or links the driver. One table
// serves the topology probe, `ringpilot doctor` and the trainer's GPU sampler
// (metrics/gpu_sampler.h). Entry points missing from an old driver stay null.
#pragma once

#include <memory>
#include <string>

namespace ringpilot::topology {

// ---- NVML types (nvml.h layouts; the ABI is stable) -------------------------------------

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;

struct nvmlPciInfo_t {  ///< nvmlPciInfo_st as filled by the _v3 entry points
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
struct nvmlUtilization_t {
  unsigned int gpu;     ///< percent of time a kernel ran, last sample period
  unsigned int memory;  ///< percent of time device memory was read or written
};
union nvmlValue_t {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  int siVal;
};
struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;  ///< nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  ///< the XID for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
/// nvmlViolationTime_t: how long clocks were held below the application clocks by a
/// policy, since the driver loaded.
struct nvmlViolationTime_t {
  unsigned long long referenceTime;  ///< CPU timestamp, microseconds
  unsigned long long violationTime;  ///< nanoseconds
};
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
constexpr nvmlReturn_t kNvmlErrorTimeout = 10;
constexpr unsigned kNvmlNvlinkMaxLinks = 18;  ///< NVML_NVLINK_MAX_LINKS
constexpr int kNvmlFeatureEnabled = 1;
/// NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE, driver version.
constexpr unsigned kNvmlBufferSize = 96;
constexpr int kNvmlTemperatureGpu = 0;        ///< NVML_TEMPERATURE_GPU
constexpr int kNvmlClockSm = 1;               ///< NVML_CLOCK_SM
constexpr int kNvmlPcieUtilTxBytes = 0;       ///< NVML_PCIE_UTIL_TX_BYTES
constexpr int kNvmlPcieUtilRxBytes = 1;       ///< NVML_PCIE_UTIL_RX_BYTES
constexpr int kNvmlMemoryErrorCorrected = 0;  ///< NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int kNvmlMemoryErrorUncorrected = 1;
constexpr int kNvmlVolatileEcc = 0;  ///< NVML_VOLATILE_ECC: since the driver loaded
constexpr unsigned kNvmlFiNvlinkThroughputDataTx = 138;  ///< KiB, all links
constexpr unsigned kNvmlFiNvlinkThroughputDataRx = 139;
constexpr int kNvmlValueTypeUnsignedLongLong = 3;  ///< NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8;
constexpr int kNvmlPerfPolicyPower = 0;    ///< NVML_PERF_POLICY_POWER
constexpr int kNvmlPerfPolicyThermal = 1;  ///< NVML_PERF_POLICY_THERMAL

/// The entry points, bound by NvmlApi::Load. Every pointer may be null when the driver's
/// library lacks the symbol (check before calling).
struct NvmlApi {
  nvmlReturn_t (*Init)() = nullptr;  ///< nvmlInit_v2
  nvmlReturn_t (*Shutdown)() = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetCount)(unsigned*) = nullptr;                              ///< _v2
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned, nvmlDevice_t*) = nullptr;        ///< _v2
  nvmlReturn_t (*DeviceGetHandleByPciBusId)(const char*, nvmlDevice_t*) = nullptr;  ///< _v2
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*DeviceGetIndex)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;  ///< _v3
  nvmlReturn_t (*DeviceGetCudaComputeCapability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned,
                                               nvmlPciInfo_t*) = nullptr;  ///< _v2
  nvmlReturn_t (*DeviceGetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetRetiredPages)(nvmlDevice_t, int, unsigned*,
                                        unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetRetiredPagesPendingStatus)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*DeviceGetRemappedRows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*,
                                        unsigned*) = nullptr;
  /// nvmlDeviceGetCurrentClocksEventReasons, or the older ...ThrottleReasons (same bits).
  nvmlReturn_t (*DeviceGetCurrentClocksEventReasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetViolationStatus)(nvmlDevice_t, int, nvmlViolationTime_t*) = nullptr;
  nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned*) = nullptr;  ///< milliwatts
  nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned*) = nullptr;      ///< MHz
  nvmlReturn_t (*DeviceGetMaxClockInfo)(nvmlDevice_t, int, unsigned*) = nullptr;   ///< MHz
  nvmlReturn_t (*DeviceGetEnforcedPowerLimit)(nvmlDevice_t, unsigned*) = nullptr;  ///< mW
  /// Energy since the driver loaded, millijoules (Volta and newer).
  nvmlReturn_t (*DeviceGetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*DeviceGetPcieThroughput)(nvmlDevice_t, int, unsigned*) = nullptr;  ///< KB/s
  nvmlReturn_t (*DeviceGetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;  ///< _v2
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t) = nullptr;

  /// dlopens `library` and binds every entry point it has. Returns null and sets `*error`
  /// (one line naming the library) when it cannot be loaded or lacks nvmlInit_v2,
  /// nvmlShutdown, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2. Does not call
  /// nvmlInit. The library stays loaded as long as the returned object lives.
  static std::unique_ptr<NvmlApi> Load(const std::string& library, std::string* error);

  /// nvmlErrorString(rc), or "NVML error <rc>" without it.
  std::string Error(nvmlReturn_t rc) const;

  ~NvmlApi();
  NvmlApi(const NvmlApi&) = delete;
  NvmlApi& operator=(const NvmlApi&) = delete;

 private:
  NvmlApi() = default;
  void* handle_ = nullptr;
};

}  // namespace ringpilot::topology
