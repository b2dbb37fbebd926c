#include "trainer/step/step_clock.h"

#include <algorithm>

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace ringpilot::trainer::step {

StepClock::StepClock(bool cuda, int lead) : cuda_(cuda), lead_(std::clamp(lead, 1, kMaxLead)) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    for (int i = 0; i < lead_ + 2; ++i) {
      cudaEvent_t begin, end, launched;
      cudaEventCreate(&begin);
      cudaEventCreate(&end);
      cudaEventCreate(&launched);
      begin_events_.push_back(begin);
      end_events_.push_back(end);
      launched_events_.push_back(launched);
    }
    gap_excluded_.assign(begin_events_.size(), false);
    launched_.assign(begin_events_.size(), false);
  }
#else
  cuda_ = false;
#endif
}

StepClock::~StepClock() {
#ifdef RINGPILOT_WITH_CUDA
  for (void* e : begin_events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  for (void* e : end_events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  for (void* e : launched_events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

void StepClock::Begin() {
  begin_ = std::chrono::steady_clock::now();
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    gap_excluded_[cur_] = exclude_next_gap_;
    exclude_next_gap_ = false;
    launched_[cur_] = false;
    cudaEventRecord(static_cast<cudaEvent_t>(begin_events_[cur_]),
                    c10::cuda::getCurrentCUDAStream().stream());
  }
#endif
}

void StepClock::Launched() {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    cudaEventRecord(static_cast<cudaEvent_t>(launched_events_[cur_]),
                    c10::cuda::getCurrentCUDAStream().stream());
    launched_[cur_] = true;
  }
#endif
}

double StepClock::End() {
  const double host =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
  idle_before_.reset();
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    cudaEventRecord(static_cast<cudaEvent_t>(end_events_[cur_]),
                    c10::cuda::getCurrentCUDAStream().stream());
    const int slots = lead_ + 2;
    // The step `lead` back, and the one before it (the slot the next step overwrites).
    const int back = (cur_ + slots - lead_) % slots;
    const int before = (back + slots - 1) % slots;
    double result = host;
    if (ended_ >= lead_) {
      auto start = static_cast<cudaEvent_t>(begin_events_[back]);
      auto end = static_cast<cudaEvent_t>(end_events_[back]);
      cudaEventSynchronize(end);
      float ms = 0.f;
      cudaEventElapsedTime(&ms, start, end);
      result = ms / 1e3;
      if (ended_ >= lead_ + 1 && !gap_excluded_[back] && launched_[before]) {
        // Both done: `end` follows them on the stream. The step before's end event would
        // not do: it is recorded after the host's wait for the next batch, so the GPU
        // reaches it no earlier than that.
        float gap_ms = 0.f;
        if (cudaEventElapsedTime(&gap_ms, static_cast<cudaEvent_t>(launched_events_[before]),
                                 start) == cudaSuccess) {
          idle_before_ = std::max(0.f, gap_ms) / 1e3;
        }
      }
    }
    ++ended_;
    cur_ = (cur_ + 1) % slots;
    return result;
  }
#endif
  return host;
}

}  // namespace ringpilot::trainer::step
