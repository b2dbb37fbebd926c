#include "trainer/ops/gelu_kernels.h"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "trainer/ops/column_sum_device.cuh"
#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::gelu {
namespace {

using column_sum::detail::ChunkPartials;
using column_sum::detail::kBlockX;
using column_sum::detail::kBlockY;
using column_sum::detail::MakePlan;
using column_sum::detail::Outputs;
using column_sum::detail::Plan;
using cuda_elements::AlignedTo;
using cuda_elements::FromFloat;
using cuda_elements::ToFloat;
using cuda_elements::Vec;

// d/dx [x * Phi(x)] * dy in float32, term for term as ATen's CUDA gelu_backward evaluates
// it, so the rounded results agree with at::gelu_backward.
__device__ __forceinline__ float GeluGrad(float dy, float x) {
  constexpr float kAlpha = 0.70710678118654752440f;  // 1 / sqrt(2)
  constexpr float kBeta = 0.39894228040143267794f;   // 1 / sqrt(2 pi)
  const float cdf = 0.5f * (1.0f + erff(x * kAlpha));
  const float pdf = expf(-0.5f * x * x) * kBeta;
  return dy * (cdf + x * pdf);
}

// ChunkPartials's rows: writes grad_input for row r's columns [c0, c0 + VEC) and adds the
// rounded values (what a later ColumnSum over grad_input would read) to the sums.
template <typename T, int VEC>
struct GeluBackwardRows {
  static constexpr int kAccumulators = 1, kVec = VEC;
  const T* grad_out;
  const T* input;
  T* grad_input;
  int64_t cols;
  __device__ __forceinline__ void Add(int64_t r, int64_t c0, float (&acc)[1][VEC]) const {
    const int64_t e = r * cols + c0;
    const Vec<T, VEC> dy = *reinterpret_cast<const Vec<T, VEC>*>(grad_out + e);
    const Vec<T, VEC> x = *reinterpret_cast<const Vec<T, VEC>*>(input + e);
    Vec<T, VEC> dx;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      dx.v[i] = FromFloat<T>(GeluGrad(ToFloat(dy.v[i]), ToFloat(x.v[i])));
      acc[0][i] += ToFloat(dx.v[i]);
    }
    *reinterpret_cast<Vec<T, VEC>*>(grad_input + e) = dx;
  }
};

// 16-byte accesses when every row start of all three matrices allows them, as
// column_sum's plan for one matrix: its chunking (so its order of summation) follows.
int VectorWidth(const BackwardArgs& a) {
  const int bytes = ElementBytes(a.dtype);
  const int wide = 16 / bytes;
  if (a.cols % wide == 0 && AlignedTo(a.grad_out, 16) && AlignedTo(a.input, 16) &&
      AlignedTo(a.grad_input, 16)) {
    return wide;
  }
  return 1;
}

template <typename T, int VEC>
void LaunchRows(const BackwardArgs& a, const Plan& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.x_blocks), static_cast<unsigned>(p.chunks));
  const GeluBackwardRows<T, VEC> rows{static_cast<const T*>(a.grad_out),
                                      static_cast<const T*>(a.input), static_cast<T*>(a.grad_input),
                                      a.cols};
  ChunkPartials<<<grid, dim3(kBlockX, kBlockY), 0, stream>>>(rows, a.rows, a.cols, p.rows_per_chunk,
                                                             Outputs<1>{{a.workspace}});
}

template <typename T>
void Launch(const BackwardArgs& a, const Plan& p, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  if (p.vec == kWide) {
    LaunchRows<T, kWide>(a, p, stream);
  } else {
    LaunchRows<T, 1>(a, p, stream);
  }
}

}  // namespace

int64_t WorkspaceFloats(const BackwardArgs& a) {
  if (a.rows <= 0 || a.cols <= 0) return 0;
  return MakePlan(a.rows, a.cols, VectorWidth(a)).chunks * a.cols;
}

const char* Backward(const BackwardArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0 || a.grad_out == nullptr || a.input == nullptr ||
      a.grad_input == nullptr || a.workspace == nullptr) {
    return "gelu: null pointer or empty shape";
  }
  if (a.dtype == ElementType::kFloat32) return "gelu: bfloat16 or float16 only";
  const Plan p = MakePlan(a.rows, a.cols, VectorWidth(a));
  if (a.dtype == ElementType::kBFloat16) {
    Launch<__nv_bfloat16>(a, p, stream);
  } else {
    Launch<__half>(a, p, stream);
  }
  if (cudaGetLastError() != cudaSuccess) return "gelu: backward launch failed";
  return column_sum::SumPartialsTo(a.workspace, p.chunks, a.cols, a.ranges, a.range_count, stream);
}

}  // namespace ringpilot::trainer::ops::gelu
