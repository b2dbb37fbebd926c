// Opt-in kernel-level profile of a few training steps through PyTorch's own profiler
// (Kineto + CUPTI on CUDA): a Chrome trace per rank with every kernel's GPU time, for
// finding where a step's GPU time goes. Developer facility, driven by environment:
//   RINGPILOT_KINETO_TRACE=PREFIX   writes PREFIX.rank-N.json
//   RINGPILOT_KINETO_STEPS=FIRST:COUNT  (default 10:3; 0-based steps of this attempt)
// Profile with train.cuda_graphs off: kernels inside a graph replay are not traced
// one by one.
//   RINGPILOT_CUDA_PROFILER_STEPS=FIRST:COUNT  cudaProfilerStart before step FIRST and
//       cudaProfilerStop after step FIRST+COUNT-1, for Nsight Compute or Systems started with
//       profiling off (`ncu --profile-from-start off`): per-kernel counters (bytes moved,
//       FLOPs) of exactly those steps (tests/gpu/kernel_table.sh). Independent of Kineto.
#pragma once

#include <cstdint>
#include <string>

namespace ringpilot::trainer::telemetry {

/// Not thread-safe; call from the training thread around each step.
class KernelProfile {
 public:
  /// Reads the environment; inactive when neither variable is set. Throws
  /// std::runtime_error naming the variable when its value is not FIRST:COUNT.
  KernelProfile(int rank, bool cuda);
  bool active() const { return !prefix_.empty(); }
  /// Starts the profiler before step `index` (steps since this attempt began).
  void BeforeStep(int64_t index);
  /// Stops it after the last profiled step and writes the trace; returns its path or "".
  std::string AfterStep(int64_t index);

 private:
  std::string prefix_;
  int rank_ = 0;
  bool cuda_ = false;
  int64_t first_ = 10, count_ = 3;
  bool running_ = false;
  // RINGPILOT_CUDA_PROFILER_STEPS; cuda_first_ < 0 when unset.
  int64_t cuda_first_ = -1, cuda_count_ = 0;
};

}  // namespace ringpilot::trainer::telemetry
