#include "trainer/ops/cross_entropy_kernels.h"

#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::cross_entropy {
namespace {

using cuda_elements::AlignedTo;
using cuda_elements::FromFloat;
using cuda_elements::kWarp;
using cuda_elements::ToFloat;
using cuda_elements::Vec;

// One block per row. 256 threads with four 16-byte loads in flight each: at 48 registers
// five blocks fit an SM, and one row's reductions and tail overlap the others' streaming
// (512 threads at 50 registers, two blocks an SM, ran at 1.8 TB/s on an H200, 2026-11-30).
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
constexpr int kUnroll = 4;
// Resident row-loss blocks an SM the kernel is compiled for (a register cap).
constexpr int kRowBlocksPerSm = 5;
constexpr int kMeanThreads = 1024;
// Exponentials as exp2 of pre-scaled values: one FFMA and one MUFU.EX2 an element.
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// A running softmax denominator in base 2: sum of 2^(y - max) over the values y = x log2(e)
// seen, with their max.
struct MaxSum {
  float max;
  float sum;
};

// a and b merged. Symmetric to the bit (max and + commute), so a butterfly leaves every
// lane with the same value. -inf maxima (only -inf seen: padded vocabulary columns) add
// nothing rather than 2^(-inf - -inf) = NaN.
__device__ __forceinline__ MaxSum Merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.sum * exp2f(a.max - m) + b.sum * exp2f(b.max - m)};
}

template <int VEC>
__device__ __forceinline__ MaxSum Add(MaxSum acc, const float (&y)[VEC]) {
  float m = y[0];
#pragma unroll
  for (int i = 1; i < VEC; ++i) m = fmaxf(m, y[i]);
  if (m > acc.max) {
    acc.sum = acc.max == -INFINITY ? 0.f : acc.sum * exp2f(acc.max - m);
    acc.max = m;
  }
  if (acc.max == -INFINITY) return acc;
#pragma unroll
  for (int i = 0; i < VEC; ++i) acc.sum += exp2f(y[i] - acc.max);
  return acc;
}

// The block's MaxSum, in a fixed order (butterflies in each warp, then warp 0 over the
// warps' results), to every thread.
__device__ MaxSum BlockMerge(MaxSum v) {
  __shared__ MaxSum warps[kWarps];
  __shared__ MaxSum total;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    v = Merge(v, {__shfl_xor_sync(0xffffffffu, v.max, o), __shfl_xor_sync(0xffffffffu, v.sum, o)});
  }
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? warps[lane] : MaxSum{-INFINITY, 0.f};
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) {
      v = Merge(v,
                {__shfl_xor_sync(0xffffffffu, v.max, o), __shfl_xor_sync(0xffffffffu, v.sum, o)});
    }
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

// Vectors v0, v0 + kThreads, ... (kUnroll of them, those below `vectors`) of a row, all
// loads issued before any is used.
template <typename T, int VEC>
__device__ __forceinline__ void LoadVectors(const T* in, int64_t v0, int64_t vectors,
                                            Vec<T, VEC> (&raw)[kUnroll]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t v = v0 + int64_t{u} * kThreads;
    if (v < vectors) raw[u] = *reinterpret_cast<const Vec<T, VEC>*>(in + v * VEC);
  }
}

__device__ __forceinline__ bool Labelled(int64_t label) { return label != kIgnoreIndex; }
__device__ __forceinline__ bool Valid(int64_t label, int64_t cols) {
  return label >= 0 && label < cols;
}

// Block r: lse[r] and row_loss[r]. Thread t reads vectors t, t + kThreads, ... of VEC
// elements, kUnroll of them loaded (raw, 16 bytes each) together. The labelled
// logit is picked up by the thread that streams past it, not loaded after the reduction.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads, kRowBlocksPerSm) RowLossKernel(ForwardArgs a) {
  __shared__ float picked;
  const int64_t row = blockIdx.x;
  const T* in = static_cast<const T*>(a.logits) + row * a.ld;
  const int64_t label = a.labels[row];
  const int64_t vectors = a.cols / VEC;
  MaxSum acc{-INFINITY, 0.f};
  for (int64_t v0 = threadIdx.x; v0 < vectors; v0 += int64_t{kThreads} * kUnroll) {
    Vec<T, VEC> raw[kUnroll];
    LoadVectors<T, VEC>(in, v0, vectors, raw);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + int64_t{u} * kThreads;
      if (v >= vectors) break;
      float y[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) y[i] = ToFloat(raw[u].v[i]) * kLog2e;
      acc = Add<VEC>(acc, y);
      const int64_t offset = label - v * VEC;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        if (offset == i) picked = ToFloat(raw[u].v[i]);
      }
    }
  }
  const MaxSum total = BlockMerge(acc);  // its barriers publish `picked`
  if (threadIdx.x == 0) {
    const float lse = (total.max + log2f(total.sum)) * kLn2;
    float loss = 0.f;
    if (Valid(label, a.cols)) {
      loss = lse - picked;
    } else if (Labelled(label)) {
      loss = NAN;
    }
    a.lse[row] = lse;
    a.row_loss[row] = loss;
  }
}

// One block: the mean of row_loss over labelled rows, summed in a fixed order.
__global__ void __launch_bounds__(kMeanThreads) MeanKernel(ForwardArgs a) {
  __shared__ float sums[kMeanThreads];
  __shared__ float counts[kMeanThreads];
  float s = 0.f, c = 0.f;
  for (int64_t r = threadIdx.x; r < a.rows; r += kMeanThreads) {
    s += a.row_loss[r];
    c += Labelled(a.labels[r]) ? 1.f : 0.f;
  }
  sums[threadIdx.x] = s;
  counts[threadIdx.x] = c;
  __syncthreads();
  for (int half = kMeanThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *a.loss = sums[0] / counts[0];  // 0 / 0 = NaN when nothing is labelled, as ATen
    *a.count = counts[0];
  }
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) GradKernel(BackwardArgs a) {
  const int64_t row = blockIdx.x;
  const T* in = static_cast<const T*>(a.logits) + row * a.ld;
  T* out = static_cast<T*>(a.grad_logits) + row * a.cols;
  const int64_t label = a.labels[row];
  const float lse2 = a.lse[row] * kLog2e;
  // Ignored rows: zeros (scale 0, nothing subtracted); invalid labels: NaN.
  float scale = Labelled(label) ? *a.grad_loss / *a.count : 0.f;
  if (Labelled(label) && !Valid(label, a.cols)) scale = NAN;
  const int64_t vectors = a.cols / VEC;
  for (int64_t v0 = threadIdx.x; v0 < vectors; v0 += int64_t{kThreads} * kUnroll) {
    Vec<T, VEC> raw[kUnroll];
    LoadVectors<T, VEC>(in, v0, vectors, raw);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + int64_t{u} * kThreads;
      if (v >= vectors) break;
      Vec<T, VEC> g;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float p = exp2f(fmaf(ToFloat(raw[u].v[i]), kLog2e, -lse2));
        const float onehot = v * VEC + i == label ? 1.f : 0.f;
        g.v[i] = FromFloat<T>((p - onehot) * scale);
      }
      *reinterpret_cast<Vec<T, VEC>*>(out + v * VEC) = g;
    }
  }
}

// 16-byte accesses when the row starts allow them.
template <typename T>
bool Wide(const void* logits, int64_t cols, int64_t ld, const void* other = nullptr) {
  constexpr int kWide = 16 / sizeof(T);
  return cols % kWide == 0 && ld % kWide == 0 && AlignedTo(logits, 16) &&
         (other == nullptr || AlignedTo(other, 16));
}

template <typename T>
void LaunchForward(const ForwardArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(a.rows);
  if (Wide<T>(a.logits, a.cols, a.ld)) {
    RowLossKernel<T, 16 / sizeof(T)><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    RowLossKernel<T, 1><<<blocks, kThreads, 0, stream>>>(a);
  }
  MeanKernel<<<1, kMeanThreads, 0, stream>>>(a);
}

template <typename T>
void LaunchBackward(const BackwardArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(a.rows);
  if (Wide<T>(a.logits, a.cols, a.ld, a.grad_logits)) {
    GradKernel<T, 16 / sizeof(T)><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    GradKernel<T, 1><<<blocks, kThreads, 0, stream>>>(a);
  }
}

// The shape checks both directions share.
const char* CheckShape(const void* logits, ElementType dtype, int64_t rows, int64_t cols,
                       int64_t ld, const int64_t* labels) {
  if (rows <= 0 || cols <= 0 || ld < cols || rows > INT32_MAX) {
    return "cross_entropy: empty or unsupported shape";
  }
  if (logits == nullptr || labels == nullptr) return "cross_entropy: null pointer";
  if (dtype == ElementType::kFloat32) return "cross_entropy: bfloat16 or float16 logits only";
  if (!AlignedTo(logits, 2)) return "cross_entropy: misaligned logits";
  return nullptr;
}

}  // namespace

const char* Forward(const ForwardArgs& a, cudaStream_t stream) {
  if (const char* e = CheckShape(a.logits, a.dtype, a.rows, a.cols, a.ld, a.labels)) return e;
  if (a.lse == nullptr || a.row_loss == nullptr || a.loss == nullptr || a.count == nullptr) {
    return "cross_entropy: null pointer";
  }
  if (a.dtype == ElementType::kBFloat16) {
    LaunchForward<__nv_bfloat16>(a, stream);
  } else {
    LaunchForward<__half>(a, stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "cross_entropy: forward launch failed";
}

const char* Backward(const BackwardArgs& a, cudaStream_t stream) {
  if (const char* e = CheckShape(a.logits, a.dtype, a.rows, a.cols, a.ld, a.labels)) return e;
  if (a.lse == nullptr || a.count == nullptr || a.grad_loss == nullptr ||
      a.grad_logits == nullptr) {
    return "cross_entropy: null pointer";
  }
  if (!AlignedTo(a.grad_logits, 2)) return "cross_entropy: misaligned gradient";
  if (a.dtype == ElementType::kBFloat16) {
    LaunchBackward<__nv_bfloat16>(a, stream);
  } else {
    LaunchBackward<__half>(a, stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "cross_entropy: backward launch failed";
}

}  // namespace ringpilot::trainer::ops::cross_entropy
