// Where each step's time went (data aside: the host generates batches, see trainer.cpp),
// measured where the work runs: host clocks on CPU; on CUDA, GPU timestamps written by the
// step itself (comm/device_timeline.h), so the same markers work in eager steps and
// inside a CUDA graph replay, and are read one step late without a host synchronisation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"

namespace ringpilot::trainer::step {

/// One finished step's phases. Times are Unix seconds on this host's clock.
struct StepPhaseTimes {
  double start_unix = 0;
  double forward = 0;   ///< seconds
  double backward = 0;  ///< seconds, including fault.straggler_* slow-down
  /// Waiting for the gradient all-reduces still running after backward (with an early
  /// optimizer update, the wait for the last buckets after it).
  double comm_exposed = 0;
  double optimizer = 0;  ///< both parts of a split optimizer update
  /// When this rank arrived at the step's synchronisation, for straggler attribution.
  /// CPU: end of backward. CUDA: when its first gradient bucket was ready (later GPU
  /// times are distorted: the other ranks' NCCL kernels, waiting for a straggler,
  /// occupy SMs and slow their remaining backward); end of backward without buckets.
  double ready_unix = 0;
  bool valid = true;            ///< false: the GPU row was lost (phases unknown)
  bool replay = false;          ///< a CUDA graph replay (its collectives are in `marks`)
  std::vector<uint64_t> marks;  ///< the timeline row (CUDA only)
};

/// Markers are called in this order from the step body, on the training thread, and
/// are capturable (CUDA): Begin, ForwardDone, [FirstGradientsReady, from the reducer's
/// hook thread], BackwardDone, [EarlyUpdateDone], CommDone, OptimizerDone.
/// EarlyUpdateDone ends the optimizer update of the buckets reduced by then (the last
/// buckets are still on the wire); without it the update counts as one piece after CommDone.
/// Not thread-safe.
class StepPhases {
 public:
  /// `device` < 0: CPU (host clocks). Otherwise a GPU timeline on that device, whose
  /// marks `comm` also uses for collectives captured in CUDA graphs (may be null).
  StepPhases(int device, comm::Communicator* comm);
  ~StepPhases();
  StepPhases(const StepPhases&) = delete;
  StepPhases& operator=(const StepPhases&) = delete;

  void Begin();
  void ForwardDone();
  /// Makes this rank's compute `seconds` slower (fault.straggler_ms): a host sleep on
  /// CPU, a spinning kernel on the GPU (so it also happens inside graph replays).
  void SlowDown(double seconds);
  /// The first gradient bucket is about to be all-reduced (ReducerOptions::on_first_launch).
  void FirstGradientsReady();
  void BackwardDone();
  void EarlyUpdateDone();
  void CommDone();
  void OptimizerDone();

  /// The step body ran (eagerly, or as a graph replay), as opposed to being captured.
  void Launched(bool replay);
  /// The oldest launched step not yet collected, if finished: on CPU the step just run;
  /// on CUDA the one before the last launched (complete once StepClock::End returned),
  /// or also the last one when `device_idle` (after a device synchronisation).
  std::optional<StepPhaseTimes> Collect(bool device_idle);

 private:
  struct Gpu;
  void Stamp(int marker);
  std::unique_ptr<Gpu> gpu_;                // null on CPU
  comm::Communicator* comm_ = nullptr;      // stamps its captured collectives on gpu_
  double host_[7] = {0, 0, 0, 0, 0, 0, 0};  // CPU marker times (Unix seconds)
  uint64_t launched_ = 0, collected_ = 0;
  std::vector<bool> replays_;  // per launched step not yet collected
};

}  // namespace ringpilot::trainer::step
