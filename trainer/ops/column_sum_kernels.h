// Column sums of a row-major matrix in float32: the bias gradient of a linear layer
// (sum of the output gradient over its rows) in one kernel at memory speed. Plain launch
// functions on raw pointers, no LibTorch (trainer/ops/mixed_linear.cpp is the LibTorch side).
//
// The sums of row chunks are partials in a workspace; the last blocks of the same kernel
// to finish add them up (arrival counters, no second kernel), in the order a second pass
// over all partials used: the results are the two-pass kernels' bits. The arrival counters
// are one device-global array per device, each call leaving the ones it used at zero again
// (CUDA-graph replays need no memset): calls on one device must not overlap in time (one
// stream, or streams ordered by events; the trainer runs the model on its training stream).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::column_sum {

/// Most output buffers one ColumnSum call writes (a group of linear layers' biases).
constexpr int kMaxOutputs = 4;

/// A run of consecutive columns whose sums go to one float32 buffer of `cols` elements.
struct Output {
  float* out = nullptr;
  int64_t cols = 0;
};

struct Args {
  const void* in = nullptr;  ///< rows x cols, row r at in + r * ld elements
  ElementType dtype = ElementType::kBFloat16;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;        ///< elements between row starts, >= cols
  float* out = nullptr;  ///< [cols] float32; or null, and the sums go to `outputs`
  /// With out null: columns [0, cols) in runs, output i taking the next outputs[i].cols
  /// columns; the first `output_count` are used and their cols add up to `cols`.
  Output outputs[kMaxOutputs] = {};
  int output_count = 0;
  bool accumulate = false;     ///< add the sums to the outputs instead of overwriting them
  float* workspace = nullptr;  ///< WorkspaceFloats(args) floats (may be null when that is 0)
  /// The partials summed by a second kernel, as before the one-kernel finish: the same
  /// bits, kept as the reference the tests compare against.
  bool second_kernel = false;
};

/// Float32 elements of workspace that `ColumnSum` needs for these arguments (partial
/// sums of row chunks; 0 when one chunk covers all rows). Depends only on the shape,
/// the dtype and the alignment of `in`, so a caller may allocate it from a caching
/// allocator before each call (CUDA-graph safe).
int64_t WorkspaceFloats(const Args& args);

/// out[c] (+)= sum over r of in[r, c], accumulated in float32 in a fixed order
/// (deterministic: the same bits on every call, with or without `second_kernel`).
/// Enqueues one kernel on `stream` (two with `second_kernel`); no allocation, no host
/// synchronisation, capturable. Returns nullptr, or a static message for invalid
/// arguments or a failed launch.
const char* ColumnSum(const Args& args, cudaStream_t stream);

/// One set of per-block partial sums for SumPartials: out[c] (+)= sum over k of
/// partial[k * cols + c].
struct Partials {
  const float* partial = nullptr;
  float* out = nullptr;
};

/// Most sets one SumPartials call takes.
constexpr int kMaxPartials = 2;

/// For each of the first `count` sets: out[c] (+)= sum over k of partial[k * cols + c],
/// k in [0, chunks), in a fixed order (ColumnSum's, for other kernels' per-block partial
/// sums); adds to out when `accumulate`, else overwrites it. One kernel for all sets,
/// capturable.
const char* SumPartials(const Partials* sets, int count, int64_t chunks, int64_t cols,
                        bool accumulate, cudaStream_t stream);

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
  bool second_kernel = false;    ///< as Args::second_kernel (two more kernels)
};

int64_t WorkspaceFloats(const LayerNormArgs& args);

/// As ColumnSum: deterministic, one kernel, capturable.
const char* LayerNormParamGrads(const LayerNormArgs& args, cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::column_sum
