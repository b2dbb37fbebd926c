// Evaluation on the validation set (data.val): every rank scores its contiguous part, the
// counts are all-reduced, every rank gets the same result. Image models: top-1, top-5 and
// loss; BERT on token shards: masked-LM accuracy and loss over positions masked with a
// fixed key (kEvalMaskSeed), the same in every evaluation of every run.
#pragma once

#include <cstdint>
#include <optional>

#include <c10/core/ScalarType.h>

#include "trainer/input/validation_set.h"
#include "trainer/models/model.h"
#include "trainer/startup/rank_setup.h"
#include "trainer/step/training_state.h"

namespace ringpilot::trainer {

/// What an evaluation reads of the job (trainer/options.cpp EvaluationOptionsFor).
struct EvaluationOptions {
  int batch_per_rank = 1;  ///< eval.batch_per_rank, else data.batch_per_rank
  int num_classes = 0;     ///< model.num_classes: top-5 is over at most this many
  /// train.precision as it applies on the rank's device; none: fp32.
  std::optional<c10::ScalarType> autocast;
};

struct EvalResult {
  bool mlm = false;         ///< a masked-LM evaluation: mlm_accuracy, not top1/top5
  double top1 = 0;          ///< fraction of samples whose top class is the label
  double top5 = 0;          ///< ... whose label is among the 5 top classes
  double mlm_accuracy = 0;  ///< fraction of masked positions whose top id is the original
  double loss = 0;          ///< mean cross-entropy (per sample; masked-LM: per masked position)
  int64_t samples = 0;      ///< images or packed sequences
};

/// Collective over `comms` (every rank calls it at the same step boundary). First every rank
/// takes rank 0's buffers (BatchNorm running statistics, which each rank otherwise keeps from
/// its own batches; DDP's broadcast_buffers), so the result does not depend on which rank
/// scored which sample and a run resumed from rank 0's checkpoint evaluates as an unbroken
/// one. The model runs in eval mode without gradients, under `options.autocast`, and is back
/// in train mode afterwards. Host-synchronous: evaluation is outside the timed steps.
/// `val` is a set of labelled images (input::ValidationSet).
EvalResult Evaluate(const EvaluationOptions& options, const startup::RankPlace& place,
                    const startup::RankDevice& device, step::TrainingState& state,
                    input::ValidationSet& val, const startup::RankCommunicators& comms);

/// As Evaluate, for BERT on token shards: `val` holds packed sequences with their
/// evaluation masking keys, `tokens` are the run's ids.
EvalResult EvaluateMaskedLm(const EvaluationOptions& options, const startup::RankPlace& place,
                            const startup::RankDevice& device, step::TrainingState& state,
                            input::ValidationSet& val, const models::TokenSpec& tokens,
                            const startup::RankCommunicators& comms);

}  // namespace ringpilot::trainer
