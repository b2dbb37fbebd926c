#include "trainer/ops/embedding_kernels.h"

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

#include "trainer/ops/cuda_elements.cuh"

namespace ringpilot::trainer::ops::embedding {
namespace {

using cuda_elements::AlignedTo;

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
// Sorted positions per chunk, one warp each. Rows of a chunk are loaded together (kChunk
// loads in flight per lane); a run of one id longer than a chunk is summed chunk by chunk
// and its chunks' partial sums added in order after.
constexpr int kChunk = 16;

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

// Warp w: chunk c = sorted positions [c * kChunk, + kChunk). Its runs of one id are summed
// in position order; a run whose id appears in no other chunk is added to the table row
// here. A run continuing from the chunk before (leading) or into the next (trailing) goes
// to partial[c][0] (leading, also when it spans the whole chunk) or partial[c][1].
template <int VEC>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock)
    ChunkKernel(const int32_t* keys, const int32_t* positions, int64_t count, const float* grad,
                int64_t hidden, float* table_grad, float* partial) {
  const int lane = threadIdx.x % kWarp;
  const int64_t chunk = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t begin = chunk * kChunk;
  if (begin >= count) return;
  const int64_t end = min(count, begin + kChunk);
  const int32_t before = begin > 0 ? keys[begin - 1] : -1;
  const int32_t after = end < count ? keys[end] : -1;
  int32_t key[kChunk];
  int32_t pos[kChunk];
#pragma unroll
  for (int j = 0; j < kChunk; ++j) {
    key[j] = begin + j < end ? keys[begin + j] : -1;
    pos[j] = begin + j < end ? positions[begin + j] : 0;
  }
  float* lead = partial + chunk * 2 * hidden;
  float* trail = lead + hidden;
  for (int64_t c = int64_t{lane} * VEC; c < hidden; c += int64_t{kWarp} * VEC) {
    Cols<VEC> row[kChunk];
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      if (begin + j < end) row[j] = Load<VEC>(grad + int64_t{pos[j]} * hidden + c);
    }
    Cols<VEC> acc;
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc.v[i] = 0.f;
    int run_start = 0;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      if (begin + j >= end) break;
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc.v[i] += row[j].v[i];
      const bool last = begin + j + 1 == end;
      if (!last && j + 1 < kChunk && key[j + 1] == key[j]) continue;
      const bool leading = run_start == 0 && before == key[j];
      const bool trailing = last && after == key[j];
      if (leading) {
        *reinterpret_cast<Cols<VEC>*>(lead + c) = acc;
      } else if (trailing) {
        *reinterpret_cast<Cols<VEC>*>(trail + c) = acc;
      } else {
        AddTo<VEC>(table_grad + int64_t{key[j]} * hidden + c, acc);
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc.v[i] = 0.f;
      run_start = j + 1;
    }
  }
}

// Warp w: if chunk c's trailing run starts in c, that id's run spans chunks c .. e: its sum
// is partial[c][1] + partial[c + 1][0] + ... + partial[e][0], in that order, added to the
// table row. Every other chunk has nothing to do.
template <int VEC>
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock)
    CarryKernel(const int32_t* keys, int64_t count, int64_t hidden, float* table_grad,
                const float* partial) {
  const int lane = threadIdx.x % kWarp;
  const int64_t chunk = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  const int64_t begin = chunk * kChunk;
  const int64_t end = begin + kChunk;
  if (end >= count) return;  // the last chunk has nothing trailing
  const int32_t key = keys[end - 1];
  if (keys[end] != key) return;                                           // no trailing run
  if (begin > 0 && keys[begin] == key && keys[begin - 1] == key) return;  // started earlier
  int64_t last = chunk + 1;  // the chunks the run continues into: chunk + 1 .. last
  while ((last + 1) * kChunk < count && keys[(last + 1) * kChunk] == key) ++last;
  for (int64_t c = int64_t{lane} * VEC; c < hidden; c += int64_t{kWarp} * VEC) {
    Cols<VEC> acc = Load<VEC>(partial + chunk * 2 * hidden + hidden + c);
    for (int64_t k = chunk + 1; k <= last; ++k) {
      const Cols<VEC> p = Load<VEC>(partial + k * 2 * hidden + c);
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc.v[i] += p.v[i];
    }
    AddTo<VEC>(table_grad + int64_t{key} * hidden + c, acc);
  }
}

template <int VEC>
void LaunchSums(const BackwardArgs& a, const int32_t* keys, const int32_t* positions,
                float* partial, cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>((Chunks(a.count) + kWarpsPerBlock - 1) / kWarpsPerBlock);
  ChunkKernel<VEC><<<blocks, kWarp * kWarpsPerBlock, 0, stream>>>(keys, positions, a.count, a.grad,
                                                                  a.hidden, a.table_grad, partial);
  CarryKernel<VEC><<<blocks, kWarp * kWarpsPerBlock, 0, stream>>>(keys, a.count, a.hidden,
                                                                  a.table_grad, partial);
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
