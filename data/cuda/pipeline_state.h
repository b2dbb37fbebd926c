// The GPU image pipeline's state, shared by its two halves: image_pipeline.cpp (set-up,
// the request queue, the copy into the step) and batch_assembly.cpp (reading, decoding and
// cropping one batch). Internal to ringpilot::data::cuda.
#pragma once

#include <nvjpeg.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "data/bad_samples.h"
#include "data/cuda/batched_decoder.h"
#include "data/cuda/image_pipeline.h"
#include "data/cuda/nvjpeg_decode.h"
#include "data/cuda/pipeline_memory.h"
#include "data/cuda/resample_kernels.h"
#include "data/cuda/worker_pool.h"
#include "data/image_decode.h"
#include "data/image_loader.h"
#include "data/image_source.h"

namespace ringpilot::data::cuda {

// kHostShare: one of the batch's last host_share samples, made whole on a worker
// (data::LoadCroppedSample) into the pinned share buffer.
enum class Route { kBatch, kOdd, kHost, kHostShare };

// What the workers find out about one sample of the batch.
struct ImagePipeline::Sample {
  int64_t index = 0;
  int64_t label = 0;
  int width = 0;
  int height = 0;
  Route route = Route::kBatch;
  bool black = false;               // no usable sample within kMaxSubstituteTries
  bool retry = false;               // kOdd: neither nvJPEG nor the host could decode it
  std::vector<BadSample> failures;  // samples tried for this entry that were bad
  const uint8_t* bytes = nullptr;   // the encoded image (pinned arena, or heap_bytes)
  size_t length = 0;
  std::vector<uint8_t> heap_bytes;
  JpegShape shape;       // kBatch, kOdd
  DecodedImage decoded;  // Route::kHost
};

struct ImagePipeline::Slot {
  uint8_t* pixels = nullptr;  // device [batch,3,H,W]
  int64_t* labels = nullptr;  // device [batch]
  cudaEvent_t ready = nullptr;
  cudaEvent_t consumed = nullptr;
  bool consumed_pending = false;  // a CopyNext copy from this slot was enqueued
};

struct ImagePipeline::Decoder {
  explicit Decoder(int device) : device_pool(device) {}
  // Declared first, destroyed last: nvJPEG frees into them.
  DevicePool device_pool;
  PinnedCache pinned_cache;
  PinnedArena bitstreams;
  nvjpegHandle_t handle = nullptr;  // the batch (hardware engines or GPU backend)
  std::unique_ptr<BatchedJpegDecoder> batch;
  nvjpegOutputFormat_t batch_format = NVJPEG_OUTPUT_YUV;
  std::vector<nvjpegJpegStream_t> streams;  // one per worker, for header parsing
  nvjpegHandle_t odd_handle = nullptr;      // the decoupled decoder's (host Huffman)
  nvjpegJpegDecoder_t odd_decoder = nullptr;
  std::vector<std::unique_ptr<OddJpegDecoder>> odd;  // one per worker
  cudaStream_t stream = nullptr;
  cudaEvent_t arena_ready = nullptr;  // the arena's (re)allocation, for the odd streams
  // Marks around the batch's GPU work, read back once the batch is done (the pipeline
  // thread waits for it anyway): decode start, resample start, end.
  cudaEvent_t marks[3] = {nullptr, nullptr, nullptr};
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<WorkerPool> share_pool;  // the host share's threads (host_share > 0)
  std::vector<Sample> samples;
  // Device arena of decoded images, grown stream-ordered from the pool.
  uint8_t* arena = nullptr;
  size_t arena_capacity = 0;
  ResampleJob* device_jobs = nullptr;
  ResampleJob* host_jobs = nullptr;  // pinned
  int64_t* host_labels = nullptr;    // pinned
  std::vector<int> batch_samples, odd_samples, host_samples;
  // The host share: its loader options, one scratch per worker, and how many of the last
  // samples of each batch it makes.
  ImageLoaderOptions share_options;
  std::vector<CropScratch> share_scratch;
  int share_count = 0;

  ~Decoder() {
    if (stream) cudaStreamSynchronize(stream);
    odd.clear();
    if (odd_decoder) nvjpegDecoderDestroy(odd_decoder);
    if (odd_handle) nvjpegDestroy(odd_handle);
    if (arena) device_pool.Free(arena, stream);
    if (device_jobs) device_pool.Free(device_jobs, stream);
    if (stream) cudaStreamSynchronize(stream);
    if (host_jobs) pinned_cache.Free(host_jobs, nullptr);
    if (host_labels) pinned_cache.Free(host_labels, nullptr);
    for (nvjpegJpegStream_t s : streams) nvjpegJpegStreamDestroy(s);
    for (cudaEvent_t e : marks) {
      if (e) cudaEventDestroy(e);
    }
    if (arena_ready) cudaEventDestroy(arena_ready);
    batch.reset();
    if (handle) nvjpegDestroy(handle);
    if (stream) cudaStreamDestroy(stream);
  }
};

}  // namespace ringpilot::data::cuda
