// CUDA kernels of the fused training-mode BatchNorm (+ residual add + ReLU) over
// channels-last tensors, seen as a row-major matrix of `rows` = N*H*W by `channels`.
// Plain launch functions on raw pointers: no LibTorch here, so nvcc compiles this
// without LibTorch's headers (trainer/ops/fused_batch_norm.cpp is the LibTorch side).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::fused_bn {

/// Element type of x, z, y, dy, dx, dz. Parameters, statistics and gradients of the
/// parameters are always float32.
/// Number of float32 elements of the workspace that `Forward` and `Backward` need for
/// this shape on the current device (per-chunk partial statistics, 2 * chunks *
/// channels). The same value on every call for the same shape and device, so a caller
/// may allocate it from a caching allocator (CUDA-graph safe).
int64_t WorkspaceFloats(int64_t rows, int64_t channels);

/// Whether Forward can write ForwardArgs::relu_bits for these tensors: bfloat16, channels %
/// 8 == 0, and x, y and z (when non-null) 16-byte aligned (the path with one byte of mask
/// per thread and row).
bool ReluBitsSupported(ElementType dtype, int64_t channels, const void* x, const void* z,
                       const void* y);

/// y = act((x - mean) * invstd * weight + bias [+ z]), act = ReLU when `relu`. Writes
/// the batch statistics `mean` and `invstd` (float32 [channels], saved for Backward)
/// and, when running_mean / running_var are non-null, updates them in place with
/// `momentum` (running_var with the unbiased variance). rows must be > 1.
struct ForwardArgs {
  const void* x = nullptr;
  const void* z = nullptr;  ///< residual (optional), same shape and dtype as x
  void* y = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* running_mean = nullptr;  ///< optional
  float* running_var = nullptr;   ///< optional
  /// Optional: the module's int64 batch counter, incremented by one by the statistics
  /// finalize kernel (no launch of its own).
  int64_t* num_batches_tracked = nullptr;
  float* mean = nullptr;    ///< out [channels]
  float* invstd = nullptr;  ///< out [channels]
  /// Optional, with relu: out rows * channels / 8 bytes, bit c % 8 of byte
  /// (r * channels + c) / 8 set where the pre-activation of (r, c) is > 0 (the ReLU's mask,
  /// for Backward instead of y). Only where ReluBitsSupported(dtype, channels, x, z, y).
  uint8_t* relu_bits = nullptr;
  float* workspace = nullptr;  ///< WorkspaceFloats(rows, channels) floats
  int64_t workspace_floats = 0;
  int64_t rows = 0;
  int64_t channels = 0;
  ElementType dtype = ElementType::kFloat32;  ///< kFloat32 or kBFloat16
  float momentum = 0.1f;
  float eps = 1e-5f;
  bool relu = true;
};

/// g = dy * (y > 0) when `relu`, else dy; grad_bias = sum(g); grad_weight =
/// sum(g * x_hat); dx = weight * invstd * (g - grad_bias / rows - x_hat * grad_weight /
/// rows); dz = g when dz is non-null. With `relu`, the mask comes from y when y is given;
/// with y null it is recomputed from x, bit for bit as Forward computed the output when it
/// had no residual (then `bias` is required and dz must be null): one activation-sized read
/// fewer in each of the two passes.
struct BackwardArgs {
  const void* dy = nullptr;
  const void* y = nullptr;  ///< the output, for the ReLU mask (optional, see above)
  const void* x = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;  ///< the forward's bias: only for the mask recomputed from x
  /// The forward's ForwardArgs::relu_bits: with relu, the mask comes from these when given
  /// (before y and x).
  const uint8_t* relu_bits = nullptr;
  const float* mean = nullptr;
  const float* invstd = nullptr;
  void* dx = nullptr;
  void* dz = nullptr;            ///< optional: gradient of the residual
  float* grad_weight = nullptr;  ///< out [channels]
  float* grad_bias = nullptr;    ///< out [channels]
  /// Optional (both or neither): grad_weight and grad_bias are also added into these
  /// [channels] (the parameters' .grad), by the kernel that computes them.
  float* add_grad_weight = nullptr;
  float* add_grad_bias = nullptr;
  float* workspace = nullptr;
  int64_t workspace_floats = 0;
  int64_t rows = 0;
  int64_t channels = 0;
  ElementType dtype = ElementType::kFloat32;  ///< kFloat32 or kBFloat16
  bool relu = true;
};

/// Enqueue the kernels on `stream` (no allocation, no host synchronisation: capturable
/// in a CUDA graph). Returns nullptr, or a static message for invalid arguments or a
/// failed launch (cudaGetLastError).
const char* Forward(const ForwardArgs& args, cudaStream_t stream);
const char* Backward(const BackwardArgs& args, cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::fused_bn
