// Samples the rank's own GPU through NVML (topology/nvml_api.h, dlopen'ed) on a background
// thread into `ringpilot_gpu_*` series (docs/metrics.md): utilisation, memory, power,
// temperature, SM clock, clock event (throttle) reasons, NVLink and PCIe traffic, XID
// errors and ECC counts. The training thread never waits for it: NVML calls run on the
// sampler's thread and only write lock-free gauges and counters.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "metrics/families.h"

namespace ringpilot::topology {
struct NvmlApi;
}

namespace ringpilot::metrics {

struct GpuSamplerOptions {
  std::string nvml_library = "libnvidia-ml.so.1";
  /// The GPU to sample, by PCI bus id in any form CUDA or NVML writes it
  /// ("0000:18:00.0", "00000000:18:00.0"); "" means NVML's GPU 0.
  std::string pci_bus_id;
  /// Time between samples; <= 0 starts no thread (the owner calls SampleOnce).
  double period_seconds = 5.0;
};

/// The identity dcgm-exporter labels a GPU with (its labels `UUID`, `pci_bus_id`, `gpu`).
struct GpuIdentity {
  std::string uuid;        ///< "GPU-8f6c..."
  std::string pci_bus_id;  ///< as NVML writes it: "00000000:18:00.0"
  std::string index;       ///< NVML's index of the GPU on its node ("0".."7"); "" unknown
};

/// The series labels of a GPU, named as dcgm-exporter names them so that its series and
/// ours join (`* on (UUID)`): `UUID`, `pci_bus_id`, and `gpu` when the index is known.
Labels GpuLabels(const GpuIdentity& id);

/// Looks up the GPU at `pci_bus_id` ("" = NVML's GPU 0) through `nvml_library`. On failure
/// returns false and sets `*error` to one line naming what failed.
bool LookupGpuIdentity(const std::string& nvml_library, const std::string& pci_bus_id,
                       GpuIdentity* identity, std::string* error);

/// The GPU's clocks and what holds them down, read at one moment (GpuSampler::ReadClocks).
/// A reading NVML does not give on this GPU is absent.
struct GpuClockReading {
  /// Time the clocks were held by the power limit, and by the thermal limit, since the driver
  /// loaded (nvmlDeviceGetViolationStatus): two readings' difference is the time in between.
  std::optional<double> power_limited_seconds, thermal_limited_seconds;
  /// The background thread's SM clock samples so far (one per sample period): how many and
  /// their sum. Two readings' difference gives the mean clock of the samples in between; a
  /// reading of the clock "now" would not do, as the window's ends are not training moments
  /// (its end follows the run's last device sync).
  uint64_t sm_clock_samples = 0;
  double sm_clock_mhz_sum = 0;
  std::optional<double> sm_clock_max_mhz;  ///< the GPU's maximum SM clock
  /// Board energy since the driver loaded (nvmlDeviceGetTotalEnergyConsumption): two
  /// readings' difference over the time between them is the mean power in between.
  std::optional<double> energy_joules;
  std::optional<double> power_limit_watts;  ///< the enforced power limit
};

class GpuSampler {
 public:
  /// Loads NVML, finds the GPU, takes a first sample and starts the thread. When NVML or
  /// the GPU is missing it registers no series, starts nothing, and warning() says why;
  /// it never throws for that. Series carry the GpuLabels of the GPU unless the families'
  /// constant labels already have them. A reading NVML does not support on this
  /// GPU gets no series. `families` must outlive the sampler.
  GpuSampler(Families& families, GpuSamplerOptions options);
  /// Stops the thread (waits at most for one NVML sample).
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  /// NVML loaded and the GPU found.
  bool active() const { return active_; }
  /// Why the sampler is inactive ("" when active).
  const std::string& warning() const { return warning_; }
  const GpuIdentity& identity() const { return identity_; }

  /// Reads every value once. Thread-safe (serialised with the background thread).
  void SampleOnce();

  /// Reads the clocks' counters and limits now, on the caller's thread: five NVML calls,
  /// serialised with the background thread (so it may wait for one sample). Not for every
  /// step. All absent when the sampler is inactive.
  GpuClockReading ReadClocks();

 private:
  struct Series;
  void Run();

  Families& families_;
  GpuSamplerOptions options_;
  std::unique_ptr<topology::NvmlApi> nvml_;
  bool active_ = false;
  std::string warning_;
  GpuIdentity identity_;
  std::unique_ptr<Series> series_;
  std::mutex sample_mu_;
  uint64_t sm_clock_samples_ = 0;  // SampleOnce's SM clock readings (under sample_mu_)
  double sm_clock_mhz_sum_ = 0;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ringpilot::metrics
