#include "topology/nvml_api.h"

#include <dlfcn.h>

namespace ringpilot::topology {
namespace {

template <typename F>
bool Bind(void* handle, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(::dlsym(handle, name));
  return *fn != nullptr;
}

}  // namespace

std::unique_ptr<NvmlApi> NvmlApi::Load(const std::string& library, std::string* error) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    *error = "cannot load " + library + (e ? std::string(": ") + e : std::string());
    return nullptr;
  }
  std::unique_ptr<NvmlApi> api(new NvmlApi());
  api->handle_ = handle;
  NvmlApi& n = *api;
  const bool core = Bind(handle, "nvmlInit_v2", &n.Init) &&
                    Bind(handle, "nvmlShutdown", &n.Shutdown) &&
                    Bind(handle, "nvmlDeviceGetCount_v2", &n.DeviceGetCount) &&
                    Bind(handle, "nvmlDeviceGetHandleByIndex_v2", &n.DeviceGetHandleByIndex);
  if (!core) {
    *error = library +
             " lacks nvmlInit_v2/nvmlShutdown/nvmlDeviceGetCount_v2/"
             "nvmlDeviceGetHandleByIndex_v2";
    return nullptr;
  }
  Bind(handle, "nvmlErrorString", &n.ErrorString);
  Bind(handle, "nvmlSystemGetDriverVersion", &n.SystemGetDriverVersion);
  Bind(handle, "nvmlDeviceGetHandleByPciBusId_v2", &n.DeviceGetHandleByPciBusId);
  Bind(handle, "nvmlDeviceGetName", &n.DeviceGetName);
  Bind(handle, "nvmlDeviceGetUUID", &n.DeviceGetUUID);
  Bind(handle, "nvmlDeviceGetIndex", &n.DeviceGetIndex);
  Bind(handle, "nvmlDeviceGetPciInfo_v3", &n.DeviceGetPciInfo);
  Bind(handle, "nvmlDeviceGetCudaComputeCapability", &n.DeviceGetCudaComputeCapability);
  Bind(handle, "nvmlDeviceGetMemoryInfo", &n.DeviceGetMemoryInfo);
  Bind(handle, "nvmlDeviceGetNvLinkState", &n.DeviceGetNvLinkState);
  Bind(handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n.DeviceGetNvLinkRemotePciInfo);
  Bind(handle, "nvmlDeviceGetTotalEccErrors", &n.DeviceGetTotalEccErrors);
  Bind(handle, "nvmlDeviceGetRetiredPages", &n.DeviceGetRetiredPages);
  Bind(handle, "nvmlDeviceGetRetiredPagesPendingStatus", &n.DeviceGetRetiredPagesPendingStatus);
  Bind(handle, "nvmlDeviceGetRemappedRows", &n.DeviceGetRemappedRows);
  if (!Bind(handle, "nvmlDeviceGetCurrentClocksEventReasons",
            &n.DeviceGetCurrentClocksEventReasons)) {
    Bind(handle, "nvmlDeviceGetCurrentClocksThrottleReasons",
         &n.DeviceGetCurrentClocksEventReasons);
  }
  Bind(handle, "nvmlDeviceGetUtilizationRates", &n.DeviceGetUtilizationRates);
  Bind(handle, "nvmlDeviceGetPowerUsage", &n.DeviceGetPowerUsage);
  Bind(handle, "nvmlDeviceGetTemperature", &n.DeviceGetTemperature);
  Bind(handle, "nvmlDeviceGetClockInfo", &n.DeviceGetClockInfo);
  Bind(handle, "nvmlDeviceGetMaxClockInfo", &n.DeviceGetMaxClockInfo);
  Bind(handle, "nvmlDeviceGetEnforcedPowerLimit", &n.DeviceGetEnforcedPowerLimit);
  Bind(handle, "nvmlDeviceGetTotalEnergyConsumption", &n.DeviceGetTotalEnergyConsumption);
  Bind(handle, "nvmlDeviceGetPcieThroughput", &n.DeviceGetPcieThroughput);
  Bind(handle, "nvmlDeviceGetFieldValues", &n.DeviceGetFieldValues);
  Bind(handle, "nvmlDeviceGetViolationStatus", &n.DeviceGetViolationStatus);
  Bind(handle, "nvmlEventSetCreate", &n.EventSetCreate);
  Bind(handle, "nvmlDeviceRegisterEvents", &n.DeviceRegisterEvents);
  Bind(handle, "nvmlEventSetWait_v2", &n.EventSetWait);
  Bind(handle, "nvmlEventSetFree", &n.EventSetFree);
  return api;
}

std::string NvmlApi::Error(nvmlReturn_t rc) const {
  return ErrorString ? ErrorString(rc) : "NVML error " + std::to_string(rc);
}

NvmlApi::~NvmlApi() {
  if (handle_) ::dlclose(handle_);
}

}  // namespace ringpilot::topology
