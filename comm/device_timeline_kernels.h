// Kernels behind comm::DeviceTimeline (comm/device_timeline.h): plain launch functions
// on raw pointers, compiled by nvcc without LibTorch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ringpilot::comm::kernels {

/// Layout of the host-mapped buffer the kernels write: `slots` rows of `stride` marks
/// (GPU global timer, nanoseconds), then `slots` sequence words (the step counter value
/// whose marks a row holds, written last).
struct TimelineBuffers {
  unsigned long long* counter = nullptr;  ///< device memory: steps begun so far
  unsigned long long* marks = nullptr;    ///< host-mapped: [slots][stride]
  unsigned long long* seqs = nullptr;     ///< host-mapped: [slots]
  int slots = 0;
  int stride = 0;
};

/// Advances the step counter and stamps mark 0 of the new step's row.
cudaError_t LaunchTimelineBegin(const TimelineBuffers& b, cudaStream_t stream);
/// Stamps mark `index` of the current step's row.
cudaError_t LaunchTimelineMark(const TimelineBuffers& b, int index, cudaStream_t stream);
/// Publishes the current step's row: its sequence word is written after its marks.
cudaError_t LaunchTimelineEnd(const TimelineBuffers& b, cudaStream_t stream);
/// Writes the global timer to `out` (host-mapped), for clock calibration.
cudaError_t LaunchReadGlobalTimer(unsigned long long* out, cudaStream_t stream);
/// Occupies one thread for `nanoseconds` of GPU time (fault.straggler_* on GPUs).
cudaError_t LaunchSpin(unsigned long long nanoseconds, cudaStream_t stream);

}  // namespace ringpilot::comm::kernels
