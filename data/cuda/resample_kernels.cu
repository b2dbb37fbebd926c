#include "data/cuda/resample_kernels.h"

namespace ringpilot::data::cuda {
namespace {

struct Rgb {
  float r, g, b;
};

__device__ __forceinline__ float Clamp255(float v) { return fminf(fmaxf(v, 0.0f), 255.0f); }

// A chroma plane at luma pixel (x, y): bilinear at the centred chroma position, which is
// libjpeg's fancy upsampling (weights 3/4 and 1/4 for 2x), rounded to 8 bits as it does.
__device__ __forceinline__ float Chroma(const uint8_t* plane, int pitch, int cw, int ch, int fx,
                                        int fy, int x, int y) {
  float cx = (static_cast<float>(x) + 0.5f) / static_cast<float>(fx) - 0.5f;
  float cy = (static_cast<float>(y) + 0.5f) / static_cast<float>(fy) - 0.5f;
  cx = fminf(fmaxf(cx, 0.0f), static_cast<float>(cw - 1));
  cy = fminf(fmaxf(cy, 0.0f), static_cast<float>(ch - 1));
  const int x0 = static_cast<int>(cx);
  const int y0 = static_cast<int>(cy);
  const int x1 = min(x0 + 1, cw - 1);
  const int y1 = min(y0 + 1, ch - 1);
  const float ax = cx - static_cast<float>(x0);
  const float ay = cy - static_cast<float>(y0);
  const uint8_t* r0 = plane + static_cast<size_t>(y0) * pitch;
  const uint8_t* r1 = plane + static_cast<size_t>(y1) * pitch;
  const float top = r0[x0] + ax * (r0[x1] - r0[x0]);
  const float bottom = r1[x0] + ax * (r1[x1] - r1[x0]);
  return floorf(top + ay * (bottom - top) + 0.5f);
}

// The 8-bit RGB a decoder to RGB would have produced for source pixel (x, y).
__device__ __forceinline__ Rgb SourcePixel(const uint8_t* arena, const ResampleJob& job, int x,
                                           int y) {
  switch (job.layout) {
    case SourceLayout::kInterleavedRgb: {
      const uint8_t* p =
          arena + job.plane_offset[0] + static_cast<size_t>(y) * job.pitch[0] + x * 3;
      return {static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2])};
    }
    case SourceLayout::kPlanarRgb: {
      float v[3];
#pragma unroll
      for (int c = 0; c < 3; ++c) {
        v[c] = arena[job.plane_offset[c] + static_cast<size_t>(y) * job.pitch[c] + x];
      }
      return {v[0], v[1], v[2]};
    }
    case SourceLayout::kGrey: {
      const float v = arena[job.plane_offset[0] + static_cast<size_t>(y) * job.pitch[0] + x];
      return {v, v, v};
    }
    default: {  // kYCbCr
      const float luma = arena[job.plane_offset[0] + static_cast<size_t>(y) * job.pitch[0] + x];
      const float cb = Chroma(arena + job.plane_offset[1], job.pitch[1], job.chroma_width,
                              job.chroma_height, job.chroma_x, job.chroma_y, x, y) -
                       128.0f;
      const float cr = Chroma(arena + job.plane_offset[2], job.pitch[2], job.chroma_width,
                              job.chroma_height, job.chroma_x, job.chroma_y, x, y) -
                       128.0f;
      // jdcolor.c: each chroma term rounded on its own, added to Y, then range-limited.
      return {Clamp255(luma + floorf(1.40200f * cr + 0.5f)),
              Clamp255(luma + floorf(-0.34414f * cb - 0.71414f * cr + 0.5f)),
              Clamp255(luma + floorf(1.77200f * cb + 0.5f))};
    }
  }
}

// One thread per output pixel; blockIdx.y is the image. Sources are small (ImageNet-sized
// images) and read with spatial locality, so plain loads through L1/L2 suffice.
__global__ void ResampleCropsKernel(const uint8_t* __restrict__ arena,
                                    const ResampleJob* __restrict__ jobs, int out_height,
                                    int out_width, uint8_t* __restrict__ out) {
  const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
  const int plane = out_height * out_width;
  if (pixel >= plane) return;
  const ResampleJob job = jobs[blockIdx.y];
  if (job.layout == SourceLayout::kWritten) return;
  uint8_t* dst = out + static_cast<size_t>(blockIdx.y) * 3 * plane + pixel;
  if (job.layout == SourceLayout::kNone || job.width == 0) {
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
  const Rgb p00 = SourcePixel(arena, job, x0, y0);
  const Rgb p01 = SourcePixel(arena, job, x1, y0);
  const Rgb p10 = SourcePixel(arena, job, x0, y1);
  const Rgb p11 = SourcePixel(arena, job, x1, y1);
  const float a[3] = {p00.r, p00.g, p00.b}, b[3] = {p01.r, p01.g, p01.b};
  const float c[3] = {p10.r, p10.g, p10.b}, d[3] = {p11.r, p11.g, p11.b};
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    const float top = a[k] + fx * (b[k] - a[k]);
    const float bottom = c[k] + fx * (d[k] - c[k]);
    const float v = top + fy * (bottom - top);
    dst[k * plane] = static_cast<uint8_t>(fminf(fmaxf(v + 0.5f, 0.0f), 255.0f));
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
