// The column sums' device side, shared by the kernels that fuse a column sum into another
// pass (column_sum_kernels.cu, gelu_kernels.cu): the launch plan and the first pass,
// per-chunk partial sums whose order of summation fixes the bits. nvcc only.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ringpilot::trainer::ops::column_sum::detail {

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

inline Plan MakePlan(int64_t rows, int64_t cols, int vec) {
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

template <int N>
struct Outputs {
  float* p[N];  ///< accumulator k's [chunks, cols] partial sums (or final sums: one chunk)
};

// Rows says what is summed: kAccumulators sums of kVec columns each, and
// `Add(r, c0, acc)` adds row r's contribution to columns [c0, c0 + kVec) into acc (and may
// write elsewhere: a fused pass's own output). Block (x, y): columns
// [(x * 32 + tx) * VEC, + VEC), rows of chunk y in steps of 8; the 8 row-threads of a
// column combine in shared memory, in a fixed order.
template <typename Rows>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    ChunkPartials(Rows src, int64_t rows, int64_t cols, int64_t rows_per_chunk,
                  Outputs<Rows::kAccumulators> out) {
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
      float* dst = out.p[k] + int64_t{blockIdx.y} * cols + c0;
#pragma unroll
      for (int i = 0; i < VEC; ++i) dst[i] = acc[k][i];
    }
  }
}

}  // namespace ringpilot::trainer::ops::column_sum::detail
