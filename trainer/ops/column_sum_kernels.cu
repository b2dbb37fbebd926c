#include "trainer/ops/column_sum_kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::column_sum {
namespace {

constexpr int kBlockX = 32;
constexpr int kBlockY = 8;
// Enough blocks of 256 threads to keep several per SM streaming on any current GPU;
// more only lengthens the second pass.
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMaxChunks = 256;

struct Plan {
  int vec = 1;
  int64_t x_blocks = 0, chunks = 0, rows_per_chunk = 0;
};

Plan MakePlan(int64_t rows, int64_t cols, int vec) {
  Plan p;
  p.vec = vec;
  const int64_t threads_x = (cols + vec - 1) / vec;
  p.x_blocks = (threads_x + kBlockX - 1) / kBlockX;
  const int64_t max_chunks = std::max<int64_t>(1, (rows + kBlockY - 1) / kBlockY);
  p.chunks = std::min({std::max<int64_t>(1, kTargetBlocks / p.x_blocks), kMaxChunks, max_chunks});
  p.rows_per_chunk = (rows + p.chunks - 1) / p.chunks;
  p.chunks = std::max<int64_t>(1, (rows + p.rows_per_chunk - 1) / p.rows_per_chunk);
  return p;
}

// Widest load every row start allows: 16 bytes, else 4 bytes (two 16-bit values), else one.
// `address`: the matrix's start, or the OR of the starts of all matrices read alike.
Plan MakePlan(const Args& a, uintptr_t address) {
  const int bytes = ElementBytes(a.dtype);
  const int wide = 16 / bytes;
  int vec = 1;
  if (a.cols % wide == 0 && a.ld % wide == 0 && address % 16 == 0) {
    vec = wide;
  } else if (bytes == 2 && a.cols % 2 == 0 && a.ld % 2 == 0 && address % 4 == 0) {
    vec = 2;
  }
  return MakePlan(a.rows, a.cols, vec);
}

Plan MakePlan(const Args& a) { return MakePlan(a, reinterpret_cast<uintptr_t>(a.in)); }

Plan MakePlan(const LayerNormArgs& a) {
  const auto aligned = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return MakePlan(a.rows, a.cols, a.cols % 4 == 0 && aligned(a.dy) && aligned(a.x) ? 4 : 1);
}

using cuda_elements::ToFloat;
using cuda_elements::Vec;

// Where ChunkPartials's sums come from. Each adds row r's contribution to columns
// [c0, c0 + kVec) into its kAccumulators accumulators.
template <typename T, int VEC>
struct ColumnRows {  // sum of in[r, c]
  static constexpr int kAccumulators = 1, kVec = VEC;
  const T* in;
  int64_t ld;
  __device__ __forceinline__ void Add(int64_t r, int64_t c0, float (&acc)[1][VEC]) const {
    const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(in + r * ld + c0);
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[0][i] += ToFloat(v.v[i]);
  }
};

template <int VEC>
struct LayerNormRows {  // sums of dy * x_hat and of dy
  static constexpr int kAccumulators = 2, kVec = VEC;
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  int64_t cols;
  __device__ __forceinline__ void Add(int64_t r, int64_t c0, float (&acc)[2][VEC]) const {
    const Vec<float, VEC> g = *reinterpret_cast<const Vec<float, VEC>*>(dy + r * cols + c0);
    const Vec<float, VEC> v = *reinterpret_cast<const Vec<float, VEC>*>(x + r * cols + c0);
    const float m = mean[r], s = rstd[r];
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      acc[0][i] += g.v[i] * ((v.v[i] - m) * s);
      acc[1][i] += g.v[i];
    }
  }
};

// Where a column's final sum goes: runs of columns to their own buffers.
struct Dest {
  float* out[kMaxOutputs];
  int64_t end[kMaxOutputs];  ///< output i takes columns [end[i - 1], end[i])
  int count;
  bool accumulate;

  __device__ __forceinline__ void Put(int64_t c, float s) const {
    int i = 0;
    int64_t begin = 0;
    while (i + 1 < count && c >= end[i]) begin = end[i++];
    float* p = out[i] + (c - begin);
    *p = accumulate ? *p + s : s;
  }
};

Dest SingleDest(float* out, int64_t cols, bool accumulate) {
  Dest d{};
  d.out[0] = out;
  d.end[0] = cols;
  d.count = 1;
  d.accumulate = accumulate;
  return d;
}

// The second pass's shape, which the one-kernel finish keeps: 16 chunk-threads per column,
// thread g summing chunks g, g + 16, ... in order, then the 16 sums added in order.
constexpr int kChunkThreads = 16;
static_assert(kMaxChunks <= kChunkThreads * kChunkThreads,
              "a chunk group holds at most kChunkThreads chunks");

// Arrival counters of the one-kernel finish, per column tile of ChunkPartials: one per
// chunk group, one for the groups. Zero at module load, and every call leaves them zero.
// Several chunks need x_blocks <= kTargetBlocks / 2 (MakePlan), which bounds the tiles.
constexpr int kArrivalsPerTile = kChunkThreads + 1;
// Partial sums one finishing thread loads before adding (more only costs registers,
// which every block of the kernel pays, finishing or not).
constexpr int kLoadsInFlight = 4;
constexpr int64_t kMaxFinishedTiles = kTargetBlocks / 2;
__device__ unsigned int g_arrivals[kMaxFinishedTiles * kArrivalsPerTile];

template <int N>
struct Sums {
  float* partial[N];  ///< accumulator k's [chunks, cols] partial sums (several chunks)
  Dest dest[N];       ///< accumulator k's final sums
  bool finish;        ///< the last blocks sum the partials (else a second kernel does)
};

// Called by every thread of each ChunkPartials block once its partial row `chunk` of
// columns [c_begin, c_end) is written. The last block of chunk group g (chunks g, g + 16,
// ...) to arrive sums that group's rows per column into row g; the last of the groups
// adds rows 0..15 and writes the outputs: SumChunks's additions in SumChunks's order.
// Classic threadfence reduction: partials stored, fenced, then counted; the last block
// reads them past L1 (__ldcg).
template <int N>
__device__ void FinishTile(const Sums<N>& s, int64_t chunks, int64_t cols, int64_t chunk,
                           int64_t c_begin, int64_t c_end, unsigned int* arrivals) {
  __shared__ unsigned int ticket;
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  const int threads = blockDim.x * blockDim.y;
  const int g = static_cast<int>(chunk % kChunkThreads);
  const auto members = static_cast<unsigned int>((chunks - g + kChunkThreads - 1) / kChunkThreads);
  const auto groups = static_cast<unsigned int>(min(chunks, int64_t{kChunkThreads}));
  const int64_t width = c_end - c_begin;
  __threadfence();
  __syncthreads();
  if (t == 0) {
    ticket = atomicAdd(arrivals + g, 1u);
    if (ticket == members - 1) atomicExch(arrivals + g, 0u);
    __threadfence();
  }
  __syncthreads();
  if (ticket != members - 1) return;
  for (int64_t i = t; i < N * width; i += threads) {
    const auto k = static_cast<int>(i / width);
    const int64_t c = c_begin + i % width;
    float* p = s.partial[k] + c;
    float sum = 0.f;
    for (unsigned int m0 = 0; m0 < members; m0 += kLoadsInFlight) {
      float v[kLoadsInFlight];
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j) {
        const int64_t row = g + int64_t{m0 + j} * kChunkThreads;
        v[j] = m0 + j < members ? __ldcg(p + row * cols) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j) {
        if (m0 + j < members) sum += v[j];
      }
    }
    p[g * cols] = sum;  // row g: read above by this thread only
  }
  __threadfence();
  __syncthreads();
  if (t == 0) {
    ticket = atomicAdd(arrivals + kChunkThreads, 1u);
    if (ticket == groups - 1) atomicExch(arrivals + kChunkThreads, 0u);
    __threadfence();
  }
  __syncthreads();
  if (ticket != groups - 1) return;
  // Rows 0..15 (group g's sum in row g; 0 for the groups with no chunk), in order.
  for (int64_t i = t; i < N * width; i += threads) {
    const auto k = static_cast<int>(i / width);
    const int64_t c = c_begin + i % width;
    const float* p = s.partial[k] + c;
    float sum = __ldcg(p);
    for (int m0 = 1; m0 < kChunkThreads; m0 += kLoadsInFlight) {
      float v[kLoadsInFlight];
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j) {
        const unsigned int m = m0 + j;
        v[j] = m < groups ? __ldcg(p + int64_t{m} * cols) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j) {
        if (m0 + j < kChunkThreads) sum += v[j];
      }
    }
    s.dest[k].Put(c, sum);
  }
}

// Block (x, y): columns [(x * 32 + tx) * VEC, + VEC), rows of chunk y in steps of 8;
// the 8 row-threads of a column combine in shared memory, in a fixed order.
template <typename Rows>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    ChunkPartials(Rows src, int64_t rows, int64_t cols, int64_t rows_per_chunk, int64_t chunks,
                  Sums<Rows::kAccumulators> sums) {
  constexpr int kN = Rows::kAccumulators, VEC = Rows::kVec;
  __shared__ float smem[kN][kBlockY][kBlockX * VEC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = (int64_t{blockIdx.x} * kBlockX + tx) * VEC;
  float acc[kN][VEC];
#pragma unroll
  for (int k = 0; k < kN; ++k) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[k][i] = 0.f;
  }
  if (c0 < cols) {
    const int64_t begin = int64_t{blockIdx.y} * rows_per_chunk;
    const int64_t end = min(rows, begin + rows_per_chunk);
#pragma unroll 4
    for (int64_t r = begin + ty; r < end; r += kBlockY) src.Add(r, c0, acc);
  }
#pragma unroll
  for (int k = 0; k < kN; ++k) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) smem[k][ty][tx * VEC + i] = acc[k][i];
  }
  __syncthreads();
  if (ty == 0 && c0 < cols) {
    for (int y = 1; y < kBlockY; ++y) {
#pragma unroll
      for (int k = 0; k < kN; ++k) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[k][i] += smem[k][y][tx * VEC + i];
      }
    }
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      if (chunks == 1) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) sums.dest[k].Put(c0 + i, acc[k][i]);
      } else {
        float* dst = sums.partial[k] + int64_t{blockIdx.y} * cols + c0;
#pragma unroll
        for (int i = 0; i < VEC; ++i) dst[i] = acc[k][i];
      }
    }
  }
  if (chunks > 1 && sums.finish) {
    const int64_t c_begin = int64_t{blockIdx.x} * kBlockX * VEC;
    FinishTile(sums, chunks, cols, blockIdx.y, c_begin, min(cols, c_begin + kBlockX * VEC),
               g_arrivals + int64_t{blockIdx.x} * kArrivalsPerTile);
  }
}

// The second pass as its own kernel: block (x, set) sums 32 columns of partial set `set`
// with 16 chunk-threads, each summing every 16th chunk; the 16 sums of a column combine in
// shared memory in a fixed order. (One thread per column looping over all chunks was
// latency-bound: 16 us for 768 columns of 256 chunks.)
struct PartialSets {
  const float* partial[kMaxPartials];
  Dest dest[kMaxPartials];
};

__global__ void __launch_bounds__(kBlockX* kChunkThreads)
    SumChunks(PartialSets sets, int64_t chunks, int64_t cols) {
  __shared__ float smem[kChunkThreads][kBlockX];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float* __restrict__ partial = sets.partial[blockIdx.y];
  const int64_t c = int64_t{blockIdx.x} * kBlockX + tx;
  float s = 0.f;
  if (c < cols) {
#pragma unroll 4
    for (int64_t k = ty; k < chunks; k += kChunkThreads) s += partial[k * cols + c];
  }
  smem[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && c < cols) {
    for (int y = 1; y < kChunkThreads; ++y) s += smem[y][tx];
    sets.dest[blockIdx.y].Put(c, s);
  }
}

void LaunchSumChunks(const PartialSets& sets, int count, int64_t chunks, int64_t cols,
                     cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + kBlockX - 1) / kBlockX),
                  static_cast<unsigned>(count));
  SumChunks<<<grid, dim3(kBlockX, kChunkThreads), 0, stream>>>(sets, chunks, cols);
}

// The one-kernel finish, unless asked for the second kernel (or, never with MakePlan's
// plans, there are more column tiles than arrival counters).
bool FinishInKernel(bool second_kernel, const Plan& p) {
  return !second_kernel && p.chunks > 1 && p.x_blocks <= kMaxFinishedTiles;
}

// ChunkPartials over `src` with a's shape, summed into `dest`; the second kernel too
// where the finish is not in the first.
template <typename Rows>
void Launch(const Rows& src, const Args& a, const Plan& p, const Dest& dest, cudaStream_t stream) {
  Sums<1> sums{};
  sums.partial[0] = a.workspace;
  sums.dest[0] = dest;
  sums.finish = FinishInKernel(a.second_kernel, p);
  const dim3 grid(static_cast<unsigned>(p.x_blocks), static_cast<unsigned>(p.chunks));
  ChunkPartials<<<grid, dim3(kBlockX, kBlockY), 0, stream>>>(src, a.rows, a.cols, p.rows_per_chunk,
                                                             p.chunks, sums);
  if (p.chunks > 1 && !sums.finish) {
    PartialSets sets{};
    sets.partial[0] = a.workspace;
    sets.dest[0] = dest;
    LaunchSumChunks(sets, 1, p.chunks, a.cols, stream);
  }
}

template <typename T>
struct Type {
  using type = T;
};

// f(Type<T>{}) for the element type's T.
template <typename F>
void ForType(ElementType t, F&& f) {
  switch (t) {
    case ElementType::kFloat32:
      f(Type<float>{});
      break;
    case ElementType::kBFloat16:
      f(Type<__nv_bfloat16>{});
      break;
    case ElementType::kFloat16:
      f(Type<__half>{});
      break;
  }
}

// f(std::integral_constant<int, VEC>{}) for a plan's load width, as instantiated for T.
template <typename T, typename F>
void ForVec(int vec, F&& f) {
  constexpr int kWide = 16 / sizeof(T);
  if (vec == kWide) {
    f(std::integral_constant<int, kWide>{});
  } else if constexpr (sizeof(T) == 2) {
    if (vec == 2) {
      f(std::integral_constant<int, 2>{});
    } else {
      f(std::integral_constant<int, 1>{});
    }
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

// ColumnSum's outputs, or a message for invalid ones.
const char* MakeDest(const Args& a, Dest& d) {
  if (a.out != nullptr) {
    d = SingleDest(a.out, a.cols, a.accumulate);
    return nullptr;
  }
  d = Dest{};
  d.accumulate = a.accumulate;
  if (a.output_count < 1 || a.output_count > kMaxOutputs) return "column_sum: no outputs";
  int64_t end = 0;
  for (int i = 0; i < a.output_count; ++i) {
    if (a.outputs[i].out == nullptr || a.outputs[i].cols <= 0) return "column_sum: bad output";
    end += a.outputs[i].cols;
    d.out[i] = a.outputs[i].out;
    d.end[i] = end;
  }
  d.count = a.output_count;
  return end == a.cols ? nullptr : "column_sum: outputs do not cover the columns";
}

// Checks a's shape and outputs and fills `dest`; with no rows, also sets the outputs
// (zero, or unchanged when accumulating) and `*done`.
const char* Prepare(const Args& a, const Plan& p, Dest& dest, bool* done, cudaStream_t stream) {
  *done = false;
  // An empty tensor may have no storage: `in` may be null when there are no rows.
  if ((a.in == nullptr && a.rows > 0) || a.rows < 0 || a.cols <= 0 || a.ld < a.cols) {
    return "column_sum: null pointer or bad shape";
  }
  if (const char* e = MakeDest(a, dest)) return e;
  if (a.rows == 0) {
    *done = true;
    if (a.accumulate) return nullptr;
    int64_t begin = 0;
    for (int i = 0; i < dest.count; ++i) {
      if (cudaMemsetAsync(dest.out[i], 0, (dest.end[i] - begin) * sizeof(float), stream) !=
          cudaSuccess) {
        return "column_sum: cudaMemsetAsync failed";
      }
      begin = dest.end[i];
    }
    return nullptr;
  }
  if (p.chunks > 1 && a.workspace == nullptr) return "column_sum: workspace missing";
  return nullptr;
}

}  // namespace

int64_t WorkspaceFloats(const Args& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  const Plan p = MakePlan(args);
  return p.chunks > 1 ? p.chunks * args.cols : 0;
}

const char* ColumnSum(const Args& a, cudaStream_t stream) {
  const Plan p = a.rows > 0 && a.cols > 0 ? MakePlan(a) : Plan{};
  Dest dest{};
  bool done = false;
  if (const char* e = Prepare(a, p, dest, &done, stream)) return e;
  if (done) return nullptr;
  ForType(a.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    ForVec<T>(p.vec, [&](auto vec) {
      Launch(ColumnRows<T, decltype(vec)::value>{static_cast<const T*>(a.in), a.ld}, a, p, dest,
             stream);
    });
  });
  return cudaGetLastError() == cudaSuccess ? nullptr : "column_sum: kernel launch failed";
}

const char* SumPartials(const Partials* sets, int count, int64_t chunks, int64_t cols,
                        bool accumulate, cudaStream_t stream) {
  if (sets == nullptr || count < 1 || count > kMaxPartials || chunks <= 0 || cols <= 0) {
    return "column_sum: SumPartials: no sets or empty shape";
  }
  PartialSets launch{};
  for (int i = 0; i < count; ++i) {
    if (sets[i].partial == nullptr || sets[i].out == nullptr) {
      return "column_sum: SumPartials: null pointer";
    }
    launch.partial[i] = sets[i].partial;
    launch.dest[i] = SingleDest(sets[i].out, cols, accumulate);
  }
  LaunchSumChunks(launch, count, chunks, cols, stream);
  return cudaGetLastError() == cudaSuccess ? nullptr : "column_sum: SumPartials launch failed";
}

int64_t WorkspaceFloats(const LayerNormArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  const Plan p = MakePlan(args);
  return p.chunks > 1 ? 2 * p.chunks * args.cols : 0;
}

const char* LayerNormParamGrads(const LayerNormArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0 || a.dy == nullptr || a.x == nullptr || a.mean == nullptr ||
      a.rstd == nullptr || a.grad_weight == nullptr || a.grad_bias == nullptr) {
    return "layer_norm_param_grads: null pointer or empty shape";
  }
  const Plan p = MakePlan(a);
  if (p.chunks > 1 && a.workspace == nullptr) return "layer_norm_param_grads: workspace missing";
  Sums<2> sums{};
  sums.partial[0] = a.workspace;
  sums.partial[1] = p.chunks > 1 ? a.workspace + p.chunks * a.cols : nullptr;
  sums.dest[0] = SingleDest(a.grad_weight, a.cols, false);
  sums.dest[1] = SingleDest(a.grad_bias, a.cols, false);
  sums.finish = FinishInKernel(a.second_kernel, p);
  const dim3 grid(static_cast<unsigned>(p.x_blocks), static_cast<unsigned>(p.chunks));
  const dim3 block(kBlockX, kBlockY);
  if (p.vec == 4) {
    ChunkPartials<<<grid, block, 0, stream>>>(LayerNormRows<4>{a.dy, a.x, a.mean, a.rstd, a.cols},
                                              a.rows, a.cols, p.rows_per_chunk, p.chunks, sums);
  } else {
    ChunkPartials<<<grid, block, 0, stream>>>(LayerNormRows<1>{a.dy, a.x, a.mean, a.rstd, a.cols},
                                              a.rows, a.cols, p.rows_per_chunk, p.chunks, sums);
  }
  if (p.chunks > 1 && !sums.finish) {
    PartialSets sets{};
    sets.partial[0] = sums.partial[0];
    sets.partial[1] = sums.partial[1];
    sets.dest[0] = sums.dest[0];
    sets.dest[1] = sums.dest[1];
    LaunchSumChunks(sets, 2, p.chunks, a.cols, stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "layer_norm_param_grads: launch failed";
}

}  // namespace ringpilot::trainer::ops::column_sum
