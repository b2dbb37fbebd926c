// The host batch loader of the image datasets: worker threads read, decode and crop the
// samples of the next steps into caller-provided batch buffers (the trainer's pinned host
// memory), ahead of the training thread, which blocks only when the batch it asks for is
// not ready yet. Torch-free.
//
// Bad samples (unreadable, not an image, undecodable or truncated, no label) are replaced
// by a deterministic substitute so that every batch stays full: the next sample of the set
// in index order (wrapping) that loads, drawing its own crop. Each bad file is reported
// once (TakeWarnings), every replacement counted; past `max_bad_fraction` of the samples
// read (with at least kBadFractionFloor samples as the denominator) Wait reports a fatal
// error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/bad_samples.h"
#include "data/image_decode.h"
#include "data/image_source.h"

namespace ringpilot::data {

/// Which samples each step's batch holds.
class StepPlan {
 public:
  virtual ~StepPlan() = default;
  /// Dataset indices of `step`'s batch (1 to the slots' capacity), in order; returns the
  /// epoch its training crops are drawn from. Called under the loader's lock (one call at a
  /// time), for increasing steps.
  virtual int64_t Indices(int64_t step, std::vector<int64_t>* indices) = 0;
};

enum class ImageTransform {
  kTrain,  ///< TrainCropBox (random resized crop + flip from seed, epoch, sample)
  kEval,   ///< EvalCropBox (centre crop of 0.875 x the short side)
};

struct ImageLoaderOptions {
  int batch = 0;       ///< samples a slot holds
  int out_height = 0;  ///< output image size (the model's)
  int out_width = 0;
  ImageTransform transform = ImageTransform::kTrain;
  uint64_t seed = 0;  ///< train.seed
  int workers = 0;    ///< decode threads, >= 1
  double max_bad_fraction = 0;
  /// Nice value of the decode threads (0: unchanged): on a GPU rank they yield to the
  /// training thread, which keeps the device fed.
  int worker_nice = 0;
};

/// One batch buffer: `pixels` holds batch x 3 x out_height x out_width uint8 (planar RGB,
/// NCHW), `labels` batch int64. Owned by the caller; must outlive the loader.
struct BatchSlot {
  uint8_t* pixels = nullptr;
  int64_t* labels = nullptr;
};

/// Counts since construction.
struct LoaderCounts {
  int64_t samples = 0;      ///< batch entries produced
  int64_t decoded = 0;      ///< images decoded (substitutes included)
  int64_t bad_samples = 0;  ///< batch entries that needed a substitute
  int ready_batches = 0;    ///< batches ready and not yet taken by Wait
};

/// One thread's buffers for LoadCroppedSample, reused for every sample: no allocation once
/// they have grown to the largest image seen.
struct CropScratch {
  std::vector<uint8_t> bytes;
  DecodedImage image;
};

/// One sample as the loader makes it: reads sample `index` of `source`, decodes what its
/// crop needs (options.transform's box, drawn from options.seed, `epoch` and `index`;
/// DecodeImageCrop) and resamples it to options.out_height x out_width planar RGB at
/// `pixels`. Returns its label, or -1 with `*error` (a bad sample). Thread-safe for distinct
/// `scratch` and `pixels`. The GPU pipeline's host share (data/cuda/image_pipeline.h) makes
/// its samples through this too, so both decode a host sample alike.
int32_t LoadCroppedSample(const ImageSource& source, int64_t index, int64_t epoch,
                          const ImageLoaderOptions& options, CropScratch& scratch, uint8_t* pixels,
                          std::string* error);

/// Thread-safety: Start, Wait, Release, TakeWarnings, counts and bad_files are called from
/// one thread (the training thread); the workers are internal.
class ImageBatchLoader {
 public:
  /// `source`, `plan` and the slots' memory must outlive the loader. Slot k holds the steps
  /// s with s % slots.size() == k; a step is loaded only once the step slots.size() before
  /// it was released.
  ImageBatchLoader(const ImageSource& source, StepPlan& plan, std::vector<BatchSlot> slots,
                   const ImageLoaderOptions& options);
  /// Stops and joins the workers (an unfinished batch is abandoned).
  ~ImageBatchLoader();
  ImageBatchLoader(const ImageBatchLoader&) = delete;
  ImageBatchLoader& operator=(const ImageBatchLoader&) = delete;

  /// Starts the workers on steps first..end-1. Once only.
  void Start(int64_t first_step, int64_t end_step);
  /// Blocks until `step` (the next step not yet waited for) is loaded; returns its slot and
  /// sets `*count` to its samples. Returns -1 and sets `*fatal` (one line) when the bad
  /// fraction was exceeded.
  int Wait(int64_t step, int* count, std::string* fatal);
  /// Steps up to `step` may be overwritten (their buffers were consumed).
  void Release(int64_t step);
  /// Warnings since the last call, one line per bad file (first time it is seen).
  std::vector<std::string> TakeWarnings();
  LoaderCounts counts() const;
  /// Indices of the distinct bad samples seen so far (the files skipped), unordered.
  std::vector<int64_t> bad_files() const;

 private:
  struct Slot {
    int64_t step = -1;
    int64_t epoch = 0;
    int count = 0;
    int done = 0;
    std::vector<int64_t> indices;
  };
  void Work();

  const ImageSource& source_;
  StepPlan& plan_;
  const std::vector<BatchSlot> buffers_;
  const ImageLoaderOptions options_;
  const size_t image_bytes_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a step became loadable, or stop
  std::condition_variable ready_cv_;  // training thread: a batch is done, or fatal
  std::vector<Slot> slots_;
  bool stop_ = false;
  int64_t next_step_ = 0;  // next step to hand out
  int next_item_ = 0;      // next sample of next_step_ to hand out
  int64_t end_step_ = 0;
  int64_t low_ = 0;  // first step not released
  int64_t waited_ = -1;
  LoaderCounts counts_;
  std::string fatal_;
  BadSampleLog bad_;
  std::vector<std::thread> threads_;
};

}  // namespace ringpilot::data
