#include "trainer/telemetry/device.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>
#endif

namespace ringpilot::trainer::telemetry {

void SynchronizeDevice(bool cuda) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda) cudaDeviceSynchronize();
#endif
  (void)cuda;
}

double PeakDeviceMemoryBytes(bool cuda) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
    return static_cast<double>(
        stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
            .peak);
  }
#endif
  (void)cuda;
  return 0.0;
}

}  // namespace ringpilot::trainer::telemetry
