// The crop-resize-flip kernel of the GPU image pipeline (data/cuda/image_pipeline.h): one
// launch per batch reads every decoded image in the layout its decoder wrote (nvJPEG's
// native planar YCbCr with subsampled chroma, planar or interleaved RGB) and writes the
// model's planar uint8 RGB. Plain launch functions on raw device pointers, compiled by nvcc
// without other headers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ringpilot::data::cuda {

/// How a decoded image lies in the arena.
enum class SourceLayout : int32_t {
  kNone = 0,            ///< no usable sample: the output is black
  kInterleavedRgb = 1,  ///< plane 0: R,G,B per pixel (host decoders)
  kPlanarRgb = 2,       ///< planes 0,1,2: R, G, B
  kYCbCr = 3,           ///< plane 0: Y at full size; planes 1,2: Cb, Cr subsampled (JFIF)
  kGrey = 4,            ///< plane 0: Y (greyscale JPEG)
  kWritten = 5,         ///< the output is already there (made on the host): left as it is
};

/// One decoded image of a batch and the box of it to resample (data::CropBox's fields).
struct ResampleJob {
  uint64_t plane_offset[3] = {0, 0, 0};  ///< bytes from the arena start, per plane
  int32_t pitch[3] = {0, 0, 0};          ///< row pitch of each plane, bytes
  SourceLayout layout = SourceLayout::kNone;
  int32_t chroma_x = 1;  ///< kYCbCr: horizontal and vertical chroma subsampling (1, 2 or 4)
  int32_t chroma_y = 1;
  int32_t chroma_width = 0;  ///< kYCbCr: size of the chroma planes
  int32_t chroma_height = 0;
  int32_t width = 0;  ///< of the image (plane 0)
  int32_t height = 0;
  float box_x = 0;
  float box_y = 0;
  float box_width = 0;
  float box_height = 0;
  int32_t flip = 0;
};

/// For every job i: out[i] (planar RGB, out_height x out_width, uint8) = the bilinear
/// resampling of the job's box, with data::ResampleCrop's arithmetic (sample points at
/// pixel centres, edge clamp, round to nearest). YCbCr sources are converted per source pixel
/// as libjpeg-turbo does (chroma upsampled by its "fancy" triangle filter, which is bilinear
/// at centred chroma siting; JFIF full-range BT.601; rounded to 8 bits) before the blend, so
/// the result matches decoding to RGB first. `jobs` is in device memory.
cudaError_t LaunchResampleCrops(const uint8_t* arena, const ResampleJob* jobs, int count,
                                int out_height, int out_width, uint8_t* out, cudaStream_t stream);

}  // namespace ringpilot::data::cuda
