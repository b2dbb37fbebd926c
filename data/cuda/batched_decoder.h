// nvJPEG's batched decode for the GPU image pipeline (data/cuda/image_pipeline.h), one
// sub-batch per chroma subsampling. The JPEG engines slow down badly when one batch mixes
// subsamplings (H200, ImageNet-like files: 4:2:0 alone 21.3k img/s, with a tenth of 4:4:4
// 7.9k), so each subsampling gets its own nvJPEG state and stream, the sub-batches run side by
// side, and each puts its largest images first (a large image decoded last is the batch's
// tail).
#pragma once

#include <cuda_runtime.h>
#include <nvjpeg.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace ringpilot::data::cuda {

/// Add and Clear are called by one thread; DecodeGroup by several at once, each with its own
/// group. The handle outlives this object.
class BatchedJpegDecoder {
 public:
  /// Tries `preferred` as the output format and falls back to planar RGB where the backend
  /// refuses it. Throws std::runtime_error naming the failed call.
  BatchedJpegDecoder(nvjpegHandle_t handle, nvjpegOutputFormat_t preferred, int max_batch,
                     int cpu_threads, int stream_priority);
  ~BatchedJpegDecoder();
  BatchedJpegDecoder(const BatchedJpegDecoder&) = delete;
  BatchedJpegDecoder& operator=(const BatchedJpegDecoder&) = delete;

  /// The output format every image is decoded to.
  nvjpegOutputFormat_t format() const { return format_; }

  /// Forgets the images of the last batch (their groups' work is done).
  void Clear();
  /// Queues an image of `pixels` pixels for its subsampling's group; `bytes` (pinned, for
  /// asynchronous copies) and `out` stay valid until the batch is done.
  void Add(nvjpegChromaSubsampling_t css, const uint8_t* bytes, size_t length,
           const nvjpegImage_t& out, int64_t pixels);
  /// Groups with images this batch.
  int groups() const { return static_cast<int>(active_.size()); }
  /// Decodes group `g` on its stream after `ready`, then records its end. Returns false when
  /// nvJPEG refuses the batch (it does not say which image).
  bool DecodeGroup(int g, cudaEvent_t ready);
  /// Makes `stream` wait for every group decoded this batch.
  cudaError_t JoinInto(cudaStream_t stream);

 private:
  struct Group {
    nvjpegJpegState_t state = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
    int initialized = -1;
    std::vector<const unsigned char*> bitstreams;
    std::vector<size_t> lengths;
    std::vector<nvjpegImage_t> outputs;
    std::vector<int64_t> pixels;
    std::vector<int> order;
    std::vector<const unsigned char*> sorted_bitstreams;
    std::vector<size_t> sorted_lengths;
    std::vector<nvjpegImage_t> sorted_outputs;
  };
  Group& GroupOf(nvjpegChromaSubsampling_t css);

  nvjpegHandle_t handle_;
  nvjpegOutputFormat_t format_ = NVJPEG_OUTPUT_YUV;
  int cpu_threads_;
  int priority_;
  std::map<int, std::unique_ptr<Group>> groups_;  // by subsampling
  std::vector<Group*> active_;                    // groups with images this batch
};

}  // namespace ringpilot::data::cuda
