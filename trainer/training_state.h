// Everything a rank trains and checkpoints: the model, its parameters, the optimizer, the
// per-rank RNG state, and the named tensors a checkpoint holds; built from the job and
// resumed from the newest valid checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/TensorBody.h>
#include <c10/core/Device.h>

#include "comm/communicator.h"
#include "config/job.h"
#include "trainer/checkpoint/rng_state.h"
#include "trainer/checkpoint/store.h"
#include "trainer/models/model.h"
#include "trainer/optimizer.h"
#include "trainer/rank_setup.h"
#include "trainer/run_plan.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer {

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

/// The model (seeded with train.seed on every rank; BERT's vocabulary from `plan`), on
/// `device`, in train mode, its optimizer (its schedule over plan.steps) and RNG state.
/// `batch_norm_comm` reduces SyncBatchNorm statistics and must outlive the state.
TrainingState BuildTrainingState(const config::JobConfig& job, const RunPlan& plan,
                                 const RankPlace& place, const RankDevice& device,
                                 comm::Communicator* batch_norm_comm);

/// Collective: rank 0 loads the newest valid checkpoint in `store` (warnings for the
/// invalid ones it skips go to `log`), every rank receives rank 0's tensors, RNG state and
/// data position, and the optimizer's step count is restored. Returns the step to start from (0
/// without a checkpoint). Throws std::runtime_error for a checkpoint beyond plan.steps.
int64_t ResumeFromCheckpoint(const config::JobConfig& job, const RunPlan& plan,
                             const RankPlace& place, const RankCommunicators& comms,
                             checkpoint::CheckpointStore& store, TrainingState& state,
                             telemetry::RankLog& log);

}  // namespace ringpilot::trainer
