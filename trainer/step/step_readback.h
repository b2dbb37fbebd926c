// Every step's loss (and pre-clip gradient norm) on the host for the metrics, without a
// host synchronisation per step: on CUDA each step's values are copied into pinned host
// memory behind the step's work and read `lead` steps later, when StepClock has already
// waited for that step; on the CPU they are read at once.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ringpilot::trainer::step {

/// Not thread-safe: the training loop's thread only.
class StepReadback {
 public:
  struct Values {
    int64_t step = 0;  ///< the step the values belong to (0-based)
    double loss = 0;
    std::optional<double> grad_norm;  ///< with train.max_grad_norm only
  };

  /// `lead` in [1, StepClock::kMaxLead]: train.host_lead_steps.
  StepReadback(bool cuda, int lead);
  ~StepReadback();
  StepReadback(const StepReadback&) = delete;
  StepReadback& operator=(const StepReadback&) = delete;

  /// After step `step`'s work is queued: queues the copy of its `loss` (a device scalar)
  /// and `grad_norm` (undefined without clipping) on the current stream. The first call
  /// allocates the pinned slots; later ones allocate nothing. CPU: reads them now.
  void Record(int64_t step, const at::Tensor& loss, const at::Tensor& grad_norm);
  /// The values of the step `lead` Record() calls back (CPU: the last one), waiting for its
  /// copy if it is not done; nullopt until that many steps were recorded.
  std::optional<Values> Take();

 private:
  const bool cuda_;
  const int lead_;
  std::vector<at::Tensor> loss_host_, norm_host_;  // pinned, one per slot (lead + 1)
  std::vector<void*> events_;                      // cudaEvent_t per slot
  std::vector<int64_t> steps_;
  int cur_ = 0;
  int recorded_ = 0;  // up to lead + 1
  std::optional<Values> cpu_;
};

}  // namespace ringpilot::trainer::step
