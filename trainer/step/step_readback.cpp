#include "trainer/step/step_readback.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "trainer/step/step_clock.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace ringpilot::trainer::step {

StepReadback::StepReadback(bool cuda, int lead)
    : cuda_(cuda), lead_(std::clamp(lead, 1, StepClock::kMaxLead)) {
#ifdef RINGPILOT_WITH_CUDA
  if (cuda_) {
    for (int i = 0; i <= lead_; ++i) {
      cudaEvent_t e;
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      events_.push_back(e);
    }
    steps_.assign(static_cast<size_t>(lead_) + 1, 0);
  }
#endif
}

StepReadback::~StepReadback() {
#ifdef RINGPILOT_WITH_CUDA
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

void StepReadback::Record(int64_t step, const at::Tensor& loss, const at::Tensor& grad_norm) {
  if (!loss.defined()) return;
  if (!cuda_ || !loss.is_cuda()) {
    Values v;
    v.step = step;
    v.loss = loss.item<double>();
    if (grad_norm.defined()) v.grad_norm = grad_norm.item<double>();
    cpu_ = v;
    return;
  }
#ifdef RINGPILOT_WITH_CUDA
  const int slots = lead_ + 1;
  if (loss_host_.empty()) {
    for (int i = 0; i < slots; ++i) {
      loss_host_.push_back(
          at::empty(loss.sizes(), loss.options().device(at::kCPU).pinned_memory(true)));
      if (grad_norm.defined()) {
        norm_host_.push_back(
            at::empty(grad_norm.sizes(), grad_norm.options().device(at::kCPU).pinned_memory(true)));
      }
    }
  }
  // Behind the step's work on the training stream: the copies read what the step (or its
  // graph replay) wrote.
  loss_host_[cur_].copy_(loss, /*non_blocking=*/true);
  if (grad_norm.defined() && !norm_host_.empty()) {
    norm_host_[cur_].copy_(grad_norm, /*non_blocking=*/true);
  }
  cudaEventRecord(static_cast<cudaEvent_t>(events_[cur_]),
                  c10::cuda::getCurrentCUDAStream().stream());
  steps_[cur_] = step;
  cur_ = (cur_ + 1) % slots;
  recorded_ = std::min(recorded_ + 1, slots);
#else
  (void)grad_norm;
#endif
}

std::optional<StepReadback::Values> StepReadback::Take() {
  if (!cuda_) return cpu_;
#ifdef RINGPILOT_WITH_CUDA
  // The slot `lead` records back is the one the next Record overwrites.
  if (recorded_ <= lead_) return std::nullopt;
  cudaEventSynchronize(static_cast<cudaEvent_t>(events_[cur_]));
  Values v;
  v.step = steps_[cur_];
  v.loss = loss_host_[cur_].item<double>();
  if (!norm_host_.empty()) v.grad_norm = norm_host_[cur_].item<double>();
  return v;
#else
  return cpu_;
#endif
}

}  // namespace ringpilot::trainer::step
