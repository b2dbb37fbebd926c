#include "metrics/gpu_sampler.h"

#include <array>
#include <chrono>
#include <optional>

#include "topology/node_topology.h"
#include "topology/nvml_api.h"

namespace ringpilot::metrics {
namespace {

using topology::kNvmlSuccess;
using topology::NvmlApi;
using topology::nvmlDevice_t;
using topology::nvmlReturn_t;

// nvmlClocksEventReason bits (the former throttle reasons), a fixed set of label values.
struct Reason {
  unsigned long long bit;
  const char* label;
};
constexpr std::array<Reason, 9> kReasons = {{
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock_setting"},
}};

// nvmlInit_v2 + the device handle; nvmlShutdown on destruction (NVML counts inits).
bool OpenDevice(const NvmlApi& nvml, const std::string& pci_bus_id, nvmlDevice_t* dev,
                std::string* error) {
  if (const nvmlReturn_t rc = nvml.Init(); rc != kNvmlSuccess) {
    *error = "nvmlInit: " + nvml.Error(rc);
    return false;
  }
  nvmlReturn_t rc = kNvmlSuccess;
  if (pci_bus_id.empty()) {
    rc = nvml.DeviceGetHandleByIndex(0, dev);
  } else if (!nvml.DeviceGetHandleByPciBusId) {
    *error = "NVML lacks nvmlDeviceGetHandleByPciBusId_v2";
    nvml.Shutdown();
    return false;
  } else {
    rc = nvml.DeviceGetHandleByPciBusId(pci_bus_id.c_str(), dev);
  }
  if (rc != kNvmlSuccess) {
    *error = "no NVML device at PCI bus id '" + (pci_bus_id.empty() ? "(GPU 0)" : pci_bus_id) +
             "': " + nvml.Error(rc);
    nvml.Shutdown();
    return false;
  }
  return true;
}

bool ReadIdentity(const NvmlApi& nvml, nvmlDevice_t dev, GpuIdentity* id, std::string* error) {
  char uuid[topology::kNvmlBufferSize] = {};
  topology::nvmlPciInfo_t pci{};
  if (!nvml.DeviceGetUUID || !nvml.DeviceGetPciInfo) {
    *error = "NVML lacks nvmlDeviceGetUUID/nvmlDeviceGetPciInfo_v3";
    return false;
  }
  if (const nvmlReturn_t rc = nvml.DeviceGetUUID(dev, uuid, sizeof uuid); rc != kNvmlSuccess) {
    *error = "nvmlDeviceGetUUID: " + nvml.Error(rc);
    return false;
  }
  if (const nvmlReturn_t rc = nvml.DeviceGetPciInfo(dev, &pci); rc != kNvmlSuccess) {
    *error = "nvmlDeviceGetPciInfo_v3: " + nvml.Error(rc);
    return false;
  }
  id->uuid = uuid;
  id->pci_bus_id = pci.busId;
  unsigned index = 0;
  if (nvml.DeviceGetIndex && nvml.DeviceGetIndex(dev, &index) == kNvmlSuccess) {
    id->index = std::to_string(index);
  }
  return true;
}

// NVML accepts "00000000:18:00.0" and "0000:18:00.0"; normalise other spellings.
std::string ForNvml(const std::string& bus_id) {
  if (bus_id.empty()) return bus_id;
  const std::string normal = topology::NormalizePciBusId(bus_id);
  return normal.empty() ? bus_id : normal;
}

}  // namespace

Labels GpuLabels(const GpuIdentity& id) {
  Labels labels{{"UUID", id.uuid}, {"pci_bus_id", id.pci_bus_id}};
  if (!id.index.empty()) labels.emplace("gpu", id.index);
  return labels;
}

bool LookupGpuIdentity(const std::string& nvml_library, const std::string& pci_bus_id,
                       GpuIdentity* identity, std::string* error) {
  const std::unique_ptr<NvmlApi> nvml = NvmlApi::Load(nvml_library, error);
  if (!nvml) return false;
  nvmlDevice_t dev = nullptr;
  if (!OpenDevice(*nvml, ForNvml(pci_bus_id), &dev, error)) return false;
  const bool ok = ReadIdentity(*nvml, dev, identity, error);
  nvml->Shutdown();
  return ok;
}

// Each series is created on its first reading (a reading NVML does not support never
// creates one) and kept, so later samples neither lock a family nor allocate.
struct GpuSampler::Series {
  nvmlDevice_t dev = nullptr;
  topology::nvmlEventSet_t events = nullptr;
  Labels labels;  // GpuLabels, less those the families have as constant labels
  Family<Gauge>* util_family;
  Family<Gauge>* mem_util_family;
  Family<Gauge>* mem_used_family;
  Family<Gauge>* mem_total_family;
  Family<Gauge>* power_family;
  Family<Gauge>* temperature_family;
  Family<Gauge>* sm_clock_family;
  Family<Gauge>* reasons_family;
  Family<Counter>* nvlink_family;
  Family<Gauge>* pcie_family;
  Family<Counter>* xid_family;
  Family<Gauge>* last_xid_family;
  Family<Counter>* ecc_family;
  Family<Counter>* clock_limited_family;
  Gauge* util = nullptr;
  Gauge* mem_util = nullptr;
  Gauge* mem_used = nullptr;
  Gauge* mem_total = nullptr;
  Gauge* power = nullptr;
  Gauge* temperature = nullptr;
  Gauge* sm_clock = nullptr;
  std::array<Gauge*, kReasons.size()> reasons{};
  std::array<Counter*, 2> nvlink{};  // tx, rx
  std::array<Gauge*, 2> pcie{};      // tx, rx
  Counter* xid = nullptr;
  Gauge* last_xid = nullptr;
  std::array<Counter*, 2> ecc{};                                  // corrected, uncorrected
  std::array<Counter*, 2> clock_limited{};                        // power, thermal
  std::array<std::optional<unsigned long long>, 2> nvlink_last;   // tx, rx (KiB)
  std::array<std::optional<unsigned long long>, 2> limited_last;  // power, thermal (ns)
  std::array<std::optional<unsigned long long>, 2> ecc_last;      // corrected, uncorrected

  // The series of `family` with `labels` (plus name=value), created on first use.
  template <class Metric>
  Metric& Get(Metric*& slot, Family<Metric>& family, const char* name = nullptr,
              const char* value = nullptr) const {
    if (slot == nullptr) {
      Labels l = labels;
      if (name != nullptr) l.emplace(name, value);
      slot = &family.Add(l);
    }
    return *slot;
  }
  // Mirrors a cumulative device value into a counter (a reset adds the new value).
  static void Mirror(Counter& c, std::optional<unsigned long long>& last, unsigned long long now,
                     bool from_zero, double scale) {
    if (!last) {
      if (!from_zero) c.Increment(static_cast<double>(now) * scale);
    } else if (now >= *last) {
      c.Increment(static_cast<double>(now - *last) * scale);
    } else {
      c.Increment(static_cast<double>(now) * scale);
    }
    last = now;
  }
};

GpuSampler::GpuSampler(Families& families, GpuSamplerOptions options)
    : families_(families), options_(std::move(options)) {
  std::string error;
  nvml_ = NvmlApi::Load(options_.nvml_library, &error);
  nvmlDevice_t dev = nullptr;
  if (!nvml_ || !OpenDevice(*nvml_, ForNvml(options_.pci_bus_id), &dev, &error)) {
    warning_ = "GPU metrics off: NVML: " + error;
    nvml_.reset();
    return;
  }
  if (!ReadIdentity(*nvml_, dev, &identity_, &error)) {
    warning_ = "GPU metrics off: NVML: " + error;
    nvml_->Shutdown();
    nvml_.reset();
    return;
  }
  active_ = true;
  series_ = std::make_unique<Series>();
  Series& s = *series_;
  s.dev = dev;
  for (const auto& [name, value] : GpuLabels(identity_)) {
    if (!families_.const_labels().count(name)) s.labels.emplace(name, value);
  }
  Families& r = families_;
  s.util_family = &r.AddGauge("ringpilot_gpu_utilization_ratio",
                              "Share of the last sample period in which a kernel ran on the GPU.");
  s.mem_util_family =
      &r.AddGauge("ringpilot_gpu_memory_utilization_ratio",
                  "Share of the last sample period in which device memory was read or written.");
  s.mem_used_family = &r.AddGauge("ringpilot_gpu_memory_used_bytes", "Device memory in use.");
  s.mem_total_family = &r.AddGauge("ringpilot_gpu_memory_total_bytes", "Device memory installed.");
  s.power_family = &r.AddGauge("ringpilot_gpu_power_watts", "Power draw of the GPU board.");
  s.temperature_family = &r.AddGauge("ringpilot_gpu_temperature_celsius", "GPU core temperature.");
  s.sm_clock_family = &r.AddGauge("ringpilot_gpu_sm_clock_hertz", "Current SM clock.");
  s.reasons_family =
      &r.AddGauge("ringpilot_gpu_clock_event_reason_active",
                  "1 while NVML reports this clock event (throttle) reason, else 0.");
  s.nvlink_family = &r.AddCounter("ringpilot_gpu_nvlink_bytes_total",
                                  "NVLink data bytes over all links since sampling began.");
  s.pcie_family = &r.AddGauge("ringpilot_gpu_pcie_bytes_per_second",
                              "PCIe throughput of the GPU over NVML's last 20 ms window.");
  s.xid_family = &r.AddCounter("ringpilot_gpu_xid_errors_total",
                               "Critical XID errors reported for this GPU while sampling.");
  s.last_xid_family = &r.AddGauge("ringpilot_gpu_last_xid", "Code of the last critical XID error.");
  s.ecc_family = &r.AddCounter("ringpilot_gpu_ecc_errors_total",
                               "Volatile ECC error count (since the driver loaded).");
  s.clock_limited_family = &r.AddCounter("ringpilot_gpu_clock_limited_seconds_total",
                                         "Time the GPU's clocks were held down by its power or "
                                         "thermal limit, since sampling began.");
  if (nvml_->EventSetCreate && nvml_->DeviceRegisterEvents && nvml_->EventSetWait &&
      nvml_->EventSetCreate(&s.events) == kNvmlSuccess) {
    if (nvml_->DeviceRegisterEvents(dev, topology::kNvmlEventTypeXidCriticalError, s.events) !=
        kNvmlSuccess) {
      if (nvml_->EventSetFree) nvml_->EventSetFree(s.events);
      s.events = nullptr;
    } else {
      s.Get(s.xid, *s.xid_family);  // registered: a zero count is a real reading
    }
  }
  SampleOnce();
  if (options_.period_seconds > 0) thread_ = std::thread([this] { Run(); });
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (nvml_) {
    if (series_ && series_->events && nvml_->EventSetFree) nvml_->EventSetFree(series_->events);
    nvml_->Shutdown();
  }
}

void GpuSampler::Run() {
  const auto period = std::chrono::duration<double>(options_.period_seconds);
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stop_; })) {
    lock.unlock();
    SampleOnce();
    lock.lock();
  }
}

GpuClockReading GpuSampler::ReadClocks() {
  GpuClockReading r;
  if (!active_) return r;
  std::lock_guard<std::mutex> lock(sample_mu_);
  const NvmlApi& n = *nvml_;
  const nvmlDevice_t dev = series_->dev;
  if (n.DeviceGetViolationStatus) {
    topology::nvmlViolationTime_t v{};
    if (n.DeviceGetViolationStatus(dev, topology::kNvmlPerfPolicyPower, &v) == kNvmlSuccess) {
      r.power_limited_seconds = static_cast<double>(v.violationTime) * 1e-9;
    }
    if (n.DeviceGetViolationStatus(dev, topology::kNvmlPerfPolicyThermal, &v) == kNvmlSuccess) {
      r.thermal_limited_seconds = static_cast<double>(v.violationTime) * 1e-9;
    }
  }
  r.sm_clock_samples = sm_clock_samples_;
  r.sm_clock_mhz_sum = sm_clock_mhz_sum_;
  unsigned value = 0;
  if (n.DeviceGetMaxClockInfo &&
      n.DeviceGetMaxClockInfo(dev, topology::kNvmlClockSm, &value) == kNvmlSuccess) {
    r.sm_clock_max_mhz = value;
  }
  unsigned long long millijoules = 0;
  if (n.DeviceGetTotalEnergyConsumption &&
      n.DeviceGetTotalEnergyConsumption(dev, &millijoules) == kNvmlSuccess) {
    r.energy_joules = static_cast<double>(millijoules) / 1000.0;
  }
  if (n.DeviceGetEnforcedPowerLimit && n.DeviceGetEnforcedPowerLimit(dev, &value) == kNvmlSuccess) {
    r.power_limit_watts = value / 1000.0;
  }
  return r;
}

void GpuSampler::SampleOnce() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(sample_mu_);
  const NvmlApi& n = *nvml_;
  Series& s = *series_;
  const nvmlDevice_t dev = s.dev;
  topology::nvmlUtilization_t u{};
  if (n.DeviceGetUtilizationRates && n.DeviceGetUtilizationRates(dev, &u) == kNvmlSuccess) {
    s.Get(s.util, *s.util_family).Set(u.gpu / 100.0);
    s.Get(s.mem_util, *s.mem_util_family).Set(u.memory / 100.0);
  }
  topology::nvmlMemory_t mem{};
  if (n.DeviceGetMemoryInfo && n.DeviceGetMemoryInfo(dev, &mem) == kNvmlSuccess) {
    s.Get(s.mem_used, *s.mem_used_family).Set(static_cast<double>(mem.used));
    s.Get(s.mem_total, *s.mem_total_family).Set(static_cast<double>(mem.total));
  }
  unsigned value = 0;
  if (n.DeviceGetPowerUsage && n.DeviceGetPowerUsage(dev, &value) == kNvmlSuccess) {
    s.Get(s.power, *s.power_family).Set(value / 1000.0);
  }
  if (n.DeviceGetTemperature &&
      n.DeviceGetTemperature(dev, topology::kNvmlTemperatureGpu, &value) == kNvmlSuccess) {
    s.Get(s.temperature, *s.temperature_family).Set(value);
  }
  if (n.DeviceGetClockInfo &&
      n.DeviceGetClockInfo(dev, topology::kNvmlClockSm, &value) == kNvmlSuccess) {
    s.Get(s.sm_clock, *s.sm_clock_family).Set(value * 1e6);
    ++sm_clock_samples_;
    sm_clock_mhz_sum_ += value;
  }
  unsigned long long mask = 0;
  if (n.DeviceGetCurrentClocksEventReasons &&
      n.DeviceGetCurrentClocksEventReasons(dev, &mask) == kNvmlSuccess) {
    for (std::size_t i = 0; i < kReasons.size(); ++i) {
      s.Get(s.reasons[i], *s.reasons_family, "reason", kReasons[i].label)
          .Set((mask & kReasons[i].bit) ? 1 : 0);
    }
  }
  if (n.DeviceGetViolationStatus) {
    // Exact time under the limit (NVML's counter), where the reason gauge is a snapshot.
    const int policies[2] = {topology::kNvmlPerfPolicyPower, topology::kNvmlPerfPolicyThermal};
    const char* causes[2] = {"power", "thermal"};
    for (int i = 0; i < 2; ++i) {
      topology::nvmlViolationTime_t v{};
      if (n.DeviceGetViolationStatus(dev, policies[i], &v) != kNvmlSuccess) continue;
      Series::Mirror(s.Get(s.clock_limited[i], *s.clock_limited_family, "cause", causes[i]),
                     s.limited_last[i], v.violationTime, /*from_zero=*/true, 1e-9);
    }
  }
  if (n.DeviceGetFieldValues) {
    topology::nvmlFieldValue_t fields[2] = {};
    fields[0].fieldId = topology::kNvmlFiNvlinkThroughputDataTx;
    fields[1].fieldId = topology::kNvmlFiNvlinkThroughputDataRx;
    if (n.DeviceGetFieldValues(dev, 2, fields) == kNvmlSuccess) {
      const char* direction[2] = {"tx", "rx"};
      for (int i = 0; i < 2; ++i) {
        if (fields[i].nvmlReturn != kNvmlSuccess) continue;
        Series::Mirror(s.Get(s.nvlink[i], *s.nvlink_family, "direction", direction[i]),
                       s.nvlink_last[i], fields[i].value.ullVal, /*from_zero=*/true, 1024.0);
      }
    }
  }
  if (n.DeviceGetPcieThroughput) {
    const int counters[2] = {topology::kNvmlPcieUtilTxBytes, topology::kNvmlPcieUtilRxBytes};
    const char* direction[2] = {"tx", "rx"};
    for (int i = 0; i < 2; ++i) {
      if (n.DeviceGetPcieThroughput(dev, counters[i], &value) == kNvmlSuccess) {
        s.Get(s.pcie[i], *s.pcie_family, "direction", direction[i]).Set(value * 1024.0);
      }
    }
  }
  if (s.events) {
    topology::nvmlEventData_t event{};
    // Drain what is pending without waiting (timeout 0), a bounded number per sample.
    for (int i = 0; i < 64 && n.EventSetWait(s.events, &event, 0) == kNvmlSuccess; ++i) {
      if (!(event.eventType & topology::kNvmlEventTypeXidCriticalError)) continue;
      s.Get(s.xid, *s.xid_family).Increment();
      s.Get(s.last_xid, *s.last_xid_family).Set(static_cast<double>(event.eventData));
    }
  }
  if (n.DeviceGetTotalEccErrors) {
    const int types[2] = {topology::kNvmlMemoryErrorCorrected,
                          topology::kNvmlMemoryErrorUncorrected};
    const char* names[2] = {"corrected", "uncorrected"};
    for (int i = 0; i < 2; ++i) {
      unsigned long long count = 0;
      if (n.DeviceGetTotalEccErrors(dev, types[i], topology::kNvmlVolatileEcc, &count) ==
          kNvmlSuccess) {
        Series::Mirror(s.Get(s.ecc[i], *s.ecc_family, "type", names[i]), s.ecc_last[i], count,
                       /*from_zero=*/false, 1.0);
      }
    }
  }
}

}  // namespace ringpilot::metrics
