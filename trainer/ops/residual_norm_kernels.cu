#include "trainer/ops/residual_norm_kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include "trainer/ops/column_sum_kernels.h"
#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::residual_norm {
namespace {

using cuda_elements::AlignedTo;
using cuda_elements::FromFloat;
using cuda_elements::kWarp;
using cuda_elements::ToFloat;
using cuda_elements::Vec;

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarp * kWarpsPerBlock;
// Backward's blocks each sum their rows' parameter gradients into one partial row. A fixed
// count, not one per SM, keeps the summation order (so the bits) the same on every GPU.
constexpr int64_t kMaxBackwardBlocks = 512;
// Resident blocks per SM the backward kernel is compiled for (a register cap).
constexpr int kBackwardBlocksPerSm = 5;

// Butterfly: every lane ends with the same bits (a + b == b + a exactly).
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float4 Load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}

__device__ __forceinline__ void Store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}

// One warp per row; lane l holds the float4 groups l, l + 32, ... (VPL of them at most).
template <typename T, int VPL>
__global__ void __launch_bounds__(kThreads) ForwardKernel(ForwardArgs a) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  if (row >= a.rows) return;  // whole warps: the shuffles below see all 32 lanes
  const int64_t groups = a.cols / 4;
  const int64_t base = row * a.cols;
  const T* branch = static_cast<const T*>(a.branch);
  const bool drop = a.keep < 1.0f;
  uint64_t seed = a.philox.seed, offset = a.philox.offset;
  if (drop && a.philox.seed_ptr != nullptr) {
    seed = static_cast<uint64_t>(*a.philox.seed_ptr);
    offset = static_cast<uint64_t>(*a.philox.offset_ptr) + a.philox.offset_intragraph;
  }
  const float scale = 1.0f / a.keep;
  float z[VPL][4];
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int64_t g = int64_t{j} * kWarp + lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) z[j][i] = 0.f;
    if (g >= groups) continue;
    const int64_t e = base + g * 4;
    const Vec<T, 4> b = *reinterpret_cast<const Vec<T, 4>*>(branch + e);
    const float4 r = Load4(a.residual + e);
    float m[4] = {1.f, 1.f, 1.f, 1.f};
    if (drop) {
      // One Philox draw per group of 4, its subsequence the group's index: the mask is a
      // function of (seed, offset, element) alone, whatever the launch shape.
      curandStatePhilox4_32_10_t state;
      curand_init(seed, static_cast<uint64_t>(row * groups + g), offset, &state);
      const float4 u = curand_uniform4(&state);
      const bool k[4] = {u.x < a.keep, u.y < a.keep, u.z < a.keep, u.w < a.keep};
      *reinterpret_cast<uchar4*>(a.keep_mask + e) = make_uchar4(k[0], k[1], k[2], k[3]);
#pragma unroll
      for (int i = 0; i < 4; ++i) m[i] = k[i] ? scale : 0.f;
    }
    const float rv[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      z[j][i] = ToFloat(b.v[i]) * m[i] + rv[i];
      sum += z[j][i];
    }
  }
  const float cols = static_cast<float>(a.cols);
  const float mean = WarpSum(sum) / cols;
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    if (int64_t{j} * kWarp + lane >= groups) continue;
#pragma unroll
    for (int i = 0; i < 4; ++i) sq += (z[j][i] - mean) * (z[j][i] - mean);
  }
  const float rstd = rsqrtf(WarpSum(sq) / cols + a.eps);
  T* out_low = static_cast<T*>(a.out_low);
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int64_t g = int64_t{j} * kWarp + lane;
    if (g >= groups) continue;
    const int64_t e = base + g * 4;
    const float4 w = Load4(a.weight + g * 4), bb = Load4(a.bias + g * 4);
    const float wv[4] = {w.x, w.y, w.z, w.w}, bv[4] = {bb.x, bb.y, bb.z, bb.w};
    float y[4];
    Vec<T, 4> low;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      y[i] = (z[j][i] - mean) * rstd * wv[i] + bv[i];
      low.v[i] = FromFloat<T>(y[i]);
    }
    Store4(a.z + e, z[j]);
    Store4(a.out + e, y);
    *reinterpret_cast<Vec<T, 4>*>(out_low + e) = low;
  }
  if (lane == 0) {
    a.mean[row] = mean;
    a.rstd[row] = rstd;
  }
}

// One warp per row, rows [blockIdx.x * rows_per_block, +rows_per_block) in steps of 4
// warps; the block's parameter-gradient sums go to partial row blockIdx.x ([weight sums |
// bias sums], 2 * cols). Each warp adds its rows' dy * x_hat and dy into its own
// shared-memory rows (a lane owns its columns: no races), not registers: at 164 registers
// a thread, 3 blocks fitted an SM and the kernel ran at a third of memory speed. The
// weights come from L1 for the same reason.
template <typename T, int VPL>
__global__ void __launch_bounds__(kThreads, kBackwardBlocksPerSm)
    BackwardKernel(BackwardArgs a, int64_t rows_per_block, float* partial) {
  extern __shared__ __align__(16) float smem[];  // [warp][2][cols]
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t groups = a.cols / 4;
  const float cols = static_cast<float>(a.cols);
  const T* grad_low = static_cast<const T*>(a.grad_out_low);
  T* grad_branch = static_cast<T*>(a.grad_branch);
  const float scale = 1.0f / a.keep;
  float* acc_w = smem + int64_t{warp} * 2 * a.cols;
  float* acc_b = acc_w + a.cols;
  for (int64_t c = lane; c < a.cols; c += kWarp) acc_w[c] = acc_b[c] = 0.f;
  __syncwarp();
  const int64_t begin = int64_t{blockIdx.x} * rows_per_block;
  const int64_t end = min(a.rows, begin + rows_per_block);
  for (int64_t row = begin + warp; row < end; row += kWarpsPerBlock) {
    const float mean = a.mean[row], rstd = a.rstd[row];
    const int64_t base = row * a.cols;
    float dy[VPL][4], xh[VPL][4];
    // The dropout mask is loaded with the first pass's inputs: loaded in the second pass,
    // after the row's reductions, it was a second round trip to memory per row (48.6 ->
    // 41.2 us for BERT-base's 8192 x 768 on an H200, 2026-11-30).
    uint32_t kept[VPL];
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
      const int64_t g = int64_t{j} * kWarp + lane;
#pragma unroll
      for (int i = 0; i < 4; ++i) dy[j][i] = xh[j][i] = 0.f;
      kept[j] = 0x01010101u;
      if (g >= groups) continue;
      const int64_t e = base + g * 4;
      if (grad_branch != nullptr && a.keep_mask != nullptr) {
        kept[j] = *reinterpret_cast<const uint32_t*>(a.keep_mask + e);
      }
      if (a.grad_out != nullptr) {
        const float4 d = Load4(a.grad_out + e);
        dy[j][0] = d.x, dy[j][1] = d.y, dy[j][2] = d.z, dy[j][3] = d.w;
      }
      if (grad_low != nullptr) {
        const Vec<T, 4> d = *reinterpret_cast<const Vec<T, 4>*>(grad_low + e);
#pragma unroll
        for (int i = 0; i < 4; ++i) dy[j][i] += ToFloat(d.v[i]);
      }
      const float4 zv = Load4(a.z + e);
      const float4 wv = __ldg(reinterpret_cast<const float4*>(a.weight) + g);
      const float zz[4] = {zv.x, zv.y, zv.z, zv.w}, w[4] = {wv.x, wv.y, wv.z, wv.w};
      // The lane's four columns as one 16-byte shared-memory access each way: as four
      // scalar ones (lanes 4 floats apart) every access was a 4-way bank conflict.
      const float4 aw = Load4(acc_w + g * 4), ab = Load4(acc_b + g * 4);
      float nw[4] = {aw.x, aw.y, aw.z, aw.w}, nb[4] = {ab.x, ab.y, ab.z, ab.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        xh[j][i] = (zz[i] - mean) * rstd;
        const float gwd = dy[j][i] * w[i];
        s1 += gwd;
        s2 += gwd * xh[j][i];
        nw[i] += dy[j][i] * xh[j][i];
        nb[i] += dy[j][i];
      }
      Store4(acc_w + g * 4, nw);
      Store4(acc_b + g * 4, nb);
    }
    s1 = WarpSum(s1) / cols;
    s2 = WarpSum(s2) / cols;
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
      const int64_t g = int64_t{j} * kWarp + lane;
      if (g >= groups) continue;
      const int64_t e = base + g * 4;
      const float4 wv = __ldg(reinterpret_cast<const float4*>(a.weight) + g);
      const float w[4] = {wv.x, wv.y, wv.z, wv.w};
      float dz[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) dz[i] = rstd * (dy[j][i] * w[i] - s1 - xh[j][i] * s2);
      if (a.grad_residual != nullptr) Store4(a.grad_residual + e, dz);
      if (grad_branch != nullptr) {
        const float m = a.keep_mask != nullptr ? scale : 1.f;
        const unsigned char kv[4] = {static_cast<unsigned char>(kept[j] & 0xffu),
                                     static_cast<unsigned char>((kept[j] >> 8) & 0xffu),
                                     static_cast<unsigned char>((kept[j] >> 16) & 0xffu),
                                     static_cast<unsigned char>(kept[j] >> 24)};
        Vec<T, 4> out;
#pragma unroll
        for (int i = 0; i < 4; ++i) out.v[i] = FromFloat<T>(kv[i] ? dz[i] * m : 0.f);
        *reinterpret_cast<Vec<T, 4>*>(grad_branch + e) = out;
      }
    }
  }
  __syncthreads();
  // The warps' sums in a fixed order.
  for (int64_t c = threadIdx.x; c < a.cols; c += kThreads) {
    float w = smem[c], b = smem[a.cols + c];
    for (int k = 1; k < kWarpsPerBlock; ++k) {
      w += smem[int64_t{k} * 2 * a.cols + c];
      b += smem[int64_t{k} * 2 * a.cols + a.cols + c];
    }
    partial[int64_t{blockIdx.x} * 2 * a.cols + c] = w;
    partial[int64_t{blockIdx.x} * 2 * a.cols + a.cols + c] = b;
  }
}

// Float4 groups per lane, rounded up to an instantiated count.
int LanesGroups(int64_t cols) {
  const int64_t per_lane = (cols / 4 + kWarp - 1) / kWarp;
  for (int v : {1, 2, 4, 6, 8}) {
    if (per_lane <= v) return v;
  }
  return 0;
}

int64_t BackwardBlocks(int64_t rows) {
  return std::min<int64_t>(kMaxBackwardBlocks, (rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

template <typename T, int VPL>
void LaunchForward(const ForwardArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  ForwardKernel<T, VPL><<<blocks, kThreads, 0, stream>>>(a);
}

template <typename T, int VPL>
void LaunchBackward(const BackwardArgs& a, cudaStream_t stream) {
  const int64_t blocks = BackwardBlocks(a.rows);
  const int64_t rows_per_block = (a.rows + blocks - 1) / blocks;
  const size_t smem = kWarpsPerBlock * 2 * static_cast<size_t>(a.cols) * sizeof(float);
  BackwardKernel<T, VPL>
      <<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(a, rows_per_block, a.workspace);
}

// f(std::integral_constant<int, VPL>) for the instantiated VPL.
template <typename F>
void ForVpl(int vpl, F&& f) {
  switch (vpl) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 6:
      f(std::integral_constant<int, 6>{});
      break;
    default:
      f(std::integral_constant<int, 8>{});
      break;
  }
}

}  // namespace

bool Supported(int64_t cols) { return cols > 0 && cols % 4 == 0 && cols <= kMaxCols; }

const char* Forward(const ForwardArgs& a, cudaStream_t stream) {
  if (!Supported(a.cols) || a.rows < 0) return "residual_norm: unsupported shape";
  if (a.rows == 0) return nullptr;
  if (a.branch == nullptr || a.residual == nullptr || a.weight == nullptr || a.bias == nullptr ||
      a.out == nullptr || a.out_low == nullptr || a.z == nullptr || a.mean == nullptr ||
      a.rstd == nullptr || (a.keep < 1.0f && a.keep_mask == nullptr)) {
    return "residual_norm: null pointer";
  }
  if (!(a.keep > 0.0f && a.keep <= 1.0f)) return "residual_norm: keep must be in (0, 1]";
  if (!AlignedTo(a.branch, 8) || !AlignedTo(a.out_low, 8) || !AlignedTo(a.residual, 16) ||
      !AlignedTo(a.weight, 16) || !AlignedTo(a.bias, 16) || !AlignedTo(a.out, 16) ||
      !AlignedTo(a.z, 16) || (a.keep_mask != nullptr && !AlignedTo(a.keep_mask, 4))) {
    return "residual_norm: misaligned pointer";
  }
  const int vpl = LanesGroups(a.cols);
  if (a.dtype == ElementType::kBFloat16) {
    ForVpl(vpl, [&](auto v) { LaunchForward<__nv_bfloat16, decltype(v)::value>(a, stream); });
  } else {
    ForVpl(vpl, [&](auto v) { LaunchForward<__half, decltype(v)::value>(a, stream); });
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "residual_norm: forward launch failed";
}

int64_t WorkspaceFloats(const BackwardArgs& a) {
  if (a.rows <= 0 || a.cols <= 0) return 0;
  return 2 * BackwardBlocks(a.rows) * a.cols;
}

const char* Backward(const BackwardArgs& a, cudaStream_t stream) {
  if (!Supported(a.cols) || a.rows <= 0) return "residual_norm: unsupported shape";
  if (a.z == nullptr || a.mean == nullptr || a.rstd == nullptr || a.weight == nullptr ||
      a.grad_weight == nullptr || a.grad_bias == nullptr || a.workspace == nullptr) {
    return "residual_norm: null pointer";
  }
  if (!(a.keep > 0.0f && a.keep <= 1.0f)) return "residual_norm: keep must be in (0, 1]";
  if (!AlignedTo(a.z, 16) || !AlignedTo(a.weight, 16) ||
      (a.grad_out != nullptr && !AlignedTo(a.grad_out, 16)) ||
      (a.grad_out_low != nullptr && !AlignedTo(a.grad_out_low, 8)) ||
      (a.grad_residual != nullptr && !AlignedTo(a.grad_residual, 16)) ||
      (a.grad_branch != nullptr && !AlignedTo(a.grad_branch, 8)) ||
      (a.keep_mask != nullptr && !AlignedTo(a.keep_mask, 4))) {
    return "residual_norm: misaligned pointer";
  }
  const int vpl = LanesGroups(a.cols);
  if (a.dtype == ElementType::kBFloat16) {
    ForVpl(vpl, [&](auto v) { LaunchBackward<__nv_bfloat16, decltype(v)::value>(a, stream); });
  } else {
    ForVpl(vpl, [&](auto v) { LaunchBackward<__half, decltype(v)::value>(a, stream); });
  }
  if (cudaGetLastError() != cudaSuccess) return "residual_norm: backward launch failed";
  const int64_t blocks = BackwardBlocks(a.rows);
  // One partial row per block holds both sums side by side ([weight | bias]): one second
  // pass writes both gradients.
  const column_sum::ColumnRange ranges[2] = {{a.grad_weight, 0, a.cols, a.accumulate},
                                             {a.grad_bias, a.cols, 2 * a.cols, a.accumulate}};
  return column_sum::SumPartialsTo(a.workspace, blocks, 2 * a.cols, ranges, 2, stream);
}

}  // namespace ringpilot::trainer::ops::residual_norm
