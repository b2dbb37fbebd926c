#include "trainer/ops/max_pool_kernels.h"

#include <cstdint>
#include <initializer_list>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::max_pool {
namespace {

constexpr int kThreads = 256;

using cuda_elements::AlignedTo;
using cuda_elements::FromFloat;
using cuda_elements::ToFloat;
using cuda_elements::Vec;

template <int VEC>
struct alignas(VEC) Offsets {
  uint8_t v[VEC];
};

// The shape in the kernels' index type: 32-bit wherever every index fits, because 64-bit
// division and modulo are emulated (tens of instructions each), and with the five of them a
// thread does, the pool's backward was bound by integer arithmetic at 5.5x its HBM floor.
template <typename Index>
struct IndexShape {
  Index n, h, w, c, oh, ow, kernel, stride, padding;
};

template <typename Index>
IndexShape<Index> ToIndex(const Shape& s) {
  return {
      static_cast<Index>(s.n),      static_cast<Index>(s.h),      static_cast<Index>(s.w),
      static_cast<Index>(s.c),      static_cast<Index>(s.oh),     static_cast<Index>(s.ow),
      static_cast<Index>(s.kernel), static_cast<Index>(s.stride), static_cast<Index>(s.padding)};
}

// This thread's element of an [n, rows, cols, channels / VEC] grid; false past its end.
template <typename Index>
struct Pixel {
  Index n, row, col, group;
};

template <int VEC, typename Index>
__device__ __forceinline__ bool ThreadPixel(Index n, Index rows, Index cols, Index c,
                                            Pixel<Index>& px) {
  const Index groups = c / VEC;
  const Index i = static_cast<Index>(blockIdx.x) * kThreads + static_cast<Index>(threadIdx.x);
  if (i >= n * rows * cols * groups) return false;
  px.group = i % groups;
  Index t = i / groups;
  px.col = t % cols;
  t /= cols;
  px.row = t % rows;
  px.n = t / rows;
  return true;
}

// One thread per (n, oh, ow, group of VEC channels).
template <typename T, int VEC, typename Index>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ offset,
                  IndexShape<Index> s) {
  Pixel<Index> px;
  if (!ThreadPixel<VEC>(s.n, s.oh, s.ow, s.c, px)) return;
  const Index n = px.n, oh = px.row, ow = px.col, g = px.group;
  const Index h0 = oh * s.stride - s.padding, w0 = ow * s.stride - s.padding;
  const Index hs = max(h0, Index{0}), he = min(h0 + s.kernel, s.h);
  const Index ws = max(w0, Index{0}), we = min(w0 + s.kernel, s.w);
  float best[VEC];
  Offsets<VEC> arg;
  const auto first = static_cast<uint8_t>((hs - h0) * s.kernel + (ws - w0));
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    best[k] = -INFINITY;
    arg.v[k] = first;
  }
  const T* base = x + (n * s.h * s.w) * s.c + g * VEC;
  for (Index ih = hs; ih < he; ++ih) {
    for (Index iw = ws; iw < we; ++iw) {
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
  const Index o = ((n * s.oh + oh) * s.ow + ow) * s.c + g * VEC;
  *reinterpret_cast<Vec<T, VEC>*>(y + o) = out;
  *reinterpret_cast<Offsets<VEC>*>(offset + o) = arg;
}

// First and one-past-last output index whose window covers input index `in` (ATen's
// p_start / p_end for dilation 1).
template <typename Index>
__device__ __forceinline__ Index WindowsFrom(Index in, const IndexShape<Index>& s) {
  return in + s.padding < s.kernel ? 0 : (in + s.padding - s.kernel) / s.stride + 1;
}
template <typename Index>
__device__ __forceinline__ Index WindowsTo(Index in, Index out_size, const IndexShape<Index>& s) {
  return min((in + s.padding) / s.stride + 1, out_size);
}

// One thread per (n, ih, iw, group of VEC channels): gathers from the windows covering
// the input element, so every dx element is written once, without atomics.
template <typename T, int VEC, typename Index>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const T* __restrict__ dy, const uint8_t* __restrict__ offset, T* __restrict__ dx,
                   IndexShape<Index> s) {
  Pixel<Index> px;
  if (!ThreadPixel<VEC>(s.n, s.h, s.w, s.c, px)) return;
  const Index n = px.n, ih = px.row, iw = px.col, g = px.group;
  float acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = 0.f;
  const Index oh_end = WindowsTo(ih, s.oh, s), ow_end = WindowsTo(iw, s.ow, s);
  for (Index oh = WindowsFrom(ih, s); oh < oh_end; ++oh) {
    for (Index ow = WindowsFrom(iw, s); ow < ow_end; ++ow) {
      const Index o = ((n * s.oh + oh) * s.ow + ow) * s.c + g * VEC;
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
  for (const void* p : pointers) ok = ok && AlignedTo(p, 16);
  return ok ? kWide : 1;
}

unsigned Blocks(int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

// 32-bit indices when the larger of the two tensors has fewer than 2^31 - kThreads elements
// (every index a kernel forms, a thread's past the end included, is below that), else 64-bit.
bool FitsInt32(const Shape& s) {
  const int64_t largest = s.n * s.c * (s.h * s.w > s.oh * s.ow ? s.h * s.w : s.oh * s.ow);
  return largest < (int64_t{1} << 31) - kThreads;
}

template <typename T, int VEC>
void LaunchForwardAs(const T* x, T* y, uint8_t* offset, const Shape& s, cudaStream_t stream) {
  const unsigned blocks = Blocks(s.n * s.oh * s.ow * s.c / VEC);
  if (FitsInt32(s)) {
    ForwardKernel<T, VEC, int32_t>
        <<<blocks, kThreads, 0, stream>>>(x, y, offset, ToIndex<int32_t>(s));
  } else {
    ForwardKernel<T, VEC, int64_t>
        <<<blocks, kThreads, 0, stream>>>(x, y, offset, ToIndex<int64_t>(s));
  }
}

template <typename T, int VEC>
void LaunchBackwardAs(const T* dy, const uint8_t* offset, T* dx, const Shape& s,
                      cudaStream_t stream) {
  const unsigned blocks = Blocks(s.n * s.h * s.w * s.c / VEC);
  if (FitsInt32(s)) {
    BackwardKernel<T, VEC, int32_t>
        <<<blocks, kThreads, 0, stream>>>(dy, offset, dx, ToIndex<int32_t>(s));
  } else {
    BackwardKernel<T, VEC, int64_t>
        <<<blocks, kThreads, 0, stream>>>(dy, offset, dx, ToIndex<int64_t>(s));
  }
}

template <typename T>
void LaunchForward(const void* x, void* y, uint8_t* offset, const Shape& s, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  const auto* in = static_cast<const T*>(x);
  auto* out = static_cast<T*>(y);
  if (VectorWidth<T>(s, {x, y, offset}) == kWide &&
      reinterpret_cast<uintptr_t>(offset) % kWide == 0) {
    LaunchForwardAs<T, kWide>(in, out, offset, s, stream);
  } else {
    LaunchForwardAs<T, 1>(in, out, offset, s, stream);
  }
}

template <typename T>
void LaunchBackward(const void* dy, const uint8_t* offset, void* dx, const Shape& s,
                    cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  const auto* g = static_cast<const T*>(dy);
  auto* out = static_cast<T*>(dx);
  if (VectorWidth<T>(s, {dy, dx}) == kWide && reinterpret_cast<uintptr_t>(offset) % kWide == 0) {
    LaunchBackwardAs<T, kWide>(g, offset, out, s, stream);
  } else {
    LaunchBackwardAs<T, 1>(g, offset, out, s, stream);
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
