// The input of the training step: batches made on the host into two pinned buffers, one
// filling while the other is copied, and a device batch with stable addresses that the
// step (and its CUDA graph) reads. The Dataset (trainer/input/dataset.h) makes each batch:
// into the host buffer (synthetic, cifar, tokens), or through its ImagePipeline (image
// kinds), which decodes data.prefetch batches ahead into buffers of its own; the data
// phase is then the time the step waited for its batch. On CPU ranks the device batch is
// the host buffer itself for image kinds (no copy).
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/Device.h>

#include "trainer/input/copy_fence.h"
#include "trainer/input/dataset.h"
#include "trainer/input/image_pipeline.h"
#include "trainer/input/input_options.h"
#include "trainer/input/synthetic_data.h"
#include "trainer/models/model.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/training_metrics.h"

namespace ringpilot::trainer::input {

/// Not thread-safe: the training thread calls every method, in the order
/// CopyToDevice(batch), (step runs), Fill(batch + 1).
class InputFeed {
 public:
  /// Starts `dataset` (Dataset::Start, the dataset OpenDataset made of `options`) for
  /// `batches` input batches of options.batch_per_rank at the shapes of `model`, going to
  /// `device`; synthetic images are generated on `threads` threads. Data time is reported
  /// to `metrics`, bad image files to `log`. `dataset`, `metrics` and `log` must outlive
  /// the feed.
  InputFeed(const InputOptions& options, Dataset& dataset, const models::Model& model,
            const c10::Device& device, int threads, int64_t batches,
            telemetry::TrainingMetrics& metrics, telemetry::RankLog& log);
  /// Image kinds: logs where the pipeline's time went (ImagePipeline::TimeReport), if it says.
  ~InputFeed();

  /// Makes `batch`'s batch: into its host buffer, after the copy that last read that
  /// buffer (two batches ago) is done; image kinds wait for the pipeline's batch instead.
  /// Throws data::DataError when the image kinds' bad-sample limit is passed.
  void Fill(int64_t batch);
  /// Queues the copy of `batch`'s host batch into device_batch() (asynchronous on CUDA).
  void CopyToDevice(int64_t batch);

  /// Dataset kinds: batch `batch` starts at `position` (a checkpoint's); no-op for synthetic.
  void Resume(int64_t batch, data::SamplePosition position) { dataset_.Resume(batch, position); }
  /// Dataset kinds: where batch `batch` starts (for checkpoints); {0, 0} for synthetic.
  data::SamplePosition PositionOf(int64_t batch) const { return dataset_.PositionOf(batch); }
  /// Dataset kinds: the epoch of batch `batch` (0-based); 0 for synthetic.
  int64_t EpochOf(int64_t batch) const { return dataset_.EpochOf(batch); }
  /// Image kinds: training-set indices of the distinct bad files this rank skipped.
  std::vector<int64_t> bad_files() const { return dataset_.bad_files(); }

  const Batch& device_batch() const { return device_; }
  bool images() const { return images_; }
  /// Host seconds generating each batch so far.
  const std::vector<double>& data_seconds() const { return data_seconds_; }

 private:
  Dataset& dataset_;
  const bool images_;
  telemetry::TrainingMetrics& metrics_;
  telemetry::RankLog& log_;
  Batch host_[2];
  Batch device_;
  CopyFence copied_;
  std::vector<double> data_seconds_;
  ImageInputCounts reported_;  // image kinds: counts already passed to the metrics
};

}  // namespace ringpilot::trainer::input
