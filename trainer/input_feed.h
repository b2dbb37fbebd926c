// The input of the training step: batches made on the host into two pinned buffers, one
// filling while the other is copied, and a device batch with stable addresses that the
// step (and its CUDA graph) reads. data.kind synthetic: generated (trainer/synthetic_data.h);
// cifar: CIFAR batches in memory, sampled per epoch and rank (data/sampler.h), with the
// usual augmentation (4-pixel padded random crop, horizontal flip) drawn from (seed, epoch,
// sample), so a resumed run sees the same pixels. image_folder / image_shards: an
// ImagePipeline (trainer/image_pipeline.h) decodes data.prefetch batches ahead; the data
// phase is then the time the step waited for its batch. On CPU ranks the device batch is
// the host buffer itself (no copy). tokens: sequences packed from a mapped token shard
// (data/token_shards.h), sampled the same way, with one masking key per sequence from
// (seed, epoch, sample): the step masks them on the device (trainer/mlm_masking.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/job.h"
#include "data/cifar.h"
#include "data/image_source.h"
#include "data/sampler.h"
#include "data/token_shards.h"
#include "trainer/evaluation.h"
#include "trainer/graphed_step.h"
#include "trainer/image_pipeline.h"
#include "trainer/models/model.h"
#include "trainer/rank_setup.h"
#include "trainer/synthetic_data.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/training_metrics.h"

namespace ringpilot::trainer {

/// data.kind cifar: CIFAR-100 for model.num_classes 100, else CIFAR-10 (config checks 10|100).
data::CifarVariant CifarVariantFor(const config::ModelConfig& model);

/// The run's token ids: data.kind tokens: the vocabulary and special ids of data.train's
/// shard header (data.val's must be the same), with model.vocab_size rows (0: the shards'
/// vocabulary size); synthetic: kSynthetic* ids and model.vocab_size (0: 30522). Reads
/// headers only. Throws data::DataError naming the file for a bad header, a data.val shard
/// of another vocabulary, or a model.vocab_size below the shards' vocabulary.
models::TokenSpec TokenSpecFor(const config::JobConfig& job);

/// data.kind tokens' data.val, or null (another kind, or no data.val). Throws
/// data::DataError naming a bad file.
std::unique_ptr<TokenValidationSet> LoadTokenValidationSet(const config::JobConfig& job);

/// What data.train holds: cifar: records in its batch files; image_folder: images, each a
/// file; image_shards: images in its shards; tokens: sequences of model.seq_len packed from
/// its one P.tokens. `samples` is -1 for synthetic (no data.train).
struct DataCount {
  int64_t samples = -1;
  int64_t files = 0;
};
/// Counts data.train (image kinds from `images`, OpenImageSet of data.train; the others from
/// their headers and sizes). Throws data::DataError naming a bad file: for cifar, one cut
/// short, or holding another number of records than its distribution name says.
DataCount CountTrainData(const config::JobConfig& job, const data::ImageSource* images);
/// "data.train: N samples in K files" (the rank-0 log line; summary.json has both numbers).
std::string DataCountLine(const DataCount& count);

/// Dataset kinds: full global batches (world x data.batch_per_rank) in one epoch of
/// data.train: CIFAR from the files' sizes, image kinds from `images` (OpenImageSet of
/// data.train). Throws data::DataError for a bad file, and std::runtime_error when one
/// global batch does not fit in the dataset.
int64_t StepsPerEpoch(const config::JobConfig& job, int world, const data::ImageSource* images);

/// Not thread-safe: the training thread calls every method, in the order
/// CopyToDevice(step), (step runs), Fill(step + 1).
class InputFeed {
 public:
  /// Shapes come from `model`; synthetic samples from train.seed, laid out so that any
  /// split of a global batch over ranks sees the same samples (FirstSampleIndex). Reads
  /// data.train for kinds cifar and tokens: throws data::DataError naming a bad file. Image
  /// kinds read `images` (data.train opened by OpenImageSet; it must outlive the feed). Data
  /// time is reported to `metrics`, bad image files to `log` (both must outlive the feed).
  InputFeed(const config::JobConfig& job, const models::Model& model, const RankPlace& place,
            const RankDevice& device, telemetry::TrainingMetrics& metrics, telemetry::RankLog& log,
            const data::ImageSource* images);
  /// Image kinds: logs where the pipeline's time went (ImagePipeline::TimeReport), if it says.
  ~InputFeed();

  /// Generates `step`'s batch into its host buffer, after the copy that last read that
  /// buffer (two steps ago) is done; image kinds wait for the pipeline's batch instead.
  /// Throws data::DataError when the image kinds' bad-sample limit is passed.
  void Fill(int64_t step);
  /// Queues the copy of `step`'s host batch into device_batch() (asynchronous on CUDA).
  void CopyToDevice(int64_t step);

  /// Dataset kinds: step `step` starts at `position` (a checkpoint's); no-op for synthetic.
  void Resume(int64_t step, data::SamplePosition position);
  /// Dataset kinds: where step `step` starts (for checkpoints); {0, 0} for synthetic.
  data::SamplePosition PositionOf(int64_t step) const;
  /// Dataset kinds: epochs started by step `step` (1-based); 0 for synthetic.
  int64_t EpochOf(int64_t step) const { return sampler_ || image_ ? PositionOf(step).epoch : 0; }
  /// Image kinds: training-set indices of the distinct bad files this rank skipped.
  std::vector<int64_t> bad_files() const;

  const Batch& device_batch() const { return device_; }
  bool images() const { return images_; }
  /// Token models: the run's ids (TokenSpecFor).
  const models::TokenSpec& token_spec() const { return token_spec_; }
  /// Host seconds generating each batch so far.
  const std::vector<double>& data_seconds() const { return data_seconds_; }

 private:
  const uint64_t seed_;
  const int rank_;
  const int world_;
  const int batch_;
  const bool images_;
  models::ImageSpec image_spec_;
  models::TokenSpec token_spec_;
  telemetry::TrainingMetrics& metrics_;
  Batch host_[2];
  Batch device_;
  CopyFence copied_;
  std::vector<double> data_seconds_;
  // data.kind cifar.
  std::unique_ptr<data::CifarSet> cifar_;
  // data.kind tokens.
  std::unique_ptr<data::TokenShard> shard_;
  std::unique_ptr<data::PackedSequences> sequences_;
  // Dataset kinds.
  std::unique_ptr<data::EpochSampler> sampler_;
  std::vector<int64_t> indices_;
  // Image kinds.
  telemetry::RankLog& log_;
  std::unique_ptr<ImagePipeline> image_;
  ImageInputCounts reported_;  // counts already passed to the metrics
};

}  // namespace ringpilot::trainer
