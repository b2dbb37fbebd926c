// Everything a rank trains and checkpoints: the model, its parameters, the optimizer, the
// per-rank RNG state, and the named tensors a checkpoint holds; built from its options
// (trainer/options.cpp TrainingStateOptionsFor) and resumed from the newest valid checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/TensorBody.h>
#include <c10/core/Device.h>

#include "comm/communicator.h"
#include "trainer/checkpoint/rng_state.h"
#include "trainer/checkpoint/store.h"
#include "trainer/models/model.h"
#include "trainer/startup/rank_setup.h"
#include "trainer/step/optimizer.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer::step {

struct TrainingState {
  std::shared_ptr<models::Model> model;
  std::vector<at::Tensor> params;
  /// ResNet weights and inputs in channels_last (train.channels_last, image models).
  bool channels_last = false;
  std::unique_ptr<FusedOptimizer> optimizer;
  /// Per-rank generator states (dropout), gathered to rank 0 for checkpoints.
  std::unique_ptr<checkpoint::RankRngState> rng;
  /// What a checkpoint holds: model/..., optimizer/..., rng/... entries.
  std::vector<checkpoint::NamedTensor> named;
  /// The model and optimizer tensors, in `named` order, that rank 0 broadcasts at start.
  std::vector<at::Tensor> broadcast;
  /// int64 [epoch, offset] where the step after a checkpoint starts in the dataset
  /// (data/sampler.h), entry "data/position"; [-1, -1] from a checkpoint without it.
  at::Tensor data_position;
};

/// What BuildTrainingState makes (trainer/options.cpp TrainingStateOptionsFor).
struct TrainingStateOptions {
  models::ModelOptions model;  ///< model.*; BERT's vocabulary as the run plan resolved it
  OptimizerOptions optimizer;  ///< train.optimizer, its schedule over the run's steps
  uint64_t seed = 0;           ///< train.seed: weights (every rank) and per-rank RNG streams
  /// train.channels_last: image models' weights (and inputs) in channels_last.
  bool channels_last = false;
};

/// The model (seeded with options.seed on every rank), on `device`, in train mode, its
/// optimizer and RNG state. `batch_norm_comm` reduces SyncBatchNorm statistics and must
/// outlive the state.
TrainingState BuildTrainingState(const TrainingStateOptions& options,
                                 const startup::RankPlace& place, const startup::RankDevice& device,
                                 comm::Communicator* batch_norm_comm);

/// Collective: rank 0 loads the newest valid checkpoint in `store` (warnings for the
/// invalid ones it skips go to `log`), every rank receives rank 0's tensors, RNG state and
/// data position, and the optimizer's step count is restored. Returns the step to start from (0
/// without a checkpoint). `seed` is train.seed (per-rank streams restart from it when the
/// checkpoint was written by another number of ranks). Throws
/// checkpoint::CheckpointMismatchError for a checkpoint beyond `steps`, the run's
/// optimizer steps (RunPlan::steps).
int64_t ResumeFromCheckpoint(uint64_t seed, int64_t steps, const startup::RankPlace& place,
                             const startup::RankCommunicators& comms,
                             checkpoint::CheckpointStore& store, TrainingState& state,
                             telemetry::RankLog& log);

}  // namespace ringpilot::trainer::step
