// One data.kind's training data as a rank sees it: what data.train holds, how many steps
// an epoch has, the run's token ids, and each step's batch. One implementation per kind
// (synthetic, cifar, images over data::ImageSource, tokens), chosen once by OpenDataset
// (trainer/input/dataset_factory.h); InputFeed drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "data/image_source.h"
#include "data/sampler.h"
#include "trainer/input/image_pipeline.h"
#include "trainer/input/synthetic_data.h"
#include "trainer/input/validation_set.h"
#include "trainer/models/model.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer::input {

/// What data.train holds: cifar: records in its batch files; image_folder: images, each a
/// file; image_shards: images in its shards; tokens: sequences of model.seq_len packed from
/// its one P.tokens. `samples` is -1 for synthetic (no data.train).
struct DataCount {
  int64_t samples = -1;
  int64_t files = 0;
};
/// "data.train: N samples in K files" (the rank-0 log line; summary.json has both numbers).
std::string DataCountLine(const DataCount& count);

/// Not thread-safe: the training thread calls every method. Batches are numbered by input
/// batch (optimizer step x train.grad_accum_steps + micro-batch).
class Dataset {
 public:
  virtual ~Dataset() = default;

  /// What data.train holds (read when the dataset was opened).
  virtual DataCount count() const = 0;
  /// Full global batches (world x data.batch_per_rank) in one epoch of data.train; 0 for
  /// synthetic, which has no epochs.
  virtual int64_t steps_per_epoch() const = 0;
  /// Token models: the run's ids (TokenSpecFor); image models: nullopt.
  virtual std::optional<models::TokenSpec> token_spec() const = 0;
  /// Image kinds: data.train's index (its summary, the bad files' indices); else null.
  virtual const data::ImageSource* images() const { return nullptr; }
  /// data.val as a held-out set for evaluation at the model's `image` size, or null (no
  /// data.val, or synthetic). Throws data::DataError naming a bad file.
  virtual std::unique_ptr<ValidationSet> LoadValidationSet(const models::ImageSpec& image,
                                                           bool cuda) const = 0;

  /// Once, before the first batch, when the rank's device is set up: `batches` input
  /// batches in the run, images at the model's `image` size (`image.workers` threads for
  /// synthetic images), `device` their destination. Image kinds start their pipeline here
  /// and log which decoder they chose to `log`.
  virtual void Start(int64_t batches, const models::ImageSpec& image, const c10::Device& device,
                     telemetry::RankLog& log) = 0;
  /// Image kinds: the pipeline that makes every batch, host buffers and copy included
  /// (after Start); null for kinds whose batches InputFeed's host buffers take (Fill).
  virtual ImagePipeline* pipeline() { return nullptr; }
  /// Image kinds: where and on how many threads the training images are decoded, and why
  /// (after Start; the rank's statistics file carries it for `ringpilot diagnose`).
  virtual std::optional<history::ImageDecode> image_decode() const { return std::nullopt; }
  /// Kinds without a pipeline: writes batch `batch`'s samples into `host` (CPU tensors of
  /// the batch's shape: see masked_on_device).
  virtual void Fill(int64_t batch, Batch& host) = 0;
  /// Token shards: batches carry one masking key per sequence (Batch::keys), not targets;
  /// the step masks them on the device (trainer/input/mlm_masking.h).
  virtual bool masked_on_device() const { return false; }

  /// Batch `batch` starts at `position` (a checkpoint's); no-op for synthetic.
  virtual void Resume(int64_t batch, data::SamplePosition position) = 0;
  /// Where batch `batch` starts (for checkpoints); {0, 0} for synthetic.
  virtual data::SamplePosition PositionOf(int64_t batch) const = 0;
  /// Epochs started before batch `batch` (its epoch, 0-based); 0 for synthetic.
  int64_t EpochOf(int64_t batch) const {
    return steps_per_epoch() > 0 ? PositionOf(batch).epoch : 0;
  }
  /// Image kinds: training-set indices of the distinct bad files this rank skipped.
  virtual std::vector<int64_t> bad_files() const { return {}; }
};

}  // namespace ringpilot::trainer::input
