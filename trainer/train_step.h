// One training step on the device batch: forward (under autocast for bf16), backward with
// the gradient hooks issuing bucket all-reduces, then reduce-and-update. Host-sync free,
// so it can be captured into a CUDA graph and replayed.
#pragma once

#include <optional>

#include <ATen/core/TensorBody.h>

#include "comm/gradient_reducer.h"
#include "config/job.h"
#include "trainer/gradient_update.h"
#include "trainer/input_feed.h"
#include "trainer/ops/backward_sm_carveout.h"
#include "trainer/rank_setup.h"
#include "trainer/step_phases.h"
#include "trainer/training_state.h"

namespace ringpilot::trainer {

/// Holds references to everything it uses; all must outlive it. Not thread-safe.
class TrainStep {
 public:
  TrainStep(const config::JobConfig& job, const RankPlace& place, const RankDevice& device,
            TrainingState& state, comm::GradientReducer& reducer, StepPhases& phases,
            const InputFeed& input);

  /// Runs (or, inside GraphedStep::Capture, records) one step. The loss lands in loss().
  void Run();

  /// The last step's loss, on the device (a stable tensor: graph replays write into it);
  /// undefined before the first Run().
  const at::Tensor& loss() const { return loss_; }

 private:
  TrainingState& state_;
  comm::GradientReducer& reducer_;
  StepPhases& phases_;
  const InputFeed& input_;
  const bool cuda_;
  const c10::DeviceType device_type_;
  const std::optional<c10::ScalarType> autocast_;
  const GradientUpdateOptions update_options_;
  const ops::BackwardSmCarveout carveout_;
  /// fault.straggler_*: extra compute seconds on this rank (0 elsewhere).
  const double straggle_s_;
  at::Tensor loss_;
};

}  // namespace ringpilot::trainer
