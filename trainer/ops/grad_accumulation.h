// Custom autograd functions that add a parameter's gradient into its .grad themselves
// (MixedLinear's GEMM, ResidualLayerNorm's parameter sums) and return none, so that
// autograd's AccumulateGrad adds nothing while its post-hooks (the gradient reducer's)
// still run.
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// Whether backward may add `param`'s gradient into `grad` (its .grad) itself: a defined,
/// contiguous float32 tensor of the parameter's shape and device that is not part of a
/// graph, and no double backward (grad mode off, as in a plain backward pass).
inline bool CanAccumulateInto(const at::Tensor& grad, const at::Tensor& param) {
  return grad.defined() && !at::GradMode::is_enabled() && !grad.requires_grad() &&
         grad.scalar_type() == at::kFloat && grad.sizes() == param.sizes() &&
         grad.is_contiguous() && grad.device() == param.device();
}

}  // namespace ringpilot::trainer::ops
