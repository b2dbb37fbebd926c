// The held-out sets of evaluation (data.val): CIFAR batches in memory, image folders or
// shards decoded on host threads with the evaluation crop (resize to out / 0.875, centre
// crop) at the model's image size, and token shards' packed sequences with evaluation
// masking keys. A dataset loads its kind's (Dataset::LoadValidationSet).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/TensorBody.h>

#include "data/cifar.h"
#include "data/image_source.h"
#include "trainer/input/input_options.h"
#include "trainer/models/model.h"

namespace ringpilot::trainer::input {

/// A held-out set that evaluation scores. Used by the training thread only.
class ValidationSet {
 public:
  /// One batch as CPU tensors, valid during the call only. Image sets: images uint8
  /// [n, 3, H, W] at the model's size and labels int64 [n]. Token sets: ids int64 [n, L]
  /// and one masking key per sequence, int64 [n] (SequenceKey(kEvalMaskSeed, 0, sample):
  /// every evaluation of every run masks the same positions).
  using Consumer = std::function<void(const at::Tensor& input, const at::Tensor& target)>;
  virtual ~ValidationSet() = default;
  /// Samples: images, or packed sequences.
  virtual int64_t size() const = 0;
  /// Samples [first, last) in order, `batch` at a time (the last batch may be smaller).
  /// Throws data::DataError when the set's bad-sample limit is passed.
  virtual void ForEachBatch(int64_t first, int64_t last, int batch, const Consumer& consume) = 0;
  /// One line per bad file seen since the last call (image sets).
  virtual std::vector<std::string> TakeWarnings() { return {}; }
  /// Indices of the distinct bad files seen so far (image sets).
  virtual std::vector<int64_t> bad_files() const { return {}; }
};

/// CIFAR's test batch of `variant` under `path`. Throws data::DataError naming a bad file.
std::unique_ptr<ValidationSet> LoadCifarValidationSet(const std::string& path,
                                                      data::CifarVariant variant);

/// `source` decoded with the evaluation crop at `image`'s size on `workers` threads, bad
/// files replaced as in training (images.max_bad_fraction).
std::unique_ptr<ValidationSet> MakeImageValidationSet(const InputOptions& options,
                                                      std::unique_ptr<data::ImageSource> source,
                                                      const models::ImageSpec& image, int workers);

/// The token shard at `prefix` (data.val) mapped, its documents packed to `seq_len`.
/// Throws data::DataError naming a bad file.
std::unique_ptr<ValidationSet> LoadTokenValidationSet(const std::string& prefix, int seq_len);

}  // namespace ringpilot::trainer::input
