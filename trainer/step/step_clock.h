// Step timing without a host synchronisation on the current step: wall time on the
// CPU; on CUDA, events around the step, read `lead` steps late.
#pragma once

#include <chrono>
#include <vector>

namespace ringpilot::trainer::step {

/// Not thread-safe: the training loop's thread only.
class StepClock {
 public:
  /// Most steps the host may enqueue beyond the one the GPU is running (train.host_lead_steps).
  static constexpr int kMaxLead = 4;

  /// `lead` in [1, kMaxLead]: how many steps End() lets the host run ahead of the GPU.
  explicit StepClock(bool cuda, int lead = 1);
  ~StepClock();
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;

  void Begin();
  /// Host time of the last Begin().
  std::chrono::steady_clock::time_point begin_time() const { return begin_; }
  /// CPU: seconds since Begin(). CUDA: GPU seconds of the step `lead` steps back (waiting
  /// for it if needed, which bounds how far the host runs ahead to `lead` steps); until
  /// such a step exists, the host time of the current step.
  double End();

 private:
  bool cuda_;
  int lead_;
  std::chrono::steady_clock::time_point begin_;
  std::vector<void*> begin_events_, end_events_;  // cudaEvent_t, a ring of lead + 1 steps
  int cur_ = 0;
  int recorded_ = 0;  // steps recorded so far, up to lead
};

}  // namespace ringpilot::trainer::step
