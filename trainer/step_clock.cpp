#include "trainer/step_clock.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace ringpilot::trainer {

StepClock::StepClock(bool cuda) : cuda_(cuda) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    for (auto& pair : events_) {
      for (auto& e : pair) {
        cudaEvent_t ev;
        cudaEventCreate(&ev);
        e = ev;
      }
    }
  }
#else
  cuda_ = false;
#endif
}

StepClock::~StepClock() {
#ifdef RINGPILOT_WITH_CUDA
  for (auto& pair : events_) {
    for (auto& e : pair) {
      if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
    }
  }
#endif
}

void StepClock::Begin() {
  begin_ = std::chrono::steady_clock::now();
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    cudaEventRecord(static_cast<cudaEvent_t>(events_[cur_][0]),
                    c10::cuda::getCurrentCUDAStream().stream());
  }
#endif
}

double StepClock::End() {
  const double host =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    cudaEventRecord(static_cast<cudaEvent_t>(events_[cur_][1]),
                    c10::cuda::getCurrentCUDAStream().stream());
    const int prev = 1 - cur_;
    double result = host;
    if (have_prev_) {
      auto start = static_cast<cudaEvent_t>(events_[prev][0]);
      auto end = static_cast<cudaEvent_t>(events_[prev][1]);
      cudaEventSynchronize(end);
      float ms = 0.f;
      cudaEventElapsedTime(&ms, start, end);
      result = ms / 1e3;
    }
    have_prev_ = true;
    cur_ = prev;
    return result;
  }
#endif
  return host;
}

}  // namespace ringpilot::trainer
