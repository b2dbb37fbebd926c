// Column sums of a row-major matrix in float32: the bias gradient of a linear layer
// (sum of the output gradient over its rows) in one pass at memory speed. Plain launch
// functions on raw pointers, no LibTorch (trainer/ops/mixed_linear.cpp is the LibTorch side).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::column_sum {

struct Args {
  const void* in = nullptr;  ///< rows x cols, row r at in + r * ld elements
  ElementType dtype = ElementType::kBFloat16;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;              ///< elements between row starts, >= cols
  float* out = nullptr;        ///< [cols] float32, overwritten
  float* workspace = nullptr;  ///< WorkspaceFloats(args) floats (may be null when that is 0)
};

/// Float32 elements of workspace that `ColumnSum` needs for these arguments (partial
/// sums of row chunks; 0 when one chunk covers all rows). Depends only on the shape,
/// the dtype and the alignment of `in`, so a caller may allocate it from a caching
/// allocator before each call (CUDA-graph safe).
int64_t WorkspaceFloats(const Args& args);

/// out[c] = sum over r of in[r, c], accumulated in float32 in a fixed order
/// (deterministic: the same bits on every call). Enqueues one or two kernels on
/// `stream`; no allocation, no host synchronisation, capturable. Returns nullptr, or a
/// static message for invalid arguments or a failed launch.
const char* ColumnSum(const Args& args, cudaStream_t stream);

/// Where ColumnSumTo puts the sums of columns [begin, end): out[c - begin], added to it when
/// `accumulate` (a parameter's .grad), else overwriting it.
struct ColumnRange {
  float* out = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
  bool accumulate = false;
};

/// Most ranges one ColumnSumTo call takes (a linear group's biases: BERT's query, key and
/// value are three).
constexpr int kMaxColumnRanges = 8;

/// Float32 elements of workspace ColumnSumTo needs (at least one row of partial sums).
int64_t WorkspaceFloatsTo(const Args& args);

/// As ColumnSum (same order of summation, so the same bits), the sums of each range's
/// columns into its own `out`, added or overwritten per range; columns in no range are not
/// written (`args.out` is unused). Ranges are ascending and disjoint, at most
/// kMaxColumnRanges. Two kernels; capturable.
const char* ColumnSumTo(const Args& args, const ColumnRange* ranges, int range_count,
                        cudaStream_t stream);

/// ColumnSumTo's second pass for other kernels' per-chunk partial sums (`chunks` rows of
/// `cols`, laid out as column_sum_device.cuh's ChunkPartials writes them). One kernel.
const char* SumPartialsTo(const float* partial, int64_t chunks, int64_t cols,
                          const ColumnRange* ranges, int range_count, cudaStream_t stream);

/// The weight and bias gradients of a LayerNorm over the last dimension, float32:
/// grad_weight[c] = sum_r dy[r, c] * (x[r, c] - mean[r]) * rstd[r], grad_bias[c] =
/// sum_r dy[r, c] (at::native_layer_norm_backward's maths). dy and x float32, contiguous
/// rows x cols; mean and rstd float32 [rows].
struct LayerNormArgs {
  const float* dy = nullptr;
  const float* x = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  float* grad_weight = nullptr;  ///< [cols], overwritten
  float* grad_bias = nullptr;    ///< [cols], overwritten
  float* workspace = nullptr;    ///< WorkspaceFloats(args) floats
};

int64_t WorkspaceFloats(const LayerNormArgs& args);

/// As ColumnSum: deterministic, one or three kernels, capturable.
const char* LayerNormParamGrads(const LayerNormArgs& args, cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::column_sum
