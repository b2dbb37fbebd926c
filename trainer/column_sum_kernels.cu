#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "trainer/column_sum_kernels.h"

namespace ringpilot::trainer::column_sum {
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

int ElementBytes(DType t) { return t == DType::kFloat32 ? 4 : 2; }

// Widest load every row start allows: 16 bytes, else 4 bytes (two 16-bit values), else one.
Plan MakePlan(const Args& a) {
  Plan p;
  const int bytes = ElementBytes(a.dtype);
  const auto address = reinterpret_cast<uintptr_t>(a.in);
  const int wide = 16 / bytes;
  if (a.cols % wide == 0 && a.ld % wide == 0 && address % 16 == 0) {
    p.vec = wide;
  } else if (bytes == 2 && a.cols % 2 == 0 && a.ld % 2 == 0 && address % 4 == 0) {
    p.vec = 2;
  }
  const int64_t threads_x = (a.cols + p.vec - 1) / p.vec;
  p.x_blocks = (threads_x + kBlockX - 1) / kBlockX;
  const int64_t max_chunks = std::max<int64_t>(1, (a.rows + kBlockY - 1) / kBlockY);
  p.chunks = std::min({std::max<int64_t>(1, kTargetBlocks / p.x_blocks), kMaxChunks, max_chunks});
  p.rows_per_chunk = (a.rows + p.chunks - 1) / p.chunks;
  p.chunks = (a.rows + p.rows_per_chunk - 1) / p.rows_per_chunk;
  return p;
}

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return __half2float(v);
  }
}

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

// Block (x, y): columns [(x * 32 + tx) * VEC, + VEC), rows of chunk y in steps of 8;
// the 8 row-threads of a column combine in shared memory, in a fixed order.
template <typename T, int VEC>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    PartialSums(const T* __restrict__ in, int64_t rows, int64_t cols, int64_t ld,
                int64_t rows_per_chunk, float* __restrict__ out) {
  __shared__ float smem[kBlockY][kBlockX * VEC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = (int64_t{blockIdx.x} * kBlockX + tx) * VEC;
  float acc[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) acc[i] = 0.f;
  if (c0 < cols) {
    const int64_t begin = int64_t{blockIdx.y} * rows_per_chunk;
    const int64_t end = min(rows, begin + rows_per_chunk);
#pragma unroll 4
    for (int64_t r = begin + ty; r < end; r += kBlockY) {
      const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(in + r * ld + c0);
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += ToFloat(v.v[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < VEC; ++i) smem[ty][tx * VEC + i] = acc[i];
  __syncthreads();
  if (ty == 0 && c0 < cols) {
    for (int y = 1; y < kBlockY; ++y) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += smem[y][tx * VEC + i];
    }
    float* dst = out + int64_t{blockIdx.y} * cols + c0;
#pragma unroll
    for (int i = 0; i < VEC; ++i) dst[i] = acc[i];
  }
}

__global__ void SumChunks(const float* __restrict__ partial, int64_t chunks, int64_t cols,
                          float* __restrict__ out) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.f;
  for (int64_t k = 0; k < chunks; ++k) s += partial[k * cols + c];
  out[c] = s;
}

template <typename T, int VEC>
void LaunchPartials(const Args& a, const Plan& p, float* dst, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.x_blocks), static_cast<unsigned>(p.chunks));
  PartialSums<T, VEC><<<grid, dim3(kBlockX, kBlockY), 0, stream>>>(
      static_cast<const T*>(a.in), a.rows, a.cols, a.ld, p.rows_per_chunk, dst);
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

}  // namespace

int64_t WorkspaceFloats(const Args& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  const Plan p = MakePlan(args);
  return p.chunks > 1 ? p.chunks * args.cols : 0;
}

const char* ColumnSum(const Args& a, cudaStream_t stream) {
  if (a.in == nullptr || a.out == nullptr || a.rows < 0 || a.cols <= 0 || a.ld < a.cols) {
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
  float* dst = p.chunks > 1 ? a.workspace : a.out;
  switch (a.dtype) {
    case DType::kFloat32:
      LaunchPartials<float>(a, p, dst, stream);
      break;
    case DType::kBFloat16:
      LaunchPartials<__nv_bfloat16>(a, p, dst, stream);
      break;
    case DType::kFloat16:
      LaunchPartials<__half>(a, p, dst, stream);
      break;
  }
  if (p.chunks > 1) {
    constexpr int kThreads = 256;
    const auto blocks = static_cast<unsigned>((a.cols + kThreads - 1) / kThreads);
    SumChunks<<<blocks, kThreads, 0, stream>>>(a.workspace, p.chunks, a.cols, a.out);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "column_sum: kernel launch failed";
}

}  // namespace ringpilot::trainer::column_sum
