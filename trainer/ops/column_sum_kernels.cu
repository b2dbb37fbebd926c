#include "trainer/ops/column_sum_kernels.h"

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "trainer/ops/column_sum_device.cuh"
#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::column_sum {
namespace {

using cuda_elements::AlignedTo;
using cuda_elements::ToFloat;
using cuda_elements::Vec;
using detail::ChunkPartials;
using detail::kBlockX;
using detail::kBlockY;
using detail::MakePlan;
using detail::Outputs;
using detail::Plan;

// Widest load every row start allows: 16 bytes, else 4 bytes (two 16-bit values), else one.
Plan MakePlan(const Args& a) {
  const int bytes = ElementBytes(a.dtype);
  const int wide = 16 / bytes;
  int vec = 1;
  if (a.cols % wide == 0 && a.ld % wide == 0 && AlignedTo(a.in, 16)) {
    vec = wide;
  } else if (bytes == 2 && a.cols % 2 == 0 && a.ld % 2 == 0 && AlignedTo(a.in, 4)) {
    vec = 2;
  }
  return MakePlan(a.rows, a.cols, vec);
}

Plan MakePlan(const LayerNormArgs& a) {
  return MakePlan(a.rows, a.cols,
                  a.cols % 4 == 0 && AlignedTo(a.dy, 16) && AlignedTo(a.x, 16) ? 4 : 1);
}

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

// SumChunks's destinations: column c goes to out[k][c - begin[k]] for the range k holding
// it (none: not written).
struct Targets {
  int count = 0;
  float* out[kMaxColumnRanges] = {};
  int64_t begin[kMaxColumnRanges] = {}, end[kMaxColumnRanges] = {};
  bool accumulate[kMaxColumnRanges] = {};
};

// All `cols` sums into out, overwritten.
Targets WholeRow(float* out, int64_t cols) {
  Targets t;
  t.count = 1;
  t.out[0] = out;
  t.end[0] = cols;
  return t;
}

// Block: 32 columns x 16 chunk-threads, each summing every 16th chunk; the 16 partial
// sums of a column combine in shared memory in a fixed order. (One thread per column
// looping over all chunks was latency-bound: 16 us for 768 columns of 256 chunks.)
constexpr int kChunkThreads = 16;

__global__ void __launch_bounds__(kBlockX* kChunkThreads)
    SumChunks(const float* __restrict__ partial, int64_t chunks, int64_t cols, Targets targets) {
  __shared__ float smem[kChunkThreads][kBlockX];
  const int tx = threadIdx.x, ty = threadIdx.y;
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
    for (int k = 0; k < targets.count; ++k) {
      if (c < targets.begin[k] || c >= targets.end[k]) continue;
      float* dst = targets.out[k] + (c - targets.begin[k]);
      *dst = targets.accumulate[k] ? *dst + s : s;
      break;
    }
  }
}

void LaunchSumChunks(const float* partial, int64_t chunks, int64_t cols, const Targets& targets,
                     cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((cols + kBlockX - 1) / kBlockX);
  SumChunks<<<blocks, dim3(kBlockX, kChunkThreads), 0, stream>>>(partial, chunks, cols, targets);
}

template <typename T, int VEC>
void LaunchPartials(const Args& a, const Plan& p, float* dst, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.x_blocks), static_cast<unsigned>(p.chunks));
  ChunkPartials<<<grid, dim3(kBlockX, kBlockY), 0, stream>>>(
      ColumnRows<T, VEC>{static_cast<const T*>(a.in), a.ld}, a.rows, a.cols, p.rows_per_chunk,
      Outputs<1>{{dst}});
}

template <typename T>
void LaunchPartials(const Args& a, const Plan& p, float* dst, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  if (p.vec == kWide) {
    LaunchPartials<T, kWide>(a, p, dst, stream);
  } else if constexpr (sizeof(T) == 2) {
    if (p.vec == 2) {
      LaunchPartials<T, 2>(a, p, dst, stream);
    } else {
      LaunchPartials<T, 1>(a, p, dst, stream);
    }
  } else {
    LaunchPartials<T, 1>(a, p, dst, stream);
  }
}

// LaunchPartials for a's element type.
void LaunchColumnPartials(const Args& a, const Plan& p, float* dst, cudaStream_t stream) {
  switch (a.dtype) {
    case ElementType::kFloat32:
      LaunchPartials<float>(a, p, dst, stream);
      break;
    case ElementType::kBFloat16:
      LaunchPartials<__nv_bfloat16>(a, p, dst, stream);
      break;
    case ElementType::kFloat16:
      LaunchPartials<__half>(a, p, dst, stream);
      break;
  }
}

// Args's checks, shared by ColumnSum and ColumnSumTo (an empty tensor may have no storage:
// `in` may be null when there are no rows).
bool BadInput(const Args& a) {
  return (a.in == nullptr && a.rows > 0) || a.rows < 0 || a.cols <= 0 || a.ld < a.cols;
}

// The ranges as SumChunks's kernel argument, checked.
const char* ToTargets(const ColumnRange* ranges, int range_count, int64_t cols, Targets* t) {
  if (range_count < 0 || range_count > kMaxColumnRanges || (range_count > 0 && ranges == nullptr)) {
    return "column_sum: null ranges or too many of them";
  }
  t->count = range_count;
  for (int k = 0; k < range_count; ++k) {
    const ColumnRange& r = ranges[k];
    if (r.out == nullptr || r.begin < 0 || r.end <= r.begin || r.end > cols ||
        (k > 0 && r.begin < ranges[k - 1].end)) {
      return "column_sum: ranges must be non-empty, ascending, disjoint and within the columns";
    }
    t->out[k] = r.out;
    t->begin[k] = r.begin;
    t->end[k] = r.end;
    t->accumulate[k] = r.accumulate;
  }
  return nullptr;
}

}  // namespace

int64_t WorkspaceFloatsTo(const Args& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  return MakePlan(args).chunks * args.cols;
}

const char* ColumnSumTo(const Args& a, const ColumnRange* ranges, int range_count,
                        cudaStream_t stream) {
  if (BadInput(a)) return "column_sum: null pointer or bad shape";
  Targets targets;
  if (const char* e = ToTargets(ranges, range_count, a.cols, &targets)) return e;
  if (range_count == 0) return nullptr;
  if (a.rows == 0) {
    // No rows: sums of zero. Overwritten ranges become 0; accumulated ones keep their values.
    for (int k = 0; k < range_count; ++k) {
      if (ranges[k].accumulate) continue;
      const size_t bytes = static_cast<size_t>(ranges[k].end - ranges[k].begin) * sizeof(float);
      if (cudaMemsetAsync(ranges[k].out, 0, bytes, stream) != cudaSuccess) {
        return "column_sum: cudaMemsetAsync failed";
      }
    }
    return nullptr;
  }
  if (a.workspace == nullptr) return "column_sum: workspace missing";
  // Always partials then SumChunks (one chunk included): the second pass is what reads and
  // adds into each range's destination. The partials are ColumnSum's, so the sums are too.
  const Plan p = MakePlan(a);
  LaunchColumnPartials(a, p, a.workspace, stream);
  LaunchSumChunks(a.workspace, p.chunks, a.cols, targets, stream);
  return cudaGetLastError() == cudaSuccess ? nullptr : "column_sum: kernel launch failed";
}

const char* SumPartialsTo(const float* partial, int64_t chunks, int64_t cols,
                          const ColumnRange* ranges, int range_count, cudaStream_t stream) {
  if (partial == nullptr || chunks <= 0 || cols <= 0) {
    return "column_sum: SumPartialsTo: null pointer or empty shape";
  }
  Targets t;
  if (const char* e = ToTargets(ranges, range_count, cols, &t)) return e;
  if (range_count == 0) return nullptr;
  LaunchSumChunks(partial, chunks, cols, t, stream);
  return cudaGetLastError() == cudaSuccess ? nullptr : "column_sum: SumChunks launch failed";
}

int64_t WorkspaceFloats(const Args& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  const Plan p = MakePlan(args);
  return p.chunks > 1 ? p.chunks * args.cols : 0;
}

const char* ColumnSum(const Args& a, cudaStream_t stream) {
  if (BadInput(a) || a.out == nullptr) {
    return "column_sum: null pointer or bad shape";
  }
  if (a.rows == 0) {
    if (cudaMemsetAsync(a.out, 0, a.cols * sizeof(float), stream) != cudaSuccess) {
      return "column_sum: cudaMemsetAsync failed";
    }
    return nullptr;
  }
  const Plan p = MakePlan(a);
  if (p.chunks > 1 && a.workspace == nullptr) return "column_sum: workspace missing";
  // One chunk writes the sums directly; several write partials, summed per column.
  LaunchColumnPartials(a, p, p.chunks > 1 ? a.workspace : a.out, stream);
  if (p.chunks > 1) {
    LaunchSumChunks(a.workspace, p.chunks, a.cols, WholeRow(a.out, a.cols), stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "column_sum: kernel launch failed";
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
  float* dw = p.chunks > 1 ? a.workspace : a.grad_weight;
  float* db = p.chunks > 1 ? a.workspace + p.chunks * a.cols : a.grad_bias;
  const dim3 grid(static_cast<unsigned>(p.x_blocks), static_cast<unsigned>(p.chunks));
  const dim3 block(kBlockX, kBlockY);
  if (p.vec == 4) {
    ChunkPartials<<<grid, block, 0, stream>>>(LayerNormRows<4>{a.dy, a.x, a.mean, a.rstd, a.cols},
                                              a.rows, a.cols, p.rows_per_chunk,
                                              Outputs<2>{{dw, db}});
  } else {
    ChunkPartials<<<grid, block, 0, stream>>>(LayerNormRows<1>{a.dy, a.x, a.mean, a.rstd, a.cols},
                                              a.rows, a.cols, p.rows_per_chunk,
                                              Outputs<2>{{dw, db}});
  }
  if (p.chunks > 1) {
    LaunchSumChunks(dw, p.chunks, a.cols, WholeRow(a.grad_weight, a.cols), stream);
    LaunchSumChunks(db, p.chunks, a.cols, WholeRow(a.grad_bias, a.cols), stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "layer_norm_param_grads: launch failed";
}

}  // namespace ringpilot::trainer::ops::column_sum
