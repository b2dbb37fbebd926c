#include "trainer/run_plan.h"

#include <string>

#include "trainer/options.h"

namespace ringpilot::trainer {

RunPlan MakeRunPlan(const config::JobConfig& job, const input::Dataset& dataset) {
  const config::TrainConfig& train = job.train;
  RunPlan plan;
  plan.data = dataset.count();
  if (plan.data.samples >= 0) {
    const data::ImageSource* images = dataset.images();
    plan.data_line = input::DataCountLine(plan.data) + (images ? "; " + images->Summary() : "");
  }
  plan.steps_per_epoch = dataset.steps_per_epoch();
  plan.tokens = dataset.token_spec();
  plan.steps = train.steps;
  if (train.epochs > 0) {
    // Batches of world x data.batch_per_rank; an optimizer step takes grad_accum_steps.
    plan.steps = train.epochs * plan.steps_per_epoch / train.grad_accum_steps;
    plan.epochs_line = "train.epochs " + std::to_string(train.epochs) + ": " +
                       std::to_string(plan.steps_per_epoch) + " batches per epoch, " +
                       std::to_string(plan.steps) + " steps";
    if (train.lr_warmup_epochs > 0 && plan.steps > 1) {
      plan.epochs_line += ", warm-up " + std::to_string(WarmupSteps(train, plan.steps)) + " steps";
    }
  }
  plan.batches = plan.steps * train.grad_accum_steps;
  plan.warmup_steps = WarmupSteps(train, plan.steps);
  return plan;
}

void CheckRunPlan(const config::JobConfig& job, const RunPlan& plan) {
  const config::TrainConfig& train = job.train;
  if (train.epochs > 0 && (plan.steps < 1 || plan.warmup_steps >= plan.steps)) {
    // The job itself cannot work: a permanent failure (no restart).
    throw config::ConfigError(job.source + ": train.epochs " + std::to_string(train.epochs) +
                              " makes " + std::to_string(plan.steps) + " optimizer step(s), " +
                              (plan.steps < 1 ? "none" : "no more than the learning-rate warm-up") +
                              " (train.grad_accum_steps " + std::to_string(train.grad_accum_steps) +
                              ")");
  }
}

}  // namespace ringpilot::trainer
