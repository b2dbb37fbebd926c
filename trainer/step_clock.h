// Step timing without a host synchronisation on the current step: wall time on the
// CPU; on CUDA, events around the step, read one step late.
#pragma once

#include <chrono>

namespace ringpilot::trainer {

class StepClock {
 public:
  explicit StepClock(bool cuda);
  ~StepClock();
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;

  void Begin();
  /// Host time of the last Begin().
  std::chrono::steady_clock::time_point begin_time() const { return begin_; }
  /// CPU: seconds since Begin(). CUDA: GPU seconds of the previous step (waiting for
  /// it if needed, which bounds how far the host runs ahead to one step); the first
  /// call returns the host time of the first step.
  double End();

 private:
  bool cuda_;
  std::chrono::steady_clock::time_point begin_;
  void* events_[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};  // cudaEvent_t
  int cur_ = 0;
  bool have_prev_ = false;
};

}  // namespace ringpilot::trainer
