// The gradient of an embedding lookup added into the table's gradient buffer: each id's
// rows of the upstream gradient summed in a fixed order and added to that id's row, for
// the rows a batch touches only (BERT-base: 8192 of 30522 word rows). ATen's dense
// embedding backward was ~0.25 ms of BERT-base's step on an H200 (a sort, two segment
// kernels, a zeroed 94 MB table and autograd's add of it, 2026-11-30); ATen's
// index_put_(accumulate) 0.76 ms. Plain launch functions on raw pointers, no LibTorch
// (trainer/ops/embedding.cpp is the LibTorch side).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace ringpilot::trainer::ops::embedding {

struct BackwardArgs {
  const int64_t* ids = nullptr;  ///< [count], each in [0, vocab) (the lookup checked them)
  int64_t count = 0;             ///< ids, <= INT32_MAX
  const float* grad = nullptr;   ///< [count, hidden] contiguous: the lookup's output gradient
  int64_t hidden = 0;
  int64_t vocab = 0;            ///< <= INT32_MAX
  float* table_grad = nullptr;  ///< [vocab, hidden] contiguous: added into, touched rows only
  void* workspace = nullptr;    ///< WorkspaceBytes(count, hidden) bytes, 16-byte aligned
};

/// Bytes of workspace AddRowGradients needs: the sort's keys, positions and temporary
/// storage, and one partial row pair per chunk of sorted ids. Host only (no device work).
size_t WorkspaceBytes(int64_t count, int64_t hidden, int64_t vocab);

/// table_grad[ids[i]] += grad[i] for every i, the rows of one id summed first, in the order
/// of their positions, in a fixed grouping (chunks of sorted positions, then the chunks a
/// long run of one id spans, in order): the same bits on every call, whatever the ids.
/// Enqueues a sort (CUB radix sort over the ids' bits) and three kernels on `stream`; no
/// allocation, no host synchronisation, capturable. Returns nullptr, or a static message
/// for invalid arguments or a failed launch.
const char* AddRowGradients(const BackwardArgs& args, cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::embedding
