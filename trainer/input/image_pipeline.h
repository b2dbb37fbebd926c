// The image input of data.kind image_folder / image_shards: a pipeline turns the training
// set's encoded images into each step's device batch. The CPU pipeline
// (cpu_image_pipeline.h) decodes on host threads into pinned buffers and copies them in;
// a GPU pipeline (nvJPEG) implements the same interface beside it. The images dataset
// (image_dataset.cpp) makes one, and InputFeed drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "data/image_source.h"
#include "data/sampler.h"
#include "history/rank_stats.h"
#include "trainer/input/input_options.h"
#include "trainer/input/synthetic_data.h"
#include "trainer/models/model.h"

namespace ringpilot::trainer::input {

/// Counts since the pipeline started (for the metrics and the log).
struct ImageInputCounts {
  int64_t samples = 0;      ///< batch entries produced
  int64_t decoded = 0;      ///< images decoded, substitutes included
  int64_t bad_samples = 0;  ///< batch entries replaced by a substitute
  int ready_batches = 0;    ///< batches ready ahead of the training step now
};

/// Not thread-safe: the training thread calls every method, in the order Resume (optional,
/// once), then per step Fill(step), CopyToDevice(step) with increasing steps.
class ImagePipeline {
 public:
  virtual ~ImagePipeline() = default;
  /// Step `step` starts at `position` (a checkpoint's).
  virtual void Resume(int64_t step, data::SamplePosition position) = 0;
  /// Where step `step` starts (for checkpoints).
  virtual data::SamplePosition PositionOf(int64_t step) const = 0;
  /// Makes `step`'s batch ready, blocking only while it is not; returns the seconds it
  /// blocked (the step's input wait). Throws data::DataError (one line) when the job's
  /// bad-sample limit is passed.
  virtual double Fill(int64_t step) = 0;
  /// Puts `step`'s batch into `device` (whose tensors keep their addresses on CUDA).
  virtual void CopyToDevice(int64_t step, Batch& device) = 0;
  virtual ImageInputCounts counts() const = 0;
  /// One line per bad file seen since the last call.
  virtual std::vector<std::string> TakeWarnings() = 0;
  /// Training-set indices of the distinct bad files seen so far.
  virtual std::vector<int64_t> bad_files() const = 0;
  /// One line saying where the pipeline's time went per batch (for the rank's log at the
  /// end); "" when it has nothing beyond the data phase's own figures.
  virtual std::string TimeReport() const { return ""; }
};

/// data.gpu_decode auto decodes on host threads when the rank has at least this many cores,
/// else on the GPU's hardware JPEG engines where it has them. Measured on an H200 with 16
/// cores, ResNet-50 bf16 b256: host decode kept 100% of the synthetic rate on 40 KB JPEGs
/// where nvJPEG beside the step gave 86-88%, and both gave 68-72% on ImageNet-like files
/// (bench/results/2026-11-28-nvidia-h200-image-input.md); an H100 host needed ~12 cores
/// per GPU for the host to keep up (2026-11-25-nvidia-h100-x1-image-input.md).
inline constexpr int kHostDecodeMinCores = 12;

/// Which rank of how many, the run's input batches, and where they go.
struct PipelineTarget {
  int rank = 0;
  int world = 1;
  int64_t batches = 0;  ///< input batches of the run (optimizer steps x grad_accum_steps)
  c10::Device device = c10::kCPU;
};

/// The rank's pipeline for `source` (which must outlive it): batches of batch_per_rank at
/// the model's image size, training crops, images.prefetch batches ahead. Decodes on the
/// GPU (nvJPEG) or on host threads by images.gpu_decode (auto: kHostDecodeMinCores);
/// `*route` gets which (where, threads) and one line saying which and why, for the rank's
/// log and its statistics file.
std::unique_ptr<ImagePipeline> MakeImagePipeline(const InputOptions& options,
                                                 const data::ImageSource& source,
                                                 const models::ImageSpec& image,
                                                 const PipelineTarget& target,
                                                 history::ImageDecode* route);

}  // namespace ringpilot::trainer::input
