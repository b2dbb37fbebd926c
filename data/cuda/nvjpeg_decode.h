// nvJPEG pieces of the GPU image pipeline (data/cuda/image_pipeline.h): error checks, where a
// decoded image lies in the arena (its planes, and how the crop kernel reads them), and the
// decoupled decoder that takes the JPEGs nvJPEG's batch refuses (progressive, 4:1:x, CMYK).
#pragma once

#include <cuda_runtime.h>
#include <nvjpeg.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "data/cuda/pipeline_memory.h"
#include "data/cuda/resample_kernels.h"

namespace ringpilot::data::cuda {

[[noreturn]] void ThrowFailedCall(const char* call, const std::string& why, const char* file,
                                  int line);

/// Setup and pipeline-thread checks: std::runtime_error "FILE:LINE: CALL failed: WHY".
#define PIPELINE_CUDA(call)                                                                        \
  do {                                                                                             \
    const cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      ::ringpilot::data::cuda::ThrowFailedCall(#call, cudaGetErrorString(e_), __FILE__, __LINE__); \
    }                                                                                              \
  } while (0)

#define PIPELINE_NVJPEG(call)                                                                   \
  do {                                                                                          \
    const nvjpegStatus_t s_ = (call);                                                           \
    if (s_ != NVJPEG_STATUS_SUCCESS) {                                                          \
      ::ringpilot::data::cuda::ThrowFailedCall(                                                 \
          #call, "nvjpegStatus_t " + std::to_string(static_cast<int>(s_)), __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)

/// What a JPEG's header says about the image nvJPEG will write.
struct JpegShape {
  int width = 0;
  int height = 0;
  nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
  int chroma_width = 0;  ///< components 1 and 2 (0: unknown)
  int chroma_height = 0;
};

/// Horizontal and vertical chroma subsampling of a YCbCr JPEG; false for subsamplings the
/// crop kernel does not read (those are decoded to planar RGB instead).
bool ChromaFactors(nvjpegChromaSubsampling_t css, int* fx, int* fy);

/// nvJPEG's output format for `shape` when YCbCr is wanted: YUV where the kernel reads the
/// subsampling, else planar RGB.
nvjpegOutputFormat_t OutputFormatFor(const JpegShape& shape);

/// Fills `job`'s planes for an image nvJPEG decodes in `format` at `offset` bytes into
/// `arena` (room for width x height x 3 bytes), and returns nvJPEG's destination for it.
nvjpegImage_t PlaceImage(uint8_t* arena, uint64_t offset, nvjpegOutputFormat_t format,
                         const JpegShape& shape, ResampleJob* job);

/// nvJPEG's decoupled decoder of one reader thread (NVJPEG_BACKEND_HYBRID: Huffman on the
/// host thread, the rest on the GPU). Not thread-safe: one per thread.
class OddJpegDecoder {
 public:
  /// `handle` and `decoder` are shared by every OddJpegDecoder and outlive them; the
  /// allocators' pool and cache too. Throws std::runtime_error naming the failed call.
  OddJpegDecoder(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder,
                 nvjpegDevAllocatorV2_t device_allocator,
                 nvjpegPinnedAllocatorV2_t pinned_allocator, int stream_priority);
  ~OddJpegDecoder();
  OddJpegDecoder(const OddJpegDecoder&) = delete;
  OddJpegDecoder& operator=(const OddJpegDecoder&) = delete;

  /// Decodes `bytes` into `arena` at `offset` as PlaceImage lays it out, after `arena_ready`
  /// (an event on the stream that allocated the arena), and fills `job`'s planes. Waits for
  /// its own stream (its buffers are reused by its next image), never for another. False
  /// when nvJPEG cannot decode it.
  bool Decode(const uint8_t* bytes, size_t length, const JpegShape& shape, uint8_t* arena,
              uint64_t offset, cudaEvent_t arena_ready, ResampleJob* job);

 private:
  nvjpegHandle_t handle_;
  nvjpegJpegDecoder_t decoder_;
  nvjpegJpegState_t state_ = nullptr;
  nvjpegBufferPinned_t pinned_ = nullptr;
  nvjpegBufferDevice_t device_ = nullptr;
  nvjpegJpegStream_t jpeg_ = nullptr;
  nvjpegDecodeParams_t params_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace ringpilot::data::cuda
