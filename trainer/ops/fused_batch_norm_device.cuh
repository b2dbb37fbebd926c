// Shared pieces of the fused BatchNorm kernels (fused_batch_norm_forward.cu,
// fused_batch_norm_backward.cu): memory-bound passes over a channels-last tensor seen as
// a rows x channels matrix. Every heavy kernel has the same geometry: a block of bx x by
// threads (bx * by = 256) covers bx column vectors (VEC channels each, one 16-byte load)
// and a chunk of rows; each thread keeps its channels' parameters or accumulators in
// registers while it walks down the chunk's rows. Reductions write one partial per
// (chunk, channel) to the caller's workspace and a small finalize kernel merges the
// chunks: no atomics, no zeroed memory, deterministic results. Included by CUDA sources
// only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"
#include "trainer/ops/fused_batch_norm_kernels.h"

namespace ringpilot::trainer::ops::fused_bn::detail {

constexpr int kThreads = 256;
constexpr int kMaxBlockX = 32;
// Loads in flight per thread: enough to cover DRAM latency at half occupancy.
constexpr int kUnroll = 4;
// Backward kernels read three streams per row.
constexpr int kUnrollBackward = 2;
// Resident blocks aimed for per SM: one wave of persistent-ish blocks, so the partials
// (and the finalize work) stay small while every SM has enough loads in flight.
constexpr int kBlocksPerSm = 4;
// Fewer rows than this per chunk makes the per-block combine dominate.
constexpr int64_t kMinRowsPerChunk = 128;
// Channels covered by one tile at full vector width (32 threads x 8 bf16).
constexpr int64_t kNominalTileChannels = 256;
// Finalize blocks: 16 channels (64-byte rows of partials) x 16 lanes over the chunks.
constexpr int kFinalizeX = 16;
constexpr int kFinalizeY = 16;

inline int SmCount() {
  static std::atomic<int> cache[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 132;
  if (device < 0 || device >= 64) device = 0;
  int sms = cache[device].load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      sms = 132;
    }
    cache[device].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

struct Plan {
  int64_t rows_per_chunk = 1;
  int64_t chunks = 1;
};

// Depends only on the shape and the device, so WorkspaceFloats and the launches agree.
inline Plan MakePlan(int64_t rows, int64_t channels) {
  const int64_t tiles = (channels + kNominalTileChannels - 1) / kNominalTileChannels;
  const int64_t target = std::max<int64_t>(1, int64_t{SmCount()} * kBlocksPerSm / tiles);
  const int64_t most = std::max<int64_t>(1, rows / kMinRowsPerChunk);
  int64_t chunks = std::min<int64_t>({target, most, 65535});
  Plan p;
  p.rows_per_chunk = (rows + chunks - 1) / chunks;
  // Recomputed so that no chunk is empty.
  p.chunks = (rows + p.rows_per_chunk - 1) / p.rows_per_chunk;
  return p;
}

struct Geometry {
  dim3 grid, block;
  size_t smem = 0;
};

inline Geometry MakeGeometry(const Plan& plan, int64_t channels, int vec,
                             size_t smem_floats_per_thread) {
  const int64_t vectors = (channels + vec - 1) / vec;
  int bx = 1;
  while (bx < vectors && bx < kMaxBlockX) bx *= 2;
  Geometry g;
  g.block = dim3(bx, kThreads / bx);
  g.grid = dim3(static_cast<unsigned>((vectors + bx - 1) / bx), static_cast<unsigned>(plan.chunks));
  // One float per (thread, accumulator) plus a count per thread.
  g.smem = (smem_floats_per_thread * kThreads + kThreads) * sizeof(float);
  return g;
}

using cuda_elements::FromFloat;
using cuda_elements::ToFloat;

// Thread's rows of its chunk: r = first, first + step, ... < end.
struct RowRange {
  int64_t first, end, step;
};

__device__ __forceinline__ RowRange ThreadRows(int64_t rows, int64_t rows_per_chunk) {
  const int64_t begin = int64_t{blockIdx.y} * rows_per_chunk;
  return {begin + threadIdx.y, min(begin + rows_per_chunk, rows), int64_t{blockDim.y}};
}

// Loads stay in their 16-byte raw form until used, which halves the registers that
// bf16 loads in flight hold.
template <typename T, int VEC>
using Raw = std::conditional_t<VEC == 1, T, uint4>;

template <typename T, int VEC>
__device__ __forceinline__ Raw<T, VEC> LoadRaw(const T* p) {
  static_assert(VEC == 1 || sizeof(T) * VEC == 16, "one 16-byte vector");
  return *reinterpret_cast<const Raw<T, VEC>*>(p);
}

template <typename T, int VEC>
__device__ __forceinline__ void Unpack(const Raw<T, VEC>& raw, float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = ToFloat(raw);
  } else if constexpr (std::is_same_v<T, float>) {
    v[0] = __uint_as_float(raw.x);
    v[1] = __uint_as_float(raw.y);
    v[2] = __uint_as_float(raw.z);
    v[3] = __uint_as_float(raw.w);
  } else {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // bf16 -> f32 is exact: the bf16 bits are the high half of the float.
      v[2 * i] = __uint_as_float(words[i] << 16);
      v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
}

// Up to three element streams loaded together for one row.
template <typename T, int VEC, int K>
struct Loaded {
  Raw<T, VEC> v[K];
};

// Walks the thread's rows (offsets off, off + stride, ...), issuing the loads of kU rows
// before computing any of them so that kU * K loads are in flight.
template <int kU, typename LoadFn, typename ComputeFn>
__device__ __forceinline__ void ForEachRow(const RowRange& rr, int64_t off, int64_t stride,
                                           const LoadFn& load, const ComputeFn& compute) {
  int64_t r = rr.first;
  for (; r + (kU - 1) * rr.step < rr.end; r += kU * rr.step) {
    decltype(load(off)) v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) v[u] = load(off + u * stride);
#pragma unroll
    for (int u = 0; u < kU; ++u) compute(v[u], off + u * stride);
    off += kU * stride;
  }
  for (; r < rr.end; r += rr.step, off += stride) compute(load(off), off);
}

template <typename T, int VEC>
__device__ __forceinline__ void Store(T* p, const float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    p[0] = FromFloat<T>(v[0]);
  } else if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<uint4*>(p) = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                                              __float_as_uint(v[2]), __float_as_uint(v[3]));
  } else {
    uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[i] = uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i]))} |
                 (uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1]))} << 16);
    }
    *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// Chan et al.'s merge of (n_b, mean_b, m2_b) into (n_a, mean_a, m2_a) for VEC channels
// that share one count.
template <int VEC>
__device__ __forceinline__ void Merge(float& n_a, float (&mean_a)[VEC], float (&m2_a)[VEC],
                                      float n_b, const float (&mean_b)[VEC],
                                      const float (&m2_b)[VEC]) {
  const float n = n_a + n_b;
  if (n_b == 0.f) return;
  const float w_b = n_b / n;
  const float cross = n_a * w_b;
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    const float delta = mean_b[i] - mean_a[i];
    mean_a[i] += delta * w_b;
    m2_a[i] += m2_b[i] + delta * delta * cross;
  }
  n_a = n;
}

// Tree-combines the per-thread accumulators of one column (same threadIdx.x) over
// threadIdx.y, by Welford merging or plain sums (count unused); the result ends in the
// threadIdx.y == 0 thread. smem: [A * VEC][blockDim.y][blockDim.x], then the counts.
template <int VEC, int A, bool kWelford>
__device__ __forceinline__ void BlockCombine(float* smem, float& n, float (&acc)[A][VEC]) {
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  float* counts = smem + A * VEC * kThreads;
  auto at = [&](int a, int i, int y) -> float& { return smem[((a * VEC + i) * by + y) * bx + tx]; };
  auto store = [&] {
#pragma unroll
    for (int a = 0; a < A; ++a) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) at(a, i, ty) = acc[a][i];
    }
    counts[ty * bx + tx] = n;
  };
  store();
  __syncthreads();
  for (int s = by / 2; s > 0; s /= 2) {
    if (ty < s) {
      float other[A][VEC];
#pragma unroll
      for (int a = 0; a < A; ++a) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) other[a][i] = at(a, i, ty + s);
      }
      if constexpr (kWelford) {
        Merge<VEC>(n, acc[0], acc[1], counts[(ty + s) * bx + tx], other[0], other[1]);
      } else {
#pragma unroll
        for (int a = 0; a < A; ++a) {
#pragma unroll
          for (int i = 0; i < VEC; ++i) acc[a][i] += other[a][i];
        }
      }
      store();
    }
    __syncthreads();
  }
}

// partial layout: [2][chunks][channels]; this block's chunk is blockIdx.y.
template <int VEC>
__device__ __forceinline__ void WritePartials(float* partial, int64_t channels, int64_t c0,
                                              const float (&acc)[2][VEC]) {
  float* out = partial + int64_t{blockIdx.y} * channels + c0;
  const int64_t second = int64_t{gridDim.y} * channels;
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    out[i] = acc[0][i];
    out[second + i] = acc[1][i];
  }
}

// Merges a channel's partials (a) over chunks: threadIdx.x = channel, threadIdx.y strides
// the chunks. Returns the merged values in the threadIdx.y == 0 threads.
template <bool kWelford>
__device__ __forceinline__ void MergeChunks(const float* __restrict__ partial, int64_t chunks,
                                            int64_t channels, int64_t rows, int64_t rows_per_chunk,
                                            int64_t c, float& n, float (&acc)[2][1]) {
  __shared__ float smem[3 * kThreads];
  n = 0.f;
  acc[0][0] = acc[1][0] = 0.f;
  if (c < channels) {
    // Batches of loads: one L2 round trip per kBatch chunks, not per chunk.
    constexpr int kBatch = 4;
    for (int64_t j0 = threadIdx.y; j0 < chunks; j0 += kBatch * kFinalizeY) {
      float a[kBatch], b[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t j = j0 + u * kFinalizeY;
        a[u] = j < chunks ? partial[j * channels + c] : 0.f;
        b[u] = j < chunks ? partial[(chunks + j) * channels + c] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int64_t j = j0 + u * kFinalizeY;
        if constexpr (kWelford) {
          const float nb =
              j < chunks ? static_cast<float>(min(rows_per_chunk, rows - j * rows_per_chunk)) : 0.f;
          const float mean_b[1] = {a[u]}, m2_b[1] = {b[u]};
          Merge<1>(n, acc[0], acc[1], nb, mean_b, m2_b);
        } else {
          acc[0][0] += a[u];
          acc[1][0] += b[u];
        }
      }
    }
  }
  static_assert(kFinalizeX * kFinalizeY == kThreads, "BlockCombine's shared layout");
  BlockCombine<1, 2, kWelford>(smem, n, acc);
}

inline bool Aligned(const void* p) { return cuda_elements::AlignedTo(p, 16); }

inline const char* LastError() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

inline const char* CheckShape(int64_t rows, int64_t channels, const float* workspace,
                              int64_t workspace_floats) {
  if (rows < 2) return "fused_bn: training BatchNorm needs more than one value per channel";
  if (channels < 1) return "fused_bn: no channels";
  if (workspace == nullptr || workspace_floats < WorkspaceFloats(rows, channels)) {
    return "fused_bn: workspace smaller than WorkspaceFloats(rows, channels)";
  }
  return nullptr;
}

// The element type and vector width a launch was dispatched with.
template <typename T, int VEC>
struct Variant {
  using Type = T;
  static constexpr int kVec = VEC;
};

// Calls fn(Variant<T, VEC>{}) for the dtype, with full 16-byte vectors when every row starts
// 16-byte aligned, else one channel per thread.
template <typename Fn>
void Dispatch(ElementType dtype, int64_t channels, bool aligned, const Fn& fn) {
  if (dtype == ElementType::kFloat32) {
    (aligned && channels % 4 == 0) ? fn(Variant<float, 4>{}) : fn(Variant<float, 1>{});
  } else {
    (aligned && channels % 8 == 0) ? fn(Variant<__nv_bfloat16, 8>{})
                                   : fn(Variant<__nv_bfloat16, 1>{});
  }
}

}  // namespace ringpilot::trainer::ops::fused_bn::detail
