// Evaluation on the validation set (data.val): every rank scores its contiguous part, the
// counts are all-reduced, every rank gets the same result. Image models: top-1, top-5 and
// loss; BERT on token shards: masked-LM accuracy and loss over positions masked with a
// fixed key (kEvalMaskSeed), the same in every evaluation of every run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/TensorBody.h>

#include "config/job.h"
#include "data/token_shards.h"
#include "trainer/models/model.h"
#include "trainer/rank_setup.h"
#include "trainer/training_state.h"

namespace ringpilot::trainer {

/// A held-out set that evaluation scores (trainer/validation_set.h: CIFAR in memory, or an
/// image folder / shards decoded with the evaluation crop). Used by the training thread only.
class ValidationSet {
 public:
  using Consumer = std::function<void(const at::Tensor& images, const at::Tensor& labels)>;
  virtual ~ValidationSet() = default;
  virtual int64_t size() const = 0;
  virtual int num_classes() const = 0;
  /// Samples [first, last) in order, `batch` at a time (the last batch may be smaller), as
  /// CPU tensors: images uint8 [n, 3, H, W] at the model's size, labels int64 [n]; they are
  /// valid during the call only. Throws data::DataError when the set's bad-sample limit is
  /// passed.
  virtual void ForEachBatch(int64_t first, int64_t last, int batch, const Consumer& consume) = 0;
  /// One line per bad file seen since the last call (image sets).
  virtual std::vector<std::string> TakeWarnings() { return {}; }
  /// Indices of the distinct bad files seen so far (image sets).
  virtual std::vector<int64_t> bad_files() const { return {}; }
};

/// data.val of data.kind tokens: a mapped shard's sequences packed to model.seq_len.
struct TokenValidationSet {
  std::unique_ptr<data::TokenShard> shard;
  std::unique_ptr<data::PackedSequences> sequences;
  int64_t size() const { return sequences->size(); }
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
/// one. The model runs in eval mode without gradients, under the job's autocast, and is back
/// in train mode afterwards. Host-synchronous: evaluation is outside the timed steps.
EvalResult Evaluate(const config::JobConfig& job, const RankPlace& place, const RankDevice& device,
                    TrainingState& state, ValidationSet& val, const RankCommunicators& comms);

/// As Evaluate, for BERT on token shards: `tokens` are the run's ids.
EvalResult EvaluateMaskedLm(const config::JobConfig& job, const RankPlace& place,
                            const RankDevice& device, TrainingState& state,
                            const TokenValidationSet& val, const models::TokenSpec& tokens,
                            const RankCommunicators& comms);

}  // namespace ringpilot::trainer
