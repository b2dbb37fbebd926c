// LayerNorm over the last dimension for training on CUDA, with the weight and bias
// gradients from one column-sum pass.
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// y = (x - mean) * rstd * weight + bias over x's last dimension: the maths of
/// at::layer_norm (under autocast too: a low-precision x is computed in float32, and y is
/// float32), forward and input gradient by ATen's own kernels. The weight and bias
/// gradients come from trainer/ops/column_sum_kernels.h when x is a CUDA tensor (ATen's
/// GammaBetaBackward kernel took 42 us for 8192 x 768 on an H200, ~3x its memory time);
/// elsewhere from ATen. weight and bias float32 [x.size(-1)]. Differentiable in x, weight
/// and bias. Capturable in CUDA graphs.
at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     double eps);

}  // namespace ringpilot::trainer::ops
