#include "trainer/ops/adamw_kernels.h"

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::adamw {
namespace {

using cuda_elements::AlignedTo;
using cuda_elements::FromFloat;

constexpr int kThreads = 256;
// Elements per block: 16 float4 groups per thread. Small enough that BERT-base's 110M
// parameters make thousands of blocks (no tail worth the name), large enough that a
// block's setup (finding its tensor, the bias corrections) is noise.
constexpr int64_t kChunk = int64_t{kThreads} * 4 * 16;

struct Launch {
  TensorSet sets[kMaxSetsPerLaunch];
  int64_t first_chunk[kMaxSetsPerLaunch + 1];  ///< set k's chunks: [first_chunk[k], [k + 1])
  int count = 0;
};

struct Scalars {
  float lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2_sqrt;
};

// at::native's adam_math for ADAMW, one element: the same operations in the same order
// (the fma calls explicit as ATen writes them, the rest as ATen's expressions).
__device__ __forceinline__ void Update(float& param, float grad, float& exp_avg, float& exp_avg_sq,
                                       const Scalars& s) {
  if (s.weight_decay != 0) param -= s.lr * s.weight_decay * param;
  exp_avg = fmaf(s.beta1, exp_avg, fmaf(-s.beta1, grad, grad));
  exp_avg_sq = fmaf(s.beta2, exp_avg_sq, fmaf(-s.beta2, grad * grad, grad * grad));
  const float step_size = s.lr / s.bias_correction1;
  const float denom = (sqrtf(exp_avg_sq) / s.bias_correction2_sqrt) + s.eps;
  param -= step_size * exp_avg / denom;
}

template <typename C>
__global__ void __launch_bounds__(kThreads) StepKernel(Launch l, Hyper h) {
  const int64_t chunk = blockIdx.x;
  int k = 0;
  while (chunk >= l.first_chunk[k + 1]) ++k;  // at most kMaxSetsPerLaunch steps
  const TensorSet& t = l.sets[k];
  Scalars s;
  s.lr = h.lr_ptr != nullptr ? *h.lr_ptr : static_cast<float>(h.lr);
  s.beta1 = static_cast<float>(h.beta1);
  s.beta2 = static_cast<float>(h.beta2);
  s.weight_decay = static_cast<float>(h.weight_decay);
  s.eps = static_cast<float>(h.eps);
  const float step = *t.step;
  s.bias_correction1 = 1 - powf(s.beta1, step);
  s.bias_correction2_sqrt = sqrtf(1 - powf(s.beta2, step));

  const int64_t begin = (chunk - l.first_chunk[k]) * kChunk;
  const int64_t end = min(t.numel, begin + kChunk);
  C* copy = static_cast<C*>(t.copy);
  const bool vector = t.numel % 4 == 0 && AlignedTo(t.param, 16) && AlignedTo(t.grad, 16) &&
                      AlignedTo(t.exp_avg, 16) && AlignedTo(t.exp_avg_sq, 16) &&
                      (copy == nullptr || AlignedTo(copy, 8));
  if (vector) {
    for (int64_t i = begin + int64_t{threadIdx.x} * 4; i < end; i += int64_t{kThreads} * 4) {
      float4 p = *reinterpret_cast<const float4*>(t.param + i);
      const float4 g = *reinterpret_cast<const float4*>(t.grad + i);
      float4 m = *reinterpret_cast<const float4*>(t.exp_avg + i);
      float4 v = *reinterpret_cast<const float4*>(t.exp_avg_sq + i);
      Update(p.x, g.x, m.x, v.x, s);
      Update(p.y, g.y, m.y, v.y, s);
      Update(p.z, g.z, m.z, v.z, s);
      Update(p.w, g.w, m.w, v.w, s);
      *reinterpret_cast<float4*>(t.param + i) = p;
      *reinterpret_cast<float4*>(t.exp_avg + i) = m;
      *reinterpret_cast<float4*>(t.exp_avg_sq + i) = v;
      if (copy != nullptr) {
        struct alignas(8) Four {
          C v[4];
        } c{{FromFloat<C>(p.x), FromFloat<C>(p.y), FromFloat<C>(p.z), FromFloat<C>(p.w)}};
        *reinterpret_cast<Four*>(copy + i) = c;
      }
    }
  } else {
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      float p = t.param[i], m = t.exp_avg[i], v = t.exp_avg_sq[i];
      Update(p, t.grad[i], m, v, s);
      t.param[i] = p;
      t.exp_avg[i] = m;
      t.exp_avg_sq[i] = v;
      if (copy != nullptr) copy[i] = FromFloat<C>(p);
    }
  }
}

}  // namespace

const char* Step(const TensorSet* sets, int count, ElementType copy_dtype, const Hyper& hyper,
                 cudaStream_t stream) {
  if (count < 0 || (count > 0 && sets == nullptr)) return "adamw: null or negative set list";
  if (copy_dtype == ElementType::kFloat32) return "adamw: copies are bfloat16 or float16";
  for (int k = 0; k < count; ++k) {
    const TensorSet& t = sets[k];
    if (t.numel < 0 ||
        (t.numel > 0 && (t.param == nullptr || t.grad == nullptr || t.exp_avg == nullptr ||
                         t.exp_avg_sq == nullptr || t.step == nullptr))) {
      return "adamw: a set with a null pointer or a negative size";
    }
  }
  for (int first = 0; first < count; first += kMaxSetsPerLaunch) {
    Launch l;
    l.first_chunk[0] = 0;
    for (int k = first; k < std::min(count, first + kMaxSetsPerLaunch); ++k) {
      if (sets[k].numel == 0) continue;  // nothing to update, and no chunk to find it by
      l.sets[l.count] = sets[k];
      l.first_chunk[l.count + 1] = l.first_chunk[l.count] + (sets[k].numel + kChunk - 1) / kChunk;
      ++l.count;
    }
    const int64_t blocks = l.first_chunk[l.count];
    if (blocks == 0) continue;
    if (blocks > INT32_MAX) return "adamw: too many elements for one launch";
    if (copy_dtype == ElementType::kBFloat16) {
      StepKernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(l, hyper);
    } else {
      StepKernel<__half><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(l, hyper);
    }
    if (cudaGetLastError() != cudaSuccess) return "adamw: kernel launch failed";
  }
  return nullptr;
}

}  // namespace ringpilot::trainer::ops::adamw
