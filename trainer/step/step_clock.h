// Step timing without a host synchronisation on the current step: wall time on the
// CPU; on CUDA, events around the step, read `lead` steps late.
#pragma once

#include <chrono>
#include <optional>
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
  /// The step's GPU work is queued (before the host goes on to wait for the next batch):
  /// marks where the GPU is done with the step, for idle_before_step(). A step without it
  /// (gradient accumulation waits for input between its micro-batches) gets no idle time.
  void Launched();
  /// Host time of the last Begin().
  std::chrono::steady_clock::time_point begin_time() const { return begin_; }
  /// CPU: seconds since Begin(). CUDA: GPU seconds of the step `lead` steps back (waiting
  /// for it if needed, which bounds how far the host runs ahead to `lead` steps); until
  /// such a step exists, the host time of the current step.
  double End();
  /// CUDA: how long the GPU sat idle before the step End() just timed, from the end of the
  /// step before's work (its Launched() event) to this step's Begin() event: the time the
  /// host took to queue it beyond what the GPU had left (input, launch, host syncs). The
  /// step's own time (Begin to End) includes such a wait when the host waits before End;
  /// this says how much of it the GPU spent idle. None on the CPU, for the first steps,
  /// after a step without Launched(), and after a gap ExcludeNextGap() marked.
  std::optional<double> idle_before_step() const { return idle_before_; }
  /// The gap before the next Begin() is not the host being late (a checkpoint or an
  /// evaluation in between): its step gets no idle_before_step().
  void ExcludeNextGap() { exclude_next_gap_ = true; }

 private:
  bool cuda_;
  int lead_;
  std::chrono::steady_clock::time_point begin_;
  // cudaEvent_t, a ring of lead + 2 steps: the step `lead` back and the one before it.
  std::vector<void*> begin_events_, end_events_, launched_events_;
  std::vector<bool> gap_excluded_;  // per slot: the gap before that step is not idling
  std::vector<bool> launched_;      // per slot: Launched() was called for that step
  int cur_ = 0;
  long long ended_ = 0;  // End() calls so far
  bool exclude_next_gap_ = false;
  std::optional<double> idle_before_;
};

}  // namespace ringpilot::trainer::step
