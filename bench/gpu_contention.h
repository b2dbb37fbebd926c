// A load that runs beside the GPU image pipeline in the same process, to find which resource
// slows nvJPEG's hardware decode beside a training step (issue 33): kernels that fill every
// SM (`sm`), kernels that stream HBM (`hbm`), or host threads that keep cores busy (`cpu`).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ringpilot::bench {

/// Starts `kind` ("none", "sm", "hbm", "cpu:N", "cpu-nice:N": N threads at nice 10) on `device` at
/// construction and stops it at destruction. GPU loads run on their own normal-priority stream from
/// one host thread that keeps a few launches queued, as a training step's host thread does. Throws
/// std::invalid_argument for an unknown kind.
class GpuContention {
 public:
  GpuContention(const std::string& kind, int device);
  ~GpuContention();
  GpuContention(const GpuContention&) = delete;
  GpuContention& operator=(const GpuContention&) = delete;
  /// Launches (GPU kinds) or spins (cpu) done so far.
  long long launches() const { return launches_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<long long> launches_{0};
  std::vector<std::thread> threads_;
};

}  // namespace ringpilot::bench
