// Test helpers of the MixedLinear tests: a float32 layer and a relative error.
#pragma once

#include <torch/torch.h>

namespace ringpilot::trainer::ops {

/// Largest |a - ref| relative to the largest |ref|.
inline double RelMaxError(const at::Tensor& a, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble).cpu();
  const double mag = r.abs().max().item<double>();
  return (a.to(at::kDouble).cpu() - r).abs().max().item<double>() / (mag > 0 ? mag : 1.0);
}

struct Layer {
  at::Tensor weight, bias;  // float32 leaves
};

inline Layer MakeLayer(int64_t out, int64_t in, const at::TensorOptions& options) {
  return {at::randn({out, in}, options).mul_(0.05).requires_grad_(),
          at::randn({out}, options).mul_(0.1).requires_grad_()};
}

}  // namespace ringpilot::trainer::ops
