// What the data decides about a run, worked out once at a rank's start from the job (which
// stays as loaded) and its training data: how many optimizer steps the run takes, how many
// batches an epoch has, the vocabulary, what data.train holds. The loop and every
// component read the plan, never the job's train.steps or model.vocab_size for these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/job.h"
#include "trainer/input/dataset.h"
#include "trainer/models/model.h"

namespace ringpilot::trainer {

struct RunPlan {
  /// What data.train holds (samples -1: synthetic).
  input::DataCount data;
  /// Rank 0's line about data.train ("data.train: N samples in K files; <image set>"); ""
  /// for synthetic.
  std::string data_line;
  /// Full global batches in one epoch of data.train; 0 for synthetic (no epochs).
  int64_t steps_per_epoch = 0;
  /// Optimizer steps of the run: train.epochs x steps_per_epoch / train.grad_accum_steps
  /// when train.epochs is set, else train.steps.
  int64_t steps = 0;
  /// Input batches of the run: steps x train.grad_accum_steps.
  int64_t batches = 0;
  /// The learning-rate warm-up in optimizer steps (WarmupSteps of `steps`).
  int64_t warmup_steps = 0;
  /// Token models: the run's ids, `vocab` resolved (model.vocab_size, 0: the shards' or
  /// synthetic data's); image models: nullopt.
  std::optional<models::TokenSpec> tokens;
  /// train.epochs: rank 0's line on the steps it makes ("train.epochs E: B batches per
  /// epoch, S steps[, warm-up W steps]"); "" with train.steps.
  std::string epochs_line;
};

/// The plan of `job` on `dataset` (input::OpenDataset of the job's data.train).
RunPlan MakeRunPlan(const config::JobConfig& job, const input::Dataset& dataset);

/// Throws config::ConfigError naming the job file when train.epochs makes no optimizer
/// step, or no more than the learning-rate warm-up: the job itself cannot work (a
/// permanent failure: no restart helps). After rank 0 logged `epochs_line`.
void CheckRunPlan(const config::JobConfig& job, const RunPlan& plan);

}  // namespace ringpilot::trainer
