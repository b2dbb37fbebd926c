// One training step on the device batch: forward (under autocast for bf16), backward with
// the gradient hooks issuing bucket all-reduces, then reduce-and-update. Host-sync free,
// so it can be captured into a CUDA graph and replayed.
#pragma once

#include <optional>

#include <ATen/core/TensorBody.h>
#include <c10/core/ScalarType.h>

#include "comm/gradient_reducer.h"
#include "trainer/input/input_feed.h"
#include "trainer/models/model.h"
#include "trainer/ops/backward_sm_carveout.h"
#include "trainer/startup/rank_setup.h"
#include "trainer/step/gradient_clipping.h"
#include "trainer/step/gradient_update.h"
#include "trainer/step/step_phases.h"
#include "trainer/step/training_state.h"

namespace ringpilot::trainer::step {

/// What the step reads of the job (trainer/options.cpp TrainStepOptionsFor).
struct TrainStepOptions {
  /// The autocast dtype of train.precision as it applies on the rank's device; none: fp32.
  std::optional<c10::ScalarType> autocast;
  GradientUpdateOptions update;
  int backward_sm_carveout = 0;  ///< SMs backward's GEMMs leave to NCCL (CUDA; 0 = none)
  double straggle_s = 0;         ///< fault.straggler_*: extra compute seconds on this rank
  int grad_accum_steps = 1;      ///< micro-batches per optimizer step (at least 1)
  double max_grad_norm = 0;      ///< > 0: clip the global gradient L2 norm to it
  /// Once the model's low-precision weight copies exist (its first forward under
  /// autocast), the optimizer writes them with each update instead of the model
  /// refreshing them every forward (models::Model::HandOverLowPrecisionCopies).
  bool optimizer_writes_copies = false;
};

/// Holds references to everything it uses; all must outlive it. Not thread-safe.
class TrainStep {
 public:
  /// `tokens`: token models' ids (RunPlan::tokens), which the step masks token shards'
  /// batches with; nullopt for image models.
  TrainStep(const TrainStepOptions& options, const startup::RankDevice& device,
            TrainingState& state, comm::GradientReducer& reducer, StepPhases& phases,
            const input::InputFeed& input, const std::optional<models::TokenSpec>& tokens);

  /// Runs (or, inside GraphedStep::Capture, records) one step on one batch
  /// (train.grad_accum_steps 1). The loss lands in loss().
  void Run();

  /// train.grad_accum_steps k > 1, per optimizer step: BeginAccumulation() (eager: zeroes
  /// the gradients and the loss, starts the step's phases), then one call per micro-batch,
  /// each after its batch was copied in: RunMicroBatch() k - 1 times (forward and backward
  /// of loss / k, gradients add up, no communication) and RunLastMicroBatch() (the same,
  /// with the reducer's hooks armed, then reduce-and-update). Each of the two may be
  /// recorded once in its own CUDA graph and replayed; loss() is the micro-batches' mean.
  void BeginAccumulation();
  void RunMicroBatch();
  void RunLastMicroBatch();

  /// The last step's loss, on the device (a stable tensor: graph replays write into it);
  /// undefined before the first Run() or BeginAccumulation().
  const at::Tensor& loss() const { return loss_; }
  /// train.max_grad_norm > 0: the last step's gradient norm before clipping (a device
  /// scalar written in place); undefined otherwise.
  at::Tensor grad_norm() const { return clipper_ ? clipper_->norm() : at::Tensor(); }

 private:
  TrainingState& state_;
  comm::GradientReducer& reducer_;
  StepPhases& phases_;
  const input::InputFeed& input_;
  const std::optional<models::TokenSpec> tokens_;
  const bool cuda_;
  const c10::DeviceType device_type_;
  const std::optional<c10::ScalarType> autocast_;
  const GradientUpdateOptions update_options_;
  const ops::BackwardSmCarveout carveout_;
  /// fault.straggler_*: extra compute seconds on this rank (0 elsewhere).
  const double straggle_s_;
  /// 1 / train.grad_accum_steps: each micro-batch's share of the step's gradient.
  const double micro_scale_;
  std::optional<GradientClipper> clipper_;
  const bool optimizer_writes_copies_;
  bool copies_handed_over_ = false;
  at::Tensor loss_;

  // Forward and backward of one batch (of loss x `scale` when scale != 1); returns the
  // scaled loss, detached.
  at::Tensor ForwardBackward(double scale);
};

}  // namespace ringpilot::trainer::step
