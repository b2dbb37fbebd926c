// Fused BatchNorm (+ residual + ReLU) kernels for channels-last tensors: memory-bound
// passes over a rows x channels matrix. Every heavy kernel has the same geometry: a
// block of bx x by threads (bx * by = 256) covers bx column vectors (VEC channels each,
// one 16-byte load) and a chunk of rows; each thread keeps its channels' parameters or
// accumulators in registers while it walks down the chunk's rows. Reductions write one
// partial per (chunk, channel) to the caller's workspace and a small finalize kernel
// merges the chunks: no atomics, no zeroed memory, deterministic results.
#include "trainer/ops/fused_batch_norm_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::fused_bn {

namespace {

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

int SmCount() {
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
Plan MakePlan(int64_t rows, int64_t channels) {
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

Geometry MakeGeometry(const Plan& plan, int64_t channels, int vec, size_t smem_floats_per_thread) {
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

template <typename T, int VEC, bool kRelu, bool kResidual>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    ApplyKernel(const T* __restrict__ x, const T* __restrict__ z, T* __restrict__ y,
                const float* __restrict__ mean, const float* __restrict__ invstd,
                const float* __restrict__ weight, const float* __restrict__ bias, int64_t rows,
                int64_t channels, int64_t rows_per_chunk) {
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
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      float v = fmaf(xv[i] - m[i], scale[i], shift[i]);
      if constexpr (kResidual) v += zv[i];
      if constexpr (kRelu) v = fmaxf(v, 0.f);
      out[i] = v;
    }
    Store<T, VEC>(y + o, out);
  };
  ForEachRow<kUnroll>(rr, rr.first * channels + c0, rr.step * channels, load, apply);
}

// Where backward's ReLU mask comes from: none (no ReLU), the saved output y, or x itself.
// Without a residual, y > 0 exactly when the forward's pre-activation
// fmaf(x - mean, invstd * weight, bias) > 0, which backward can recompute from x (read
// anyway) and drop the read of y: one activation-sized stream of three in the reduce and
// of four in the elementwise pass.
enum class Mask { kNone, kFromY, kFromX };

// Per-channel values of one thread's VEC channels that backward keeps in registers.
template <int VEC>
struct ChannelValues {
  float mean[VEC];
  float scale[VEC];  ///< invstd * weight, as the forward computed it (kFromX only)
  float shift[VEC];  ///< bias (kFromX only)
};

template <int VEC, Mask kMask>
__device__ __forceinline__ void LoadChannels(const float* mean, const float* invstd,
                                             const float* weight, const float* bias, int64_t c0,
                                             ChannelValues<VEC>& cv) {
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    cv.mean[i] = mean[c0 + i];
    if constexpr (kMask == Mask::kFromX) {
      cv.scale[i] = invstd[c0 + i] * weight[c0 + i];
      cv.shift[i] = bias[c0 + i];
    }
  }
}

// dy, y (only for the mask from y) and x of one row.
template <typename T, int VEC, Mask kMask>
__device__ __forceinline__ Loaded<T, VEC, 3> LoadBackward(const T* dy, const T* y, const T* x,
                                                          int64_t o) {
  Loaded<T, VEC, 3> l;
  l.v[0] = LoadRaw<T, VEC>(dy + o);
  if constexpr (kMask == Mask::kFromY) l.v[1] = LoadRaw<T, VEC>(y + o);
  l.v[2] = LoadRaw<T, VEC>(x + o);
  return l;
}

// g = dy masked by the ReLU and x - mean of one row.
template <typename T, int VEC, Mask kMask>
__device__ __forceinline__ void UnpackBackward(const Loaded<T, VEC, 3>& raw,
                                               const ChannelValues<VEC>& cv, float (&g)[VEC],
                                               float (&xc)[VEC]) {
  float yv[VEC];
  Unpack<T, VEC>(raw.v[0], g);
  if constexpr (kMask == Mask::kFromY) Unpack<T, VEC>(raw.v[1], yv);
  Unpack<T, VEC>(raw.v[2], xc);
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    xc[i] -= cv.mean[i];
    if constexpr (kMask == Mask::kFromY) g[i] = yv[i] > 0.f ? g[i] : 0.f;
    // ApplyKernel's arithmetic, operation for operation, so the mask is the output's.
    if constexpr (kMask == Mask::kFromX)
      g[i] = fmaf(xc[i], cv.scale[i], cv.shift[i]) > 0.f ? g[i] : 0.f;
  }
}

// Per (chunk, channel): sum(g) and sum(g * x_hat).
template <typename T, int VEC, Mask kMask>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    BackwardReduceKernel(const T* __restrict__ dy, const T* __restrict__ y, const T* __restrict__ x,
                         const float* __restrict__ mean, const float* __restrict__ invstd,
                         const float* __restrict__ weight, const float* __restrict__ bias,
                         int64_t rows, int64_t channels, int64_t rows_per_chunk,
                         float* __restrict__ partial) {
  extern __shared__ float smem[];
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * VEC;
  const bool active = c0 < channels;
  float n = 0.f;
  float acc[2][VEC] = {};
  if (active) {
    ChannelValues<VEC> cv;
    LoadChannels<VEC, kMask>(mean, invstd, weight, bias, c0, cv);
    const RowRange rr = ThreadRows(rows, rows_per_chunk);
    auto load = [&](int64_t o) { return LoadBackward<T, VEC, kMask>(dy, y, x, o); };
    auto update = [&](const Loaded<T, VEC, 3>& raw, int64_t) {
      float g[VEC], xc[VEC];
      UnpackBackward<T, VEC, kMask>(raw, cv, g, xc);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        acc[0][i] += g[i];
        acc[1][i] = fmaf(g[i], xc[i], acc[1][i]);
      }
    };
    ForEachRow<kUnrollBackward>(rr, rr.first * channels + c0, rr.step * channels, load, update);
    // sum(g * x_hat) = invstd * sum(g * (x - mean)).
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[1][i] *= invstd[c0 + i];
  }
  BlockCombine<VEC, 2, false>(smem, n, acc);
  if (active && threadIdx.y == 0) WritePartials<VEC>(partial, channels, c0, acc);
}

__global__ void __launch_bounds__(kFinalizeX* kFinalizeY)
    BackwardFinalizeKernel(const float* __restrict__ partial, int64_t chunks, int64_t rows,
                           int64_t rows_per_chunk, int64_t channels,
                           float* __restrict__ grad_weight, float* __restrict__ grad_bias,
                           float* __restrict__ add_grad_weight, float* __restrict__ add_grad_bias) {
  const int64_t c = int64_t{blockIdx.x} * kFinalizeX + threadIdx.x;
  float n;
  float acc[2][1];
  MergeChunks<false>(partial, chunks, channels, rows, rows_per_chunk, c, n, acc);
  if (c >= channels || threadIdx.y != 0) return;
  grad_bias[c] = acc[0][0];
  grad_weight[c] = acc[1][0];
  // The elementwise kernel reads this step's sums above; the parameters' .grad gets them
  // added here instead of by one add kernel per parameter afterwards.
  if (add_grad_weight != nullptr) {
    add_grad_bias[c] += acc[0][0];
    add_grad_weight[c] += acc[1][0];
  }
}

template <typename T, int VEC, Mask kMask, bool kDz>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    BackwardElementwiseKernel(const T* __restrict__ dy, const T* __restrict__ y,
                              const T* __restrict__ x, const float* __restrict__ weight,
                              const float* __restrict__ bias, const float* __restrict__ mean,
                              const float* __restrict__ invstd,
                              const float* __restrict__ grad_weight,
                              const float* __restrict__ grad_bias, T* __restrict__ dx,
                              T* __restrict__ dz, int64_t rows, int64_t channels,
                              int64_t rows_per_chunk) {
  const int64_t c0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * VEC;
  if (c0 >= channels) return;
  // dx = scale * (g - mean_g) - (x - mean) * k, with scale = weight * invstd and
  // k = scale * invstd * mean(g * x_hat): four registers per channel.
  const float inv_rows = 1.f / static_cast<float>(rows);
  ChannelValues<VEC> cv;
  LoadChannels<VEC, kMask>(mean, invstd, weight, bias, c0, cv);
  float scale[VEC], mean_g[VEC], k[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    const float is = invstd[c0 + i];
    scale[i] = weight[c0 + i] * is;
    mean_g[i] = grad_bias[c0 + i] * inv_rows;
    k[i] = scale[i] * is * (grad_weight[c0 + i] * inv_rows);
  }
  const RowRange rr = ThreadRows(rows, rows_per_chunk);
  auto load = [&](int64_t o) { return LoadBackward<T, VEC, kMask>(dy, y, x, o); };
  auto compute = [&](const Loaded<T, VEC, 3>& raw, int64_t o) {
    float g[VEC], xc[VEC], d[VEC];
    UnpackBackward<T, VEC, kMask>(raw, cv, g, xc);
#pragma unroll
    for (int i = 0; i < VEC; ++i) d[i] = fmaf(scale[i], g[i] - mean_g[i], -xc[i] * k[i]);
    Store<T, VEC>(dx + o, d);
    if constexpr (kDz) Store<T, VEC>(dz + o, g);
  };
  ForEachRow<kUnrollBackward>(rr, rr.first * channels + c0, rr.step * channels, load, compute);
}

bool Aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

const char* LastError() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* CheckShape(int64_t rows, int64_t channels, const float* workspace,
                       int64_t workspace_floats) {
  if (rows < 2) return "fused_bn: training BatchNorm needs more than one value per channel";
  if (channels < 1) return "fused_bn: no channels";
  if (workspace == nullptr || workspace_floats < WorkspaceFloats(rows, channels)) {
    return "fused_bn: workspace smaller than WorkspaceFloats(rows, channels)";
  }
  return nullptr;
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
    kernel<<<g.grid, g.block, 0, stream>>>(x, z, y, a.mean, a.invstd, a.weight, a.bias, a.rows,
                                           a.channels, plan.rows_per_chunk);
  };
  if (a.relu) {
    z ? apply(ApplyKernel<T, VEC, true, true>) : apply(ApplyKernel<T, VEC, true, false>);
  } else {
    z ? apply(ApplyKernel<T, VEC, false, true>) : apply(ApplyKernel<T, VEC, false, false>);
  }
}

template <typename T, int VEC>
void LaunchBackward(const BackwardArgs& a, const Plan& plan, cudaStream_t stream) {
  const T* dy = static_cast<const T*>(a.dy);
  const T* y = static_cast<const T*>(a.y);
  const T* x = static_cast<const T*>(a.x);
  T* dx = static_cast<T*>(a.dx);
  T* dz = static_cast<T*>(a.dz);
  const Geometry g = MakeGeometry(plan, a.channels, VEC, 2 * VEC);
  const Mask mask = !a.relu ? Mask::kNone : y != nullptr ? Mask::kFromY : Mask::kFromX;
  auto reduce = [&](auto kernel) {
    kernel<<<g.grid, g.block, g.smem, stream>>>(dy, y, x, a.mean, a.invstd, a.weight, a.bias,
                                                a.rows, a.channels, plan.rows_per_chunk,
                                                a.workspace);
  };
  switch (mask) {
    case Mask::kNone:
      reduce(BackwardReduceKernel<T, VEC, Mask::kNone>);
      break;
    case Mask::kFromY:
      reduce(BackwardReduceKernel<T, VEC, Mask::kFromY>);
      break;
    case Mask::kFromX:
      reduce(BackwardReduceKernel<T, VEC, Mask::kFromX>);
      break;
  }
  const unsigned fin_blocks = static_cast<unsigned>((a.channels + kFinalizeX - 1) / kFinalizeX);
  BackwardFinalizeKernel<<<fin_blocks, dim3(kFinalizeX, kFinalizeY), 0, stream>>>(
      a.workspace, plan.chunks, a.rows, plan.rows_per_chunk, a.channels, a.grad_weight, a.grad_bias,
      a.add_grad_weight, a.add_grad_bias);
  auto elementwise = [&](auto kernel) {
    kernel<<<g.grid, g.block, 0, stream>>>(dy, y, x, a.weight, a.bias, a.mean, a.invstd,
                                           a.grad_weight, a.grad_bias, dx, dz, a.rows, a.channels,
                                           plan.rows_per_chunk);
  };
  // dz exists only with a residual, and then the mask never comes from x.
  switch (mask) {
    case Mask::kNone:
      dz ? elementwise(BackwardElementwiseKernel<T, VEC, Mask::kNone, true>)
         : elementwise(BackwardElementwiseKernel<T, VEC, Mask::kNone, false>);
      break;
    case Mask::kFromY:
      dz ? elementwise(BackwardElementwiseKernel<T, VEC, Mask::kFromY, true>)
         : elementwise(BackwardElementwiseKernel<T, VEC, Mask::kFromY, false>);
      break;
    case Mask::kFromX:
      elementwise(BackwardElementwiseKernel<T, VEC, Mask::kFromX, false>);
      break;
  }
}

struct ForwardLauncher {
  const ForwardArgs& a;
  Plan plan;
  cudaStream_t stream;
  template <typename T, int VEC>
  void Run() const {
    LaunchForward<T, VEC>(a, plan, stream);
  }
};

struct BackwardLauncher {
  const BackwardArgs& a;
  Plan plan;
  cudaStream_t stream;
  template <typename T, int VEC>
  void Run() const {
    LaunchBackward<T, VEC>(a, plan, stream);
  }
};

// Runs fn.Run<T, VEC>() for the dtype, with full 16-byte vectors when
// every row starts 16-byte aligned, else one channel per thread.
template <typename Fn>
void Dispatch(ElementType dtype, int64_t channels, bool aligned, const Fn& fn) {
  if (dtype == ElementType::kFloat32) {
    (aligned && channels % 4 == 0) ? fn.template Run<float, 4>() : fn.template Run<float, 1>();
  } else {
    (aligned && channels % 8 == 0) ? fn.template Run<__nv_bfloat16, 8>()
                                   : fn.template Run<__nv_bfloat16, 1>();
  }
}

}  // namespace

int64_t WorkspaceFloats(int64_t rows, int64_t channels) {
  return 2 * MakePlan(rows, channels).chunks * channels;
}

const char* Forward(const ForwardArgs& a, cudaStream_t stream) {
  if (const char* e = CheckShape(a.rows, a.channels, a.workspace, a.workspace_floats)) return e;
  if (!a.x || !a.y || !a.weight || !a.bias || !a.mean || !a.invstd) {
    return "fused_bn: Forward needs x, y, weight, bias, mean and invstd";
  }
  const Plan plan = MakePlan(a.rows, a.channels);
  const bool aligned = Aligned(a.x) && Aligned(a.y) && (a.z == nullptr || Aligned(a.z));
  Dispatch(a.dtype, a.channels, aligned, ForwardLauncher{a, plan, stream});
  return LastError();
}

const char* Backward(const BackwardArgs& a, cudaStream_t stream) {
  if (const char* e = CheckShape(a.rows, a.channels, a.workspace, a.workspace_floats)) return e;
  if (!a.dy || !a.x || !a.dx || !a.weight || !a.mean || !a.invstd || !a.grad_weight ||
      !a.grad_bias || (a.relu && !a.y && !a.bias)) {
    return "fused_bn: Backward needs dy, x, dx, weight, mean, invstd, grads (and y or bias with "
           "relu)";
  }
  if (a.relu && !a.y && a.dz) {
    return "fused_bn: the ReLU mask comes from x only without a residual (dz)";
  }
  if ((a.add_grad_weight == nullptr) != (a.add_grad_bias == nullptr)) {
    return "fused_bn: Backward adds into both parameter gradients or neither";
  }
  const Plan plan = MakePlan(a.rows, a.channels);
  const bool aligned = Aligned(a.dy) && Aligned(a.x) && Aligned(a.dx) &&
                       (a.y == nullptr || Aligned(a.y)) && (a.dz == nullptr || Aligned(a.dz));
  Dispatch(a.dtype, a.channels, aligned, BackwardLauncher{a, plan, stream});
  return LastError();
}

}  // namespace ringpilot::trainer::ops::fused_bn
