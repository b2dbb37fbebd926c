// The crop-resize-flip kernel of the GPU image pipeline (data/cuda/image_pipeline.h):
// plain launch functions on raw device pointers, compiled by nvcc without other headers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ringpilot::data::cuda {

/// One decoded image of a batch and the box of it to resample (data::CropBox's fields).
struct ResampleJob {
  uint64_t source_offset = 0;  ///< bytes from the arena start: interleaved RGB, row pitch 3 x width
  int width = 0;               ///< 0: no image, the output is black
  int height = 0;
  float box_x = 0;
  float box_y = 0;
  float box_width = 0;
  float box_height = 0;
  int flip = 0;
};

/// For every job i: out[i] (planar RGB, out_height x out_width, uint8) = the bilinear
/// resampling of the job's box, with data::ResampleCrop's arithmetic (sample points at
/// pixel centres, edge clamp, round to nearest). `jobs` is in device memory.
cudaError_t LaunchResampleCrops(const uint8_t* arena, const ResampleJob* jobs, int count,
                                int out_height, int out_width, uint8_t* out, cudaStream_t stream);

}  // namespace ringpilot::data::cuda
