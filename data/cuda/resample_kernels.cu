#include "data/cuda/resample_kernels.h"

namespace ringpilot::data::cuda {
namespace {

// One thread per output pixel; blockIdx.y is the image. Sources are small (ImageNet-sized
// images) and read with spatial locality, so plain loads through L1/L2 suffice.
__global__ void ResampleCropsKernel(const uint8_t* __restrict__ arena,
                                    const ResampleJob* __restrict__ jobs, int out_height,
                                    int out_width, uint8_t* __restrict__ out) {
  const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
  const int plane = out_height * out_width;
  if (pixel >= plane) return;
  const ResampleJob job = jobs[blockIdx.y];
  uint8_t* dst = out + static_cast<size_t>(blockIdx.y) * 3 * plane + pixel;
  if (job.width == 0) {  // an entry with no usable sample: black
    dst[0] = dst[plane] = dst[2 * plane] = 0;
    return;
  }
  const int oy = pixel / out_width;
  const int ox = pixel - oy * out_width;
  const int sx_index = job.flip ? out_width - 1 - ox : ox;
  const float scale_x = job.box_width / static_cast<float>(out_width);
  const float scale_y = job.box_height / static_cast<float>(out_height);
  float sx = job.box_x + (static_cast<float>(sx_index) + 0.5f) * scale_x - 0.5f;
  float sy = job.box_y + (static_cast<float>(oy) + 0.5f) * scale_y - 0.5f;
  sx = fminf(fmaxf(sx, 0.0f), static_cast<float>(job.width - 1));
  sy = fminf(fmaxf(sy, 0.0f), static_cast<float>(job.height - 1));
  const int x0 = static_cast<int>(sx);
  const int y0 = static_cast<int>(sy);
  const int x1 = min(x0 + 1, job.width - 1);
  const int y1 = min(y0 + 1, job.height - 1);
  const float fx = sx - static_cast<float>(x0);
  const float fy = sy - static_cast<float>(y0);
  const size_t pitch = static_cast<size_t>(job.width) * 3;
  const uint8_t* src = arena + job.source_offset;
  const uint8_t* r0 = src + static_cast<size_t>(y0) * pitch;
  const uint8_t* r1 = src + static_cast<size_t>(y1) * pitch;
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    const float top = r0[x0 * 3 + c] + fx * (r0[x1 * 3 + c] - r0[x0 * 3 + c]);
    const float bottom = r1[x0 * 3 + c] + fx * (r1[x1 * 3 + c] - r1[x0 * 3 + c]);
    const float v = top + fy * (bottom - top);
    dst[c * plane] = static_cast<uint8_t>(fminf(fmaxf(v + 0.5f, 0.0f), 255.0f));
  }
}

}  // namespace

cudaError_t LaunchResampleCrops(const uint8_t* arena, const ResampleJob* jobs, int count,
                                int out_height, int out_width, uint8_t* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const dim3 grid((out_height * out_width + kThreads - 1) / kThreads, count);
  ResampleCropsKernel<<<grid, kThreads, 0, stream>>>(arena, jobs, out_height, out_width, out);
  return cudaGetLastError();
}

}  // namespace ringpilot::data::cuda
