// Post-LayerNorm residual block in one pass per direction: out = LayerNorm(dropout(branch)
// + residual), with a low-precision copy of out for the next linear layer. Plain launch
// functions on raw pointers, no LibTorch (trainer/ops/residual_norm.cpp is the LibTorch side).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::residual_norm {

/// Widest normalised dimension the kernels take (one warp per row, up to 8 float4 per lane).
constexpr int64_t kMaxCols = 1024;

/// The Philox stream of a dropout mask, as at::PhiloxCudaState carries it: outside CUDA
/// graph capture `seed` and `offset`; under capture pointers the graph reads at replay
/// (seed, offset) plus `offset_intragraph`, so every replay draws a fresh mask.
struct Philox {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const int64_t* seed_ptr = nullptr;    ///< non-null: captured
  const int64_t* offset_ptr = nullptr;  ///< with seed_ptr
  uint64_t offset_intragraph = 0;
};

/// Philox offset increment one Forward call consumes (one 4-value draw per element group).
constexpr uint64_t kPhiloxIncrement = 4;

/// True when the kernels take a rows x cols problem (cols a multiple of 4, <= kMaxCols).
bool Supported(int64_t cols);

struct ForwardArgs {
  const void* branch = nullptr;  ///< rows x cols, ElementType
  const float* residual = nullptr;
  const float* weight = nullptr;               ///< [cols]
  const float* bias = nullptr;                 ///< [cols]
  ElementType dtype = ElementType::kBFloat16;  ///< kBFloat16 or kFloat16
  int64_t rows = 0;
  int64_t cols = 0;
  float eps = 1e-12f;
  float keep = 1.0f;  ///< 1 - dropout probability; 1: no dropout, `keep_mask` unused
  Philox philox;
  float* out = nullptr;          ///< rows x cols float32
  void* out_low = nullptr;       ///< rows x cols ElementType: out rounded to nearest even
  float* z = nullptr;            ///< rows x cols float32: dropout(branch) + residual, for backward
  float* mean = nullptr;         ///< [rows]
  float* rstd = nullptr;         ///< [rows]: 1 / sqrt(var + eps), biased variance
  uint8_t* keep_mask = nullptr;  ///< rows x cols: 1 kept, 0 dropped (when keep < 1)
};

/// z = branch * keep_mask / keep + residual (element kept when its Philox uniform draw is
/// < keep, as ATen's dropout), out = (z - mean) * rstd * weight + bias per row. All
/// pointers contiguous and 16-byte aligned (branch, out_low: 8-byte). Enqueues one kernel;
/// no allocation, no host synchronisation, capturable. Returns nullptr, or a static
/// message for unsupported arguments or a failed launch.
const char* Forward(const ForwardArgs& args, cudaStream_t stream);

struct BackwardArgs {
  const float* grad_out = nullptr;     ///< rows x cols float32, or null (no gradient)
  const void* grad_out_low = nullptr;  ///< rows x cols ElementType, or null
  const float* z = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  const float* weight = nullptr;
  const uint8_t* keep_mask = nullptr;          ///< null: no dropout
  ElementType dtype = ElementType::kBFloat16;  ///< kBFloat16 or kFloat16
  int64_t rows = 0;
  int64_t cols = 0;
  float keep = 1.0f;
  float* grad_residual = nullptr;  ///< rows x cols float32, or null (not needed)
  void* grad_branch = nullptr;     ///< rows x cols ElementType, or null
  float* grad_weight = nullptr;    ///< [cols]: written, or added to when accumulate
  float* grad_bias = nullptr;      ///< [cols], likewise
  bool accumulate = false;
  float* workspace = nullptr;  ///< WorkspaceFloats(args) floats
};

/// Float32 elements of workspace Backward needs (per-block partial sums of the parameter
/// gradients); depends on the shape only.
int64_t WorkspaceFloats(const BackwardArgs& args);

/// dy = grad_out + grad_out_low; grad_residual = dz = LayerNorm's input gradient for dy,
/// grad_branch = dz * keep_mask / keep; grad_weight = sum_r dy * x_hat, grad_bias = sum_r
/// dy (fixed summation order: deterministic). Two kernels; capturable.
const char* Backward(const BackwardArgs& args, cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::residual_norm
