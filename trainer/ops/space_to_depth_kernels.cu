#include "trainer/ops/space_to_depth_kernels.h"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::space_to_depth {
namespace {

constexpr int kThreads = 256;

using cuda_elements::Vec;

// One thread per output pixel (n, Y, X): gathers its 2x2 input pixels' channels and
// writes the block's 4 * block_channels values as 16-byte vectors. 32-bit indices (the
// launcher checks they fit): 64-bit division would dominate a pass this light.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const T* __restrict__ x, T* __restrict__ out, int32_t n, int32_t h, int32_t w,
                  int32_t c, int32_t rows, int32_t cols, int32_t block_channels, int32_t padding) {
  constexpr int kVec = 16 / sizeof(T);
  const int32_t pixel =
      static_cast<int32_t>(blockIdx.x) * kThreads + static_cast<int32_t>(threadIdx.x);
  if (pixel >= n * rows * cols) return;
  const int32_t col = pixel % cols;
  const int32_t t = pixel / cols;
  const int32_t row = t % rows;
  const int32_t image = t / rows;
  const int32_t width = 4 * block_channels;
  T* dst = out + static_cast<int64_t>(pixel) * width;
  for (int32_t k0 = 0; k0 < width; k0 += kVec) {
    Vec<T, kVec> v;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int32_t k = k0 + j;
      const int32_t quadrant = k / block_channels, ch = k - quadrant * block_channels;
      const int32_t iy = 2 * row + (quadrant >> 1) - padding;
      const int32_t ix = 2 * col + (quadrant & 1) - padding;
      const bool inside = ch < c && iy >= 0 && iy < h && ix >= 0 && ix < w;
      v.v[j] = inside ? x[(static_cast<int64_t>(image * h + iy) * w + ix) * c + ch]
                      : cuda_elements::FromFloat<T>(0.f);
    }
    *reinterpret_cast<Vec<T, kVec>*>(dst + k0) = v;
  }
}

template <typename T>
void Launch(const void* x, void* out, const Shape& s, cudaStream_t stream) {
  const int64_t pixels = s.n * s.rows * s.cols;
  const auto blocks = static_cast<unsigned>((pixels + kThreads - 1) / kThreads);
  ForwardKernel<T><<<blocks, kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<T*>(out), static_cast<int32_t>(s.n),
      static_cast<int32_t>(s.h), static_cast<int32_t>(s.w), static_cast<int32_t>(s.c),
      static_cast<int32_t>(s.rows), static_cast<int32_t>(s.cols),
      static_cast<int32_t>(s.block_channels), static_cast<int32_t>(s.padding));
}

}  // namespace

const char* Forward(const void* x, void* out, const Shape& s, ElementType dtype,
                    cudaStream_t stream) {
  if (x == nullptr || out == nullptr) return "space_to_depth: null pointer";
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return "space_to_depth: pointers must be 16-byte aligned";
  }
  if (s.n <= 0 || s.h <= 0 || s.w <= 0 || s.c <= 0 || s.rows <= 0 || s.cols <= 0 || s.padding < 0 ||
      s.block_channels < s.c || s.block_channels % 2 != 0) {
    return "space_to_depth: bad shape";
  }
  const int64_t limit = (int64_t{1} << 31) - kThreads;
  if (s.n * s.rows * s.cols >= limit || s.n * s.h * s.w * s.c >= limit || 2 * s.rows + 2 >= limit ||
      2 * s.cols + 2 >= limit) {
    return "space_to_depth: more than 2^31 elements";
  }
  if (dtype == ElementType::kFloat32) {
    Launch<float>(x, out, s, stream);
  } else if (dtype == ElementType::kBFloat16) {
    Launch<__nv_bfloat16>(x, out, s, stream);
  } else {
    return "space_to_depth: float32 or bfloat16 only";
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "space_to_depth: launch failed";
}

}  // namespace ringpilot::trainer::ops::space_to_depth
