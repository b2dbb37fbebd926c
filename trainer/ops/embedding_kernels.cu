#include "trainer/ops/embedding_kernels.h"

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::embedding {
namespace {

using cuda_elements::AlignedTo;

// Sorted positions per chunk. A run of one id inside a chunk is summed by one thread per
// column group, kPieceBatch rows at a time; a run longer than that is summed chunk by chunk
// and the chunks' partial sums added in order after.
constexpr int kChunk = 16;
// Threads of the sum kernels: kColumnThreads column groups x kRowThreads positions (or chunks).
constexpr int kColumnThreads = 64;
constexpr int kRowThreads = 4;
// Rows of a piece, and partial sums of a long run, loaded together: few enough registers
// for five blocks an SM (a piece's 16 rows at once, 96 registers, left two: 43 us for
// BERT-base's 8192 x 768 on an H200, 2026-11-30).
constexpr int kPieceBatch = 4;
constexpr int kCarryBatch = 8;

struct Layout {
  size_t keys_in = 0, keys_out = 0, pos_in = 0, pos_out = 0, partial = 0, temp = 0;
  size_t temp_bytes = 0, total = 0;
};

size_t Align(size_t bytes) { return (bytes + 255) / 256 * 256; }

int EndBit(int64_t vocab) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

int64_t Chunks(int64_t count) { return (count + kChunk - 1) / kChunk; }

Layout MakeLayout(int64_t count, int64_t hidden, int64_t vocab) {
  Layout l;
  const size_t ints = Align(sizeof(int32_t) * static_cast<size_t>(count));
  l.keys_in = 0;
  l.keys_out = l.keys_in + ints;
  l.pos_in = l.keys_out + ints;
  l.pos_out = l.pos_in + ints;
  l.partial = l.pos_out + ints;
  l.temp = l.partial + Align(sizeof(float) * 2 * static_cast<size_t>(Chunks(count) * hidden));
  // Host only: with no storage CUB reports the bytes it needs.
  cub::DeviceRadixSort::SortPairs(
      nullptr, l.temp_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(count),
      0, EndBit(vocab));
  l.total = l.temp + Align(l.temp_bytes);
  return l;
}

__global__ void KeysKernel(const int64_t* ids, int64_t count, int32_t* keys, int32_t* positions) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= count) return;
  keys[i] = static_cast<int32_t>(ids[i]);
  positions[i] = static_cast<int32_t>(i);
}

template <int VEC>
struct Cols {
  float v[VEC];
};

template <int VEC>
__device__ __forceinline__ Cols<VEC> Load(const float* p) {
  return *reinterpret_cast<const Cols<VEC>*>(p);
}

template <int VEC>
__device__ __forceinline__ void AddTo(float* p, const Cols<VEC>& a) {
  Cols<VEC> v = *reinterpret_cast<Cols<VEC>*>(p);
#pragma unroll
  for (int i = 0; i < VEC; ++i) v.v[i] += a.v[i];
  *reinterpret_cast<Cols<VEC>*>(p) = v;
}

// First index in sorted keys[0, count) holding a key greater than `key`.
__device__ __forceinline__ int64_t UpperBound(const int32_t* keys, int64_t count, int32_t key) {
  int64_t lo = 0, hi = count;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (keys[mid] <= key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Thread (column group x, sorted position y). Positions that start a piece (a run of one
// id cut at chunk borders) sum its rows (at most kChunk, kPieceBatch loaded together) in position
// order, for their VEC columns. A piece whose id appears in no other chunk is added to the
// table row here; one continuing from the chunk before (leading) or into the next
// (trailing) goes to partial[chunk][0] (leading, also when it spans the whole chunk) or
// partial[chunk][1]. Every other thread returns at once.
template <int VEC>
__global__ void __launch_bounds__(kColumnThreads* kRowThreads)
    PieceKernel(const int32_t* keys, const int32_t* positions, int64_t count, const float* grad,
                int64_t hidden, float* table_grad, float* partial) {
  const int64_t i = int64_t{blockIdx.y} * kRowThreads + threadIdx.y;
  const int64_t c = (int64_t{blockIdx.x} * kColumnThreads + threadIdx.x) * VEC;
  if (i >= count || c >= hidden) return;
  const int32_t key = keys[i];
  const int64_t chunk = i / kChunk, chunk_begin = chunk * kChunk;
  const bool continues_from_before = i > 0 && keys[i - 1] == key;
  if (i != chunk_begin && continues_from_before) return;  // inside a piece
  const int64_t chunk_end = min(count, chunk_begin + kChunk);
  int length = 1;
  while (i + length < chunk_end && keys[i + length] == key) ++length;
  Cols<VEC> acc;
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc.v[k] = 0.f;
  for (int j0 = 0; j0 < length; j0 += kPieceBatch) {
    Cols<VEC> row[kPieceBatch];
#pragma unroll
    for (int b = 0; b < kPieceBatch; ++b) {
      if (j0 + b < length) row[b] = Load<VEC>(grad + int64_t{positions[i + j0 + b]} * hidden + c);
    }
#pragma unroll
    for (int b = 0; b < kPieceBatch; ++b) {
      if (j0 + b >= length) break;
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc.v[k] += row[b].v[k];
    }
  }
  // Past the return above, a piece continuing from the position before starts the chunk.
  const bool leading = continues_from_before;
  const bool trailing = i + length == chunk_end && chunk_end < count && keys[chunk_end] == key;
  float* slot = partial + chunk * 2 * hidden + c;
  if (leading) {
    *reinterpret_cast<Cols<VEC>*>(slot) = acc;
  } else if (trailing) {
    *reinterpret_cast<Cols<VEC>*>(slot + hidden) = acc;
  } else {
    AddTo<VEC>(table_grad + int64_t{key} * hidden + c, acc);
  }
}

// Thread (column group x, chunk y). If the chunk's trailing piece starts in it, that id's
// run spans chunks y .. e: its sum is partial[y][1] + partial[y + 1][0] + ... +
// partial[e][0], in that order, added to the table row. Every other chunk returns at once.
template <int VEC>
__global__ void __launch_bounds__(kColumnThreads* kRowThreads)
    CarryKernel(const int32_t* keys, int64_t count, int64_t hidden, float* table_grad,
                const float* partial) {
  const int64_t chunk = int64_t{blockIdx.y} * kRowThreads + threadIdx.y;
  const int64_t c = (int64_t{blockIdx.x} * kColumnThreads + threadIdx.x) * VEC;
  const int64_t begin = chunk * kChunk, end = begin + kChunk;
  if (end >= count || c >= hidden) return;  // the last chunk has nothing trailing
  const int32_t key = keys[end - 1];
  if (keys[end] != key) return;                                           // nothing trailing
  if (begin > 0 && keys[begin] == key && keys[begin - 1] == key) return;  // started earlier
  const int64_t last = (UpperBound(keys, count, key) - 1) / kChunk;       // the run's last chunk
  Cols<VEC> acc = Load<VEC>(partial + chunk * 2 * hidden + hidden + c);
  for (int64_t k0 = chunk + 1; k0 <= last; k0 += kCarryBatch) {
    Cols<VEC> p[kCarryBatch];
#pragma unroll
    for (int b = 0; b < kCarryBatch; ++b) {
      if (k0 + b <= last) p[b] = Load<VEC>(partial + (k0 + b) * 2 * hidden + c);
    }
#pragma unroll
    for (int b = 0; b < kCarryBatch; ++b) {
      if (k0 + b > last) break;
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc.v[k] += p[b].v[k];
    }
  }
  AddTo<VEC>(table_grad + int64_t{key} * hidden + c, acc);
}

template <int VEC>
void LaunchSums(const BackwardArgs& a, const int32_t* keys, const int32_t* positions,
                float* partial, cudaStream_t stream) {
  const dim3 block(kColumnThreads, kRowThreads);
  const auto column_blocks =
      static_cast<unsigned>((a.hidden / VEC + kColumnThreads - 1) / kColumnThreads);
  const dim3 pieces(column_blocks,
                    static_cast<unsigned>((a.count + kRowThreads - 1) / kRowThreads));
  PieceKernel<VEC><<<pieces, block, 0, stream>>>(keys, positions, a.count, a.grad, a.hidden,
                                                 a.table_grad, partial);
  const dim3 carries(column_blocks,
                     static_cast<unsigned>((Chunks(a.count) + kRowThreads - 1) / kRowThreads));
  CarryKernel<VEC><<<carries, block, 0, stream>>>(keys, a.count, a.hidden, a.table_grad, partial);
}

}  // namespace

size_t WorkspaceBytes(int64_t count, int64_t hidden, int64_t vocab) {
  if (count <= 0 || hidden <= 0 || vocab <= 0) return 0;
  return MakeLayout(count, hidden, vocab).total;
}

const char* AddRowGradients(const BackwardArgs& a, cudaStream_t stream) {
  if (a.count < 0 || a.count > INT32_MAX || a.hidden <= 0 || a.vocab <= 0 || a.vocab > INT32_MAX) {
    return "embedding: unsupported shape";
  }
  if (a.count == 0) return nullptr;
  if (a.ids == nullptr || a.grad == nullptr || a.table_grad == nullptr || a.workspace == nullptr) {
    return "embedding: null pointer";
  }
  if (!AlignedTo(a.workspace, 16)) return "embedding: misaligned workspace";
  const Layout l = MakeLayout(a.count, a.hidden, a.vocab);
  char* w = static_cast<char*>(a.workspace);
  auto* keys_in = reinterpret_cast<int32_t*>(w + l.keys_in);
  auto* keys_out = reinterpret_cast<int32_t*>(w + l.keys_out);
  auto* pos_in = reinterpret_cast<int32_t*>(w + l.pos_in);
  auto* pos_out = reinterpret_cast<int32_t*>(w + l.pos_out);
  auto* partial = reinterpret_cast<float*>(w + l.partial);
  constexpr int kThreads = 256;
  KeysKernel<<<static_cast<unsigned>((a.count + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      a.ids, a.count, keys_in, pos_in);
  size_t temp_bytes = l.temp_bytes;
  // Radix sort is stable: one id's positions stay in increasing order.
  if (cub::DeviceRadixSort::SortPairs(w + l.temp, temp_bytes, keys_in, keys_out, pos_in, pos_out,
                                      static_cast<int>(a.count), 0, EndBit(a.vocab),
                                      stream) != cudaSuccess) {
    return "embedding: sort failed";
  }
  if (a.hidden % 4 == 0 && AlignedTo(a.grad, 16) && AlignedTo(a.table_grad, 16)) {
    LaunchSums<4>(a, keys_out, pos_out, partial, stream);
  } else {
    LaunchSums<1>(a, keys_out, pos_out, partial, stream);
  }
  return cudaGetLastError() == cudaSuccess ? nullptr : "embedding: launch failed";
}

}  // namespace ringpilot::trainer::ops::embedding
