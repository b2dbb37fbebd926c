// Training-mode forward of the fused BatchNorm (+ residual + ReLU): per-chunk statistics,
// their merge (running statistics, batch counter), then the normalised output (and the
// ReLU mask bits). Shared geometry and helpers: fused_batch_norm_device.cuh.
#include "trainer/ops/fused_batch_norm_kernels.h"

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "trainer/ops/fused_batch_norm_device.cuh"

namespace ringpilot::trainer::ops::fused_bn {

namespace {

using namespace detail;  // the shared helpers of fused_batch_norm_device.cuh

// Per (chunk, channel): mean and M2 of the chunk's rows (Welford per thread, Chan across
// threads).
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    StatsKernel(const T* __restrict__ x, int64_t rows, int64_t channels, int64_t rows_per_chunk,
                float* __restrict__ partial) {
  extern __shared__ float smem[];
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * VEC;
  const bool active = c0 < channels;
  float n = 0.f;
  float acc[2][VEC] = {};
  if (active) {
    const RowRange rr = ThreadRows(rows, rows_per_chunk);
    auto load = [&](int64_t o) { return Loaded<T, VEC, 1>{{LoadRaw<T, VEC>(x + o)}}; };
    auto update = [&](const Loaded<T, VEC, 1>& raw, int64_t) {
      float v[VEC];
      Unpack<T, VEC>(raw.v[0], v);
      n += 1.f;
      const float inv = 1.f / n;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float delta = v[i] - acc[0][i];
        acc[0][i] += delta * inv;
        acc[1][i] += delta * (v[i] - acc[0][i]);
      }
    };
    ForEachRow<kUnroll>(rr, rr.first * channels + c0, rr.step * channels, load, update);
  }
  BlockCombine<VEC, 2, true>(smem, n, acc);
  if (active && threadIdx.y == 0) WritePartials<VEC>(partial, channels, c0, acc);
}

__global__ void __launch_bounds__(kFinalizeX* kFinalizeY)
    StatsFinalizeKernel(const float* __restrict__ partial, int64_t chunks, int64_t rows,
                        int64_t rows_per_chunk, int64_t channels, float momentum, float eps,
                        float* __restrict__ mean, float* __restrict__ invstd,
                        float* __restrict__ running_mean, float* __restrict__ running_var,
                        int64_t* __restrict__ num_batches_tracked) {
  const int64_t c = int64_t{blockIdx.x} * kFinalizeX + threadIdx.x;
  float n;
  float acc[2][1];
  MergeChunks<true>(partial, chunks, channels, rows, rows_per_chunk, c, n, acc);
  // The module's batch counter rides on this launch instead of an add kernel of its own.
  if (num_batches_tracked != nullptr && blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    *num_batches_tracked += 1;
  }
  if (c >= channels || threadIdx.y != 0) return;
  const float var = acc[1][0] / static_cast<float>(rows);
  mean[c] = acc[0][0];
  invstd[c] = 1.f / sqrtf(var + eps);
  if (running_mean != nullptr) {
    running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * acc[0][0];
  }
  if (running_var != nullptr) {
    const float unbiased = var * static_cast<float>(static_cast<double>(rows) / (rows - 1));
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * unbiased;
  }
}

// kBits (VEC == 8 only): also one byte of ReLU mask bits per thread and row, at
// relu_bits[o / 8] for element offset o (channels % 8 == 0).
template <typename T, int VEC, bool kRelu, bool kResidual, bool kBits>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    ApplyKernel(const T* __restrict__ x, const T* __restrict__ z, T* __restrict__ y,
                uint8_t* __restrict__ relu_bits, const float* __restrict__ mean,
                const float* __restrict__ invstd, const float* __restrict__ weight,
                const float* __restrict__ bias, int64_t rows, int64_t channels,
                int64_t rows_per_chunk) {
  static_assert(!kBits || (kRelu && VEC == 8), "one mask byte per thread and row");
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= channels) return;
  float m[VEC], scale[VEC], shift[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    m[i] = mean[c0 + i];
    scale[i] = invstd[c0 + i] * weight[c0 + i];
    shift[i] = bias[c0 + i];
  }
  const RowRange rr = ThreadRows(rows, rows_per_chunk);
  auto load = [&](int64_t o) {
    Loaded<T, VEC, 2> l;
    l.v[0] = LoadRaw<T, VEC>(x + o);
    if constexpr (kResidual) l.v[1] = LoadRaw<T, VEC>(z + o);
    return l;
  };
  auto apply = [&](const Loaded<T, VEC, 2>& raw, int64_t o) {
    float xv[VEC], zv[VEC], out[VEC];
    Unpack<T, VEC>(raw.v[0], xv);
    if constexpr (kResidual) Unpack<T, VEC>(raw.v[1], zv);
    unsigned bits = 0;
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      float v = fmaf(xv[i] - m[i], scale[i], shift[i]);
      if constexpr (kResidual) v += zv[i];
      if constexpr (kBits) bits |= static_cast<unsigned>(v > 0.f) << i;
      if constexpr (kRelu) v = fmaxf(v, 0.f);
      out[i] = v;
    }
    Store<T, VEC>(y + o, out);
    if constexpr (kBits) relu_bits[o >> 3] = static_cast<uint8_t>(bits);
  };
  ForEachRow<kUnroll>(rr, rr.first * channels + c0, rr.step * channels, load, apply);
}

// Every operand of Forward starts 16-byte aligned (z where given): the vector path.
bool OperandsAligned(const void* x, const void* z, const void* y) {
  return Aligned(x) && Aligned(y) && (z == nullptr || Aligned(z));
}

template <typename T, int VEC>
void LaunchForward(const ForwardArgs& a, const Plan& plan, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  const T* z = static_cast<const T*>(a.z);
  T* y = static_cast<T*>(a.y);
  const Geometry g = MakeGeometry(plan, a.channels, VEC, 2 * VEC);
  StatsKernel<T, VEC><<<g.grid, g.block, g.smem, stream>>>(x, a.rows, a.channels,
                                                           plan.rows_per_chunk, a.workspace);
  const unsigned fin_blocks = static_cast<unsigned>((a.channels + kFinalizeX - 1) / kFinalizeX);
  StatsFinalizeKernel<<<fin_blocks, dim3(kFinalizeX, kFinalizeY), 0, stream>>>(
      a.workspace, plan.chunks, a.rows, plan.rows_per_chunk, a.channels, a.momentum, a.eps, a.mean,
      a.invstd, a.running_mean, a.running_var, a.num_batches_tracked);
  auto apply = [&](auto kernel) {
    kernel<<<g.grid, g.block, 0, stream>>>(x, z, y, a.relu_bits, a.mean, a.invstd, a.weight, a.bias,
                                           a.rows, a.channels, plan.rows_per_chunk);
  };
  if constexpr (VEC == 8) {
    // Forward() lets relu_bits through only for this path.
    if (a.relu_bits != nullptr) {
      z ? apply(ApplyKernel<T, VEC, true, true, true>)
        : apply(ApplyKernel<T, VEC, true, false, true>);
      return;
    }
  }
  if (a.relu) {
    z ? apply(ApplyKernel<T, VEC, true, true, false>)
      : apply(ApplyKernel<T, VEC, true, false, false>);
  } else {
    z ? apply(ApplyKernel<T, VEC, false, true, false>)
      : apply(ApplyKernel<T, VEC, false, false, false>);
  }
}

}  // namespace

bool ReluBitsSupported(ElementType dtype, int64_t channels, const void* x, const void* z,
                       const void* y) {
  return dtype == ElementType::kBFloat16 && channels % 8 == 0 && OperandsAligned(x, z, y);
}

int64_t WorkspaceFloats(int64_t rows, int64_t channels) {
  return 2 * MakePlan(rows, channels).chunks * channels;
}

const char* Forward(const ForwardArgs& a, cudaStream_t stream) {
  if (const char* e = CheckShape(a.rows, a.channels, a.workspace, a.workspace_floats)) return e;
  if (!a.x || !a.y || !a.weight || !a.bias || !a.mean || !a.invstd) {
    return "fused_bn: Forward needs x, y, weight, bias, mean and invstd";
  }
  const Plan plan = MakePlan(a.rows, a.channels);
  const bool aligned = OperandsAligned(a.x, a.z, a.y);
  if (a.relu_bits != nullptr &&
      !(a.relu && ReluBitsSupported(a.dtype, a.channels, a.x, a.z, a.y))) {
    return "fused_bn: relu_bits needs relu, bfloat16, channels % 8 == 0 and aligned x, z, y";
  }
  Dispatch(a.dtype, a.channels, aligned, [&](auto v) {
    using V = decltype(v);
    LaunchForward<typename V::Type, V::kVec>(a, plan, stream);
  });
  return LastError();
}

}  // namespace ringpilot::trainer::ops::fused_bn
