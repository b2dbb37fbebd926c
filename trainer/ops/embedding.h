// An embedding lookup whose backward can add its rows' gradients into the table's .grad
// itself.
//
// ATen's embedding backward builds a dense float32 gradient of the whole table (zeros, then
// the rows' sums) and autograd adds it into .grad: for BERT-base's 30522 x 768 word
// embeddings three passes over 94 MB per step (the zeros, and the add's two reads and one
// write) for the 8192 rows a batch of 64 x 128 tokens touches, ~0.25 ms of the step on an
// H200 with ATen's sort and segment kernels (ATen's index_put_ accumulate instead: 0.76 ms).
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// weight[ids]: float32 `weight` [V, H], int64 `ids` of any shape; the result is
/// [ids..., H], as at::embedding (no padding index, no gradient scaling).
///
/// Gradient to `weight` only. With `accumulate_into_grad`, on CUDA, where weight's .grad is
/// a contiguous float32 tensor (the gradient reducer's bucket view; CanAccumulateInto),
/// backward adds each looked-up row's gradient into that row of .grad itself and returns
/// none, as MixedLinear's accumulate_into_grad does (trainer/ops/embedding_kernels.h: a
/// radix sort of the ids, then the duplicates of an id summed in the order of their
/// positions in a fixed grouping, so deterministic; no host synchronisation, capturable;
/// ids are not range-checked there: the forward's lookup already did). Otherwise backward
/// is at::embedding_backward's dense gradient. Not under double backward. Thread-safe as
/// ATen ops are.
at::Tensor EmbeddingLookup(const at::Tensor& weight, const at::Tensor& ids,
                           bool accumulate_into_grad);

}  // namespace ringpilot::trainer::ops
