#include "data/cuda/nvjpeg_decode.h"

namespace ringpilot::data::cuda {

void ThrowFailedCall(const char* call, const std::string& why, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + why);
}

bool ChromaFactors(nvjpegChromaSubsampling_t css, int* fx, int* fy) {
  switch (css) {
    case NVJPEG_CSS_444:
      *fx = 1, *fy = 1;
      return true;
    case NVJPEG_CSS_422:
      *fx = 2, *fy = 1;
      return true;
    case NVJPEG_CSS_420:
      *fx = 2, *fy = 2;
      return true;
    case NVJPEG_CSS_440:
      *fx = 1, *fy = 2;
      return true;
    case NVJPEG_CSS_411:
      *fx = 4, *fy = 1;
      return true;
    case NVJPEG_CSS_410:
      *fx = 4, *fy = 2;
      return true;
    case NVJPEG_CSS_GRAY:
      *fx = 1, *fy = 1;
      return true;
    default:
      return false;
  }
}

nvjpegOutputFormat_t OutputFormatFor(const JpegShape& shape) {
  int fx = 1, fy = 1;
  if (!ChromaFactors(shape.css, &fx, &fy)) return NVJPEG_OUTPUT_RGB;
  if (shape.css != NVJPEG_CSS_GRAY && shape.chroma_width <= 0) return NVJPEG_OUTPUT_RGB;
  return NVJPEG_OUTPUT_YUV;
}

nvjpegImage_t PlaceImage(uint8_t* arena, uint64_t offset, nvjpegOutputFormat_t format,
                         const JpegShape& shape, ResampleJob* job) {
  const uint64_t luma = static_cast<uint64_t>(shape.width) * shape.height;
  int fx = 1, fy = 1;
  SourceLayout layout = SourceLayout::kPlanarRgb;
  if (format == NVJPEG_OUTPUT_YUV && ChromaFactors(shape.css, &fx, &fy)) {
    layout = shape.css == NVJPEG_CSS_GRAY ? SourceLayout::kGrey : SourceLayout::kYCbCr;
  }
  // Planar RGB and grey: three full planes (nvJPEG's YUV output of a greyscale JPEG is Y
  // alone; chroma planes, should it write them, land in the image's unused room). YCbCr:
  // full Y, then the subsampled Cb and Cr.
  uint64_t offsets[3] = {offset, offset + luma, offset + 2 * luma};
  int pitches[3] = {shape.width, shape.width, shape.width};
  if (layout == SourceLayout::kYCbCr) {
    offsets[2] = offset + luma + static_cast<uint64_t>(shape.chroma_width) * shape.chroma_height;
    pitches[1] = pitches[2] = shape.chroma_width;
  }
  nvjpegImage_t out{};
  for (int c = 0; c < 3; ++c) {
    job->plane_offset[c] = offsets[c];
    job->pitch[c] = pitches[c];
    out.channel[c] = arena + offsets[c];
    out.pitch[c] = static_cast<size_t>(pitches[c]);
  }
  job->layout = layout;
  job->chroma_x = fx;
  job->chroma_y = fy;
  job->chroma_width = shape.chroma_width;
  job->chroma_height = shape.chroma_height;
  return out;
}

OddJpegDecoder::OddJpegDecoder(nvjpegHandle_t handle, nvjpegJpegDecoder_t decoder,
                               nvjpegDevAllocatorV2_t device_allocator,
                               nvjpegPinnedAllocatorV2_t pinned_allocator, int stream_priority)
    : handle_(handle), decoder_(decoder) {
  PIPELINE_NVJPEG(nvjpegDecoderStateCreate(handle_, decoder_, &state_));
  PIPELINE_NVJPEG(nvjpegBufferPinnedCreateV2(handle_, &pinned_allocator, &pinned_));
  PIPELINE_NVJPEG(nvjpegBufferDeviceCreateV2(handle_, &device_allocator, &device_));
  PIPELINE_NVJPEG(nvjpegStateAttachPinnedBuffer(state_, pinned_));
  PIPELINE_NVJPEG(nvjpegStateAttachDeviceBuffer(state_, device_));
  PIPELINE_NVJPEG(nvjpegJpegStreamCreate(handle_, &jpeg_));
  PIPELINE_NVJPEG(nvjpegDecodeParamsCreate(handle_, &params_));
  PIPELINE_NVJPEG(nvjpegDecodeParamsSetAllowCMYK(params_, 1));
  PIPELINE_CUDA(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, stream_priority));
}

OddJpegDecoder::~OddJpegDecoder() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (params_) nvjpegDecodeParamsDestroy(params_);
  if (jpeg_) nvjpegJpegStreamDestroy(jpeg_);
  if (state_) nvjpegJpegStateDestroy(state_);
  if (pinned_) nvjpegBufferPinnedDestroy(pinned_);
  if (device_) nvjpegBufferDeviceDestroy(device_);
  if (stream_) cudaStreamDestroy(stream_);
}

bool OddJpegDecoder::Decode(const uint8_t* bytes, size_t length, const JpegShape& shape,
                            uint8_t* arena, uint64_t offset, cudaEvent_t arena_ready,
                            ResampleJob* job) {
  const nvjpegOutputFormat_t format = OutputFormatFor(shape);
  ResampleJob placed = *job;
  nvjpegImage_t out = PlaceImage(arena, offset, format, shape, &placed);
  int unsupported = 1;
  const bool ok =
      nvjpegJpegStreamParse(handle_, bytes, length, 0, 0, jpeg_) == NVJPEG_STATUS_SUCCESS &&
      nvjpegDecodeParamsSetOutputFormat(params_, format) == NVJPEG_STATUS_SUCCESS &&
      nvjpegDecoderJpegSupported(decoder_, jpeg_, params_, &unsupported) == NVJPEG_STATUS_SUCCESS &&
      unsupported == 0 &&
      nvjpegDecodeJpegHost(handle_, decoder_, state_, params_, jpeg_) == NVJPEG_STATUS_SUCCESS &&
      cudaStreamWaitEvent(stream_, arena_ready, 0) == cudaSuccess &&
      nvjpegDecodeJpegTransferToDevice(handle_, decoder_, state_, jpeg_, stream_) ==
          NVJPEG_STATUS_SUCCESS &&
      nvjpegDecodeJpegDevice(handle_, decoder_, state_, &out, stream_) == NVJPEG_STATUS_SUCCESS;
  // Also after a failure: work it enqueued must finish before the buffers are reused.
  const bool synced = cudaStreamSynchronize(stream_) == cudaSuccess;
  if (!ok || !synced) return false;
  *job = placed;
  return true;
}

}  // namespace ringpilot::data::cuda
