// GELU's backward fused with the column sums of its result: the bias gradient of the
// linear layer whose output went through GELU (BERT's intermediate layer) comes out of the
// same pass that writes the layer's output gradient, instead of a second read of it. Plain
// launch functions on raw pointers, no LibTorch (trainer/ops/mixed_linear.cpp is the
// LibTorch side).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/column_sum_kernels.h"
#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::gelu {

struct BackwardArgs {
  const void* grad_out = nullptr;  ///< rows x cols, dtype: the gradient of GELU's output
  const void* input = nullptr;     ///< rows x cols, dtype: GELU's input
  void* grad_input = nullptr;      ///< rows x cols, dtype: written
  ElementType dtype = ElementType::kBFloat16;
  int64_t rows = 0;
  int64_t cols = 0;
  /// Where the column sums of grad_input go (column_sum::ColumnSumTo's contract).
  const column_sum::ColumnRange* ranges = nullptr;
  int range_count = 0;
  float* workspace = nullptr;  ///< WorkspaceFloats(args) floats
};

/// Float32 elements of workspace Backward needs (per-chunk partial sums); depends on the
/// shape, the dtype and the pointers' alignment.
int64_t WorkspaceFloats(const BackwardArgs& args);

/// grad_input = grad_out * GELU'(input) for the exact (erf) GELU, in float32 with ATen's
/// formula (cdf + x * pdf), rounded to dtype; and the column sums of the rounded
/// grad_input into `ranges`, summed in column_sum::ColumnSum's order (the same bits as
/// ColumnSum over grad_input). All three matrices contiguous. Two kernels, no allocation,
/// no host synchronisation, capturable. Returns nullptr, or a static message for invalid
/// arguments or a failed launch.
const char* Backward(const BackwardArgs& args, cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::gelu
