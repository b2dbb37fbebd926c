#include "trainer/optimizer.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>

namespace ringpilot::trainer {

FusedOptimizer::FusedOptimizer(std::vector<at::Tensor> params, OptimizerOptions options)
    : params_(std::move(params)), options_(options) {
  at::NoGradGuard no_grad;
  for (const auto& p : params_) {
    if (options_.kind == OptimizerOptions::Kind::kSgd) {
      if (options_.momentum != 0.0) momentum_.push_back(at::zeros_like(p));
    } else {
      exp_avg_.push_back(at::zeros_like(p));
      exp_avg_sq_.push_back(at::zeros_like(p));
      step_.push_back(at::zeros({}, p.options().dtype(at::kFloat)));
    }
  }
}

void FusedOptimizer::Step() {
  Apply(params_, momentum_, exp_avg_, exp_avg_sq_, step_);
  EndStep();
}

void FusedOptimizer::StepParams(const std::vector<size_t>& indices) {
  if (indices.empty()) return;
  // The fused kernels take parallel lists: pick this subset out of each.
  auto pick = [&indices](const std::vector<at::Tensor>& from) {
    std::vector<at::Tensor> out;
    if (from.empty()) return out;
    out.reserve(indices.size());
    for (size_t i : indices) out.push_back(from.at(i));
    return out;
  };
  Apply(pick(params_), pick(momentum_), pick(exp_avg_), pick(exp_avg_sq_), pick(step_));
}

void FusedOptimizer::Apply(const std::vector<at::Tensor>& params,
                           const std::vector<at::Tensor>& momentum,
                           const std::vector<at::Tensor>& exp_avg,
                           const std::vector<at::Tensor>& exp_avg_sq,
                           const std::vector<at::Tensor>& step) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params) grads.push_back(p.grad());
  if (options_.kind == OptimizerOptions::Kind::kSgd) {
    // is_first_step makes the momentum buffer start as the gradient, as torch.optim.SGD.
    at::_fused_sgd_(params, grads, momentum, options_.weight_decay, options_.momentum, options_.lr,
                    /*dampening=*/0.0, /*nesterov=*/false, /*maximize=*/false,
                    /*is_first_step=*/steps_done_ == 0);
  } else {
    // The fused kernel reads the step count but leaves incrementing it to the caller,
    // as torch.optim.AdamW does.
    at::_foreach_add_(step, 1.0);
    at::_fused_adamw_(params, grads, exp_avg, exp_avg_sq, /*max_exp_avg_sqs=*/{}, step, options_.lr,
                      options_.beta1, options_.beta2, options_.weight_decay, options_.eps,
                      /*amsgrad=*/false, /*maximize=*/false);
  }
}

std::vector<at::Tensor> FusedOptimizer::StateTensors() const {
  std::vector<at::Tensor> out;
  out.insert(out.end(), momentum_.begin(), momentum_.end());
  out.insert(out.end(), exp_avg_.begin(), exp_avg_.end());
  out.insert(out.end(), exp_avg_sq_.begin(), exp_avg_sq_.end());
  out.insert(out.end(), step_.begin(), step_.end());
  return out;
}

std::vector<std::string> FusedOptimizer::StateNames() const {
  std::vector<std::string> out;
  auto add = [&](const char* what, size_t n) {
    for (size_t i = 0; i < n; ++i) out.push_back(std::string(what) + "/" + std::to_string(i));
  };
  add("momentum", momentum_.size());
  add("exp_avg", exp_avg_.size());
  add("exp_avg_sq", exp_avg_sq_.size());
  add("step", step_.size());
  return out;
}

}  // namespace ringpilot::trainer
