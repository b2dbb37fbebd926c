// The held-out sets of evaluation (trainer/evaluation.h ValidationSet): CIFAR batches in
// memory, and image folders or shards decoded on host threads with the evaluation crop
// (resize to out / 0.875, centre crop) at the model's image size.
#pragma once

#include <memory>

#include "config/job.h"
#include "trainer/evaluation.h"
#include "trainer/models/model.h"
#include "trainer/rank_setup.h"

namespace ringpilot::trainer {

/// data.val as a set, or null when the job has none. Throws data::DataError naming a bad
/// file (before the first step).
std::unique_ptr<ValidationSet> LoadValidationSet(const config::JobConfig& job,
                                                 const models::Model& model,
                                                 const RankDevice& device);

}  // namespace ringpilot::trainer
