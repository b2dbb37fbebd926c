#include "trainer/ops/max_pool_kernels.h"

#include <cstdint>
#include <initializer_list>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::max_pool {
namespace {

constexpr int kThreads = 256;

using cuda_elements::FromFloat;
using cuda_elements::ToFloat;
using cuda_elements::Vec;

template <int VEC>
struct alignas(VEC) Offsets {
  uint8_t v[VEC];
};

// This thread's element of an [n, rows, cols, channels / VEC] grid; false past its end.
struct Pixel {
  int64_t n, row, col, group;
};

template <int VEC>
__device__ __forceinline__ bool ThreadPixel(int64_t n, int64_t rows, int64_t cols, int64_t c,
                                            Pixel& px) {
  const int64_t groups = c / VEC;
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i >= n * rows * cols * groups) return false;
  px.group = i % groups;
  int64_t t = i / groups;
  px.col = t % cols;
  t /= cols;
  px.row = t % rows;
  px.n = t / rows;
  return true;
}

// One thread per (n, oh, ow, group of VEC channels).
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ offset,
                  Shape s) {
  Pixel px;
  if (!ThreadPixel<VEC>(s.n, s.oh, s.ow, s.c, px)) return;
  const int64_t n = px.n, oh = px.row, ow = px.col, g = px.group;
  const int64_t h0 = oh * s.stride - s.padding, w0 = ow * s.stride - s.padding;
  const int64_t hs = max(h0, int64_t{0}), he = min(h0 + s.kernel, s.h);
  const int64_t ws = max(w0, int64_t{0}), we = min(w0 + s.kernel, s.w);
  float best[VEC];
  Offsets<VEC> arg;
  const auto first = static_cast<uint8_t>((hs - h0) * s.kernel + (ws - w0));
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    best[k] = -INFINITY;
    arg.v[k] = first;
  }
  const T* base = x + (n * s.h * s.w) * s.c + g * VEC;
  for (int64_t ih = hs; ih < he; ++ih) {
    for (int64_t iw = ws; iw < we; ++iw) {
      const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(base + (ih * s.w + iw) * s.c);
      const auto o = static_cast<uint8_t>((ih - h0) * s.kernel + (iw - w0));
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float f = ToFloat(v.v[k]);
        if (f > best[k] || isnan(f)) {
          best[k] = f;
          arg.v[k] = o;
        }
      }
    }
  }
  Vec<T, VEC> out;
#pragma unroll
  for (int k = 0; k < VEC; ++k) out.v[k] = FromFloat<T>(best[k]);
  const int64_t o = ((n * s.oh + oh) * s.ow + ow) * s.c + g * VEC;
  *reinterpret_cast<Vec<T, VEC>*>(y + o) = out;
  *reinterpret_cast<Offsets<VEC>*>(offset + o) = arg;
}

// First and one-past-last output index whose window covers input index `in` (ATen's
// p_start / p_end for dilation 1).
__device__ __forceinline__ int64_t WindowsFrom(int64_t in, const Shape& s) {
  return in + s.padding < s.kernel ? 0 : (in + s.padding - s.kernel) / s.stride + 1;
}
__device__ __forceinline__ int64_t WindowsTo(int64_t in, int64_t out_size, const Shape& s) {
  return min((in + s.padding) / s.stride + 1, out_size);
}

// One thread per (n, ih, iw, group of VEC channels): gathers from the windows covering
// the input element, so every dx element is written once, without atomics.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const T* __restrict__ dy, const uint8_t* __restrict__ offset, T* __restrict__ dx,
                   Shape s) {
  Pixel px;
  if (!ThreadPixel<VEC>(s.n, s.h, s.w, s.c, px)) return;
  const int64_t n = px.n, ih = px.row, iw = px.col, g = px.group;
  float acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.f;
  const int64_t oh_end = WindowsTo(ih, s.oh, s), ow_end = WindowsTo(iw, s.ow, s);
  for (int64_t oh = WindowsFrom(ih, s); oh < oh_end; ++oh) {
    for (int64_t ow = WindowsFrom(iw, s); ow < ow_end; ++ow) {
      const int64_t o = ((n * s.oh + oh) * s.ow + ow) * s.c + g * VEC;
      const auto mine = static_cast<uint8_t>((ih - (oh * s.stride - s.padding)) * s.kernel +
                                             (iw - (ow * s.stride - s.padding)));
      const Offsets<VEC> arg = *reinterpret_cast<const Offsets<VEC>*>(offset + o);
      const Vec<T, VEC> g_out = *reinterpret_cast<const Vec<T, VEC>*>(dy + o);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if (arg.v[k] == mine) acc[k] += ToFloat(g_out.v[k]);
      }
    }
  }
  Vec<T, VEC> out;
#pragma unroll
  for (int k = 0; k < VEC; ++k) out.v[k] = FromFloat<T>(acc[k]);
  *reinterpret_cast<Vec<T, VEC>*>(dx + ((n * s.h + ih) * s.w + iw) * s.c + g * VEC) = out;
}

const char* Check(const Shape& s) {
  if (s.n <= 0 || s.h <= 0 || s.w <= 0 || s.c <= 0 || s.kernel <= 0 || s.stride <= 0 ||
      s.padding < 0 || s.kernel * s.kernel > 255 || 2 * s.padding > s.kernel) {
    return "max_pool: bad shape, window, stride or padding";
  }
  if (s.oh != (s.h + 2 * s.padding - s.kernel) / s.stride + 1 ||
      s.ow != (s.w + 2 * s.padding - s.kernel) / s.stride + 1 || s.oh <= 0 || s.ow <= 0) {
    return "max_pool: output size does not match the input, window and stride";
  }
  return nullptr;
}

// 16-byte vectors where every pointer and the channel count allow, else one channel.
template <typename T>
int VectorWidth(const Shape& s, std::initializer_list<const void*> pointers) {
  constexpr int kWide = 16 / sizeof(T);
  bool ok = s.c % kWide == 0;
  for (const void* p : pointers) ok = ok && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return ok ? kWide : 1;
}

unsigned Blocks(int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

template <typename T>
void LaunchForward(const void* x, void* y, uint8_t* offset, const Shape& s, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  const auto* in = static_cast<const T*>(x);
  auto* out = static_cast<T*>(y);
  if (VectorWidth<T>(s, {x, y, offset}) == kWide &&
      reinterpret_cast<uintptr_t>(offset) % kWide == 0) {
    ForwardKernel<T, kWide>
        <<<Blocks(s.n * s.oh * s.ow * s.c / kWide), kThreads, 0, stream>>>(in, out, offset, s);
  } else {
    ForwardKernel<T, 1>
        <<<Blocks(s.n * s.oh * s.ow * s.c), kThreads, 0, stream>>>(in, out, offset, s);
  }
}

template <typename T>
void LaunchBackward(const void* dy, const uint8_t* offset, void* dx, const Shape& s,
                    cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  const auto* g = static_cast<const T*>(dy);
  auto* out = static_cast<T*>(dx);
  if (VectorWidth<T>(s, {dy, dx}) == kWide && reinterpret_cast<uintptr_t>(offset) % kWide == 0) {
    BackwardKernel<T, kWide>
        <<<Blocks(s.n * s.h * s.w * s.c / kWide), kThreads, 0, stream>>>(g, offset, out, s);
  } else {
    BackwardKernel<T, 1><<<Blocks(s.n * s.h * s.w * s.c), kThreads, 0, stream>>>(g, offset, out, s);
  }
}

}  // namespace

const char* Forward(const void* x, void* y, uint8_t* offset, const Shape& shape, ElementType dtype,
                    cudaStream_t stream) {
  if (x == nullptr || y == nullptr || offset == nullptr) return "max_pool: null pointer";
  if (const char* error = Check(shape)) return error;
  if (dtype == ElementType::kFloat32) {
    LaunchForward<float>(x, y, offset, shape, stream);
  } else {
    LaunchForward<__nv_bfloat16>(x, y, offset, shape, stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "max_pool: forward launch failed";
}

const char* Backward(const void* dy, const uint8_t* offset, void* dx, const Shape& shape,
                     ElementType dtype, cudaStream_t stream) {
  if (dy == nullptr || dx == nullptr || offset == nullptr) return "max_pool: null pointer";
  if (const char* error = Check(shape)) return error;
  if (dtype == ElementType::kFloat32) {
    LaunchBackward<float>(dy, offset, dx, shape, stream);
  } else {
    LaunchBackward<__nv_bfloat16>(dy, offset, dx, shape, stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "max_pool: backward launch failed";
}

}  // namespace ringpilot::trainer::ops::max_pool
