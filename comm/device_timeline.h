// GPU-side timestamps for work the host cannot time: the step phases and collectives
// inside a CUDA graph replay (and, for uniformity, eager CUDA steps). One-thread kernels
// write the GPU global timer into pinned, host-mapped memory, into the row of the
// current step (a device-side counter the step's first mark advances), so a graph
// replays them unchanged and the host reads a finished step's row without any extra
// synchronisation: it only waits for what it already waits for (the step-end event).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "comm/device_timeline_kernels.h"

namespace ringpilot::comm {

/// Thread-safety: the stream-ordered calls (BeginStep, Mark, EndStep) are made from the
/// training thread; Read may be called from that thread only. Every call is capturable
/// into a CUDA graph; a captured row repeats on each replay.
class DeviceTimeline {
 public:
  /// Rows kept: the host may read step n until step n + kSlots begins on the GPU.
  static constexpr int kSlots = 8;
  /// Marks per step: mark 0 is the step start (BeginStep), the others are handed out by
  /// AllocateMarks.
  static constexpr int kMaxMarks = 1024;

  /// Allocates on `device` (current) and calibrates the clock. Throws CommError.
  explicit DeviceTimeline(int device);
  ~DeviceTimeline();
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  /// Reserves `n` consecutive mark indices; returns the first, or -1 when full.
  int AllocateMarks(int n);

  /// Starts a new step row and stamps mark 0. Aborts the job if a launch fails.
  void BeginStep(cudaStream_t stream);
  /// Stamps `index` in the current row, when the stream reaches this point.
  void Mark(int index, cudaStream_t stream);
  /// Publishes the row; call after every mark of the step (on a stream that waited for
  /// all streams that marked it).
  void EndStep(cudaStream_t stream);
  /// Holds `seconds` of GPU time on `stream` (fault injection: a slow rank).
  void Spin(double seconds, cudaStream_t stream);

  /// Copies the marks of the `n`th step (1-based count of BeginStep executions on the
  /// GPU) into `marks` (kMaxMarks entries, GPU nanoseconds) if that step was published
  /// and its row not yet reused. Marks not stamped in that step read as 0.
  bool Read(uint64_t n, std::vector<uint64_t>* marks) const;

  /// GPU global timer (ns) to this host's Unix time (seconds), from the calibration.
  double ToUnix(uint64_t gpu_ns) const;
  /// Re-measures the GPU-to-host clock offset (synchronises the device; setup only).
  void Calibrate();

 private:
  int device_ = 0;
  int next_mark_ = 1;
  kernels::TimelineBuffers buffers_;
  unsigned long long* host_block_ = nullptr;  // marks + seqs + calibration word
  double unix_minus_gpu_ = 0;                 // seconds
};

}  // namespace ringpilot::comm
