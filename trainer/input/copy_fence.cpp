#include "trainer/input/copy_fence.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace ringpilot::trainer::input {

#ifdef RINGPILOT_WITH_CUDA
CopyFence::CopyFence(bool cuda) : cuda_(cuda) {
  if (!cuda_) return;
  for (auto& e : events_) {
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    e = ev;
  }
}
CopyFence::~CopyFence() {
  for (auto& e : events_) {
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }
}
void CopyFence::Record(int slot) {
  if (cuda_) {
    cudaEventRecord(static_cast<cudaEvent_t>(events_[slot]),
                    c10::cuda::getCurrentCUDAStream().stream());
  }
}
void CopyFence::Wait(int slot) {
  if (cuda_) cudaEventSynchronize(static_cast<cudaEvent_t>(events_[slot]));
}
#else
CopyFence::CopyFence(bool) : cuda_(false) {}
CopyFence::~CopyFence() = default;
void CopyFence::Record(int) {}
void CopyFence::Wait(int) {}
#endif

}  // namespace ringpilot::trainer::input
