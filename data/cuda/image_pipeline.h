// GPU image input of GPU ranks (data.kind image_folder / image_shards): every JPEG is
// decoded on the GPU and one kernel per batch makes the model's input.
//   - Baseline JPEGs in one nvJPEG batch on the hardware JPEG engines (A100, H100, H200:
//     NVJPEG_BACKEND_HARDWARE; else nvJPEG's GPU backend), in their native planar YCbCr.
//   - JPEGs the batch refuses (progressive, 4:1:x, CMYK, ...) through nvJPEG's decoupled
//     decoder on the reader threads (Huffman on the host, the rest on the GPU), not the host
//     decoder, so one odd file does not hold up its batch.
//   - One kernel converts colour, crops, resizes and flips every image of the batch into the
//     planar uint8 [B,3,H,W] the models read.
// What no nvJPEG path takes (PNG, truncated JPEGs) is decoded on the host (data/
// image_decode.h) and uploaded; what nobody can decode is a bad sample, replaced and reported
// as data/bad_samples.h says (the host loader's rule).
//
// Costs nothing the step waits for: file bytes are read straight into reused pinned memory
// (every copy to the device is asynchronous), nvJPEG and the pipeline allocate from a device
// pool and a pinned cache that keep what they free (no cudaMalloc, cudaHostAlloc or free,
// each of which synchronises the device, once warm), and the GPU work runs on a stream of
// the lowest priority, ordered against the training stream by events only.
//
// Batches are made ahead of the training step on a thread of their own, into `prefetch`
// device slots. The training thread only waits for a slot to be ready (the input wait) and
// enqueues a device-to-device copy on its stream: no host synchronisation of that stream.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/bad_samples.h"
#include "data/image_source.h"

namespace ringpilot::data::cuda {

struct ImagePipelineOptions {
  int batch = 0;       ///< images per batch (a rank's data.batch_per_rank)
  int out_height = 0;  ///< model input size
  int out_width = 0;
  int prefetch = 2;      ///< batches decoded ahead (device slots), >= 1
  int threads = 4;       ///< host threads reading, parsing, odd-JPEG Huffman and host decode
  int device = 0;        ///< CUDA device of the rank
  bool hardware = true;  ///< use the hardware JPEG engines where the GPU has them
  bool train = true;     ///< random resized crop + flip (train) or centre crop (eval)
  uint64_t seed = 0;     ///< train.seed: crops are drawn from (seed, epoch, sample)
  /// The decode streams' priority: the lowest (default; the same as PyTorch's pool streams,
  /// the training stream's) or the highest. Beside a ResNet-50 step on an H200 the highest
  /// changed nothing measurable (87.5% of the synthetic rate against 86.3%,
  /// bench/results/2026-11-28-nvidia-h200-image-input.md).
  bool high_priority = false;
  /// JPEGs nvJPEG's batch refuses go to its decoupled decoder on the GPU (else the host's).
  bool odd_on_gpu = true;
  /// The share of every batch (its last round(host_share x batch) samples) made on the host
  /// instead, as the CPU loader does (data::LoadCroppedSample: crop-only libjpeg-turbo
  /// decode and resample), by `share_threads` threads of their own while nvJPEG decodes the
  /// rest (DALI's hw_decoder_load). Fixed positions, so a batch's pixels do not depend on
  /// timing. In [0, 1].
  double host_share = 0;
  /// Threads decoding the host share (0: `threads`).
  int share_threads = 0;
  /// Nice value of the host share's threads (0: unchanged). nvJPEG's hardware path slows by
  /// a third when every core is busy at the same priority (bench/gpu_decode_diagnosis.sh):
  /// its host threads feed the engines and must not wait behind a decode.
  int share_nice = 0;
};

/// Whether `device` has hardware JPEG engines nvJPEG can use (A100, H100, H200): what
/// data.gpu_decode: auto decides by. False where nvJPEG cannot start at all.
bool HasHardwareJpegDecoder(int device);

/// The samples of one batch, in order: dataset indices and the epoch they belong to.
struct BatchRequest {
  int64_t epoch = 0;
  std::vector<int64_t> indices;
};

/// Decode-rate counters since construction (read from any thread).
struct ImagePipelineCounters {
  int64_t images = 0;               ///< decoded and resampled
  int64_t hardware_images = 0;      ///< of which in nvJPEG's batch (hardware or GPU backend)
  int64_t odd_gpu_images = 0;       ///< of which by nvJPEG's decoupled decoder (progressive, ...)
  int64_t host_images = 0;          ///< of which on the host (PNG, truncated, fallback)
  int64_t host_share_images = 0;    ///< of which the host share made (host_share)
  double busy_seconds = 0;          ///< wall time the pipeline thread spent making batches,
  double read_seconds = 0;          ///< of which reading, parsing, host decode (workers)
  double batch_call_seconds = 0;    ///< in nvJPEG's batched calls (host side)
  double odd_seconds = 0;           ///< the batch calls and odd JPEGs (workers)
  double share_seconds = 0;         ///< the host share (its own threads, beside the above)
  double finish_seconds = 0;        ///< waiting for the batch's GPU work at the end
  double decode_gpu_seconds = 0;    ///< GPU time of the batch's decode (engines + kernels)
  double resample_gpu_seconds = 0;  ///< GPU time of the crop-resize kernel (SM time)
  int ready_batches = 0;            ///< batches decoded and not yet taken (prefetch depth)
  /// cudaHostAlloc calls (pinned bitstreams, staging, nvJPEG's pinned buffers) and bytes the
  /// device pool holds: both stop growing once the pipeline is warm.
  int64_t pinned_allocations = 0;
  int64_t device_pool_bytes = 0;
};

/// Enqueue, WaitNext and CopyNext are called by one thread (the training thread); the rest is
/// internal. `source` and `bad` must outlive the pipeline. Setup errors (no CUDA device,
/// nvJPEG unavailable) throw std::runtime_error naming the call.
class ImagePipeline {
 public:
  ImagePipeline(const ImageSource& source, const ImagePipelineOptions& options, BadSampleLog& bad);
  /// Stops the pipeline thread and waits for its GPU work; queued batches are dropped.
  ~ImagePipeline();
  ImagePipeline(const ImagePipeline&) = delete;
  ImagePipeline& operator=(const ImagePipeline&) = delete;

  /// Queues a batch (request.indices.size() == options.batch). Batches are made in the
  /// order they are queued; queue up to `prefetch` ahead of the one being consumed.
  void Enqueue(BatchRequest request);

  /// Waits until the oldest queued batch not yet copied is made; returns the seconds the
  /// host waited. Rethrows an error of the pipeline thread: data::DataError with
  /// BadSampleLog::fatal() once bad samples pass data.max_bad_fraction.
  double WaitNext();

  /// Waits as WaitNext (no wait when it already did), then enqueues on `stream` the copies of
  /// its pixels into `pixels` (uint8 [batch,3,out_height,out_width], device) and of its
  /// labels into `labels` (int64 [batch], device). Returns the seconds the host waited.
  /// Rethrows an error of the pipeline thread. The slot is reused only after the copies
  /// have run on `stream` (an event orders it; the host does not wait for it).
  double CopyNext(uint8_t* pixels, int64_t* labels, cudaStream_t stream);

  /// Images per batch (options.batch).
  int batch_size() const { return options_.batch; }
  /// "hardware" or "gpu" (nvJPEG backend of the batch).
  const std::string& backend() const { return backend_name_; }
  /// "ycbcr" (nvJPEG's native planar output) or "rgb" (planar RGB, where the backend refused
  /// YCbCr output).
  const std::string& batch_output() const { return batch_output_name_; }
  ImagePipelineCounters counters() const;

 private:
  struct Slot;
  struct Decoder;
  struct Sample;
  void Loop();
  void MakeBatch(const BatchRequest& request, Slot& slot, bool slot_in_use);
  void ResolveSample(int thread, int64_t wanted, bool host_only, Sample& sample);
  void MakeHostShareSample(int thread, const BatchRequest& request, int i, uint8_t* pixels);

  const ImageSource& source_;
  const ImagePipelineOptions options_;
  BadSampleLog& bad_;
  std::string backend_name_;
  std::string batch_output_name_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<BatchRequest> requests_;  // queued, not yet started
  int64_t made_ = 0;                   // batches made (slot = made % prefetch)
  int64_t taken_ = 0;                  // batches taken by CopyNext
  bool stopping_ = false;
  std::exception_ptr error_;
  ImagePipelineCounters counters_;
  std::thread thread_;
};

}  // namespace ringpilot::data::cuda
