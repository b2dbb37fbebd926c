#include "trainer/step/gradient_clipping.h"

#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>

namespace ringpilot::trainer::step {

GradientClipper::GradientClipper(std::vector<at::Tensor> params, double max_norm)
    : params_(std::move(params)), max_norm_(max_norm) {
  if (params_.empty() || !(max_norm_ > 0)) {
    throw std::invalid_argument("gradient clipping needs parameters and a positive max norm");
  }
  norm_ = at::zeros({}, params_.front().options().dtype(at::kFloat).requires_grad(false));
}

void GradientClipper::Clip() {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  grads.reserve(params_.size());
  for (const at::Tensor& p : params_) grads.push_back(p.grad());
  // torch.nn.utils.clip_grad_norm_'s arithmetic: per-tensor norms in one foreach sweep,
  // then the norm of those norms; the coefficient stays on the device.
  const at::Tensor total = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads, 2)), 2);
  norm_.copy_(total);
  const at::Tensor coef = at::clamp_max(max_norm_ / (total + 1e-6), 1.0);
  at::_foreach_mul_(grads, coef);
}

}  // namespace ringpilot::trainer::step
