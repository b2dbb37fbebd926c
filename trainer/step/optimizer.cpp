#include "trainer/step/optimizer.h"

#include <algorithm>

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_fused_sgd.h>

#include "trainer/ops/fused_adamw.h"

namespace ringpilot::trainer::step {
namespace {

// ATen's fused kernels assume a parameter, its gradient and its state share one layout:
// on the CPU a channels_last weight with a contiguous gradient gets a wrong update
// (torch 2.11). The reducer's gradients are views with their parameter's strides; any
// other gradient is copied into that layout first (state is made with zeros_like).
// And the CPU kernels copy every tensor that is not contiguous, which channels_last
// convolution weights are not (17 clones, 11 ms of a 590 ms resnet18-cifar step): the
// update is elementwise, so flat views of the storage do the same without the copies.
// `states`: parallel lists, each either empty (not kept, e.g. SGD without momentum) or
// one tensor per parameter.
void MatchLayoutsAndFlatten(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads,
                            std::vector<std::vector<at::Tensor>*> states) {
  states.erase(std::remove_if(states.begin(), states.end(),
                              [](const std::vector<at::Tensor>* s) { return s->empty(); }),
               states.end());
  auto flat = [](const at::Tensor& t) {
    return t.as_strided({t.numel()}, {1}, t.storage_offset());
  };
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (grads[i].defined() && grads[i].strides() != p.strides()) {
      grads[i] = at::empty_like(p).copy_(grads[i]);
    }
    if (!p.is_cpu() || p.is_contiguous() || !p.is_non_overlapping_and_dense()) continue;
    bool same = grads[i].defined() && grads[i].strides() == p.strides();
    for (const auto* state : states) {
      same = same && (*state)[i].strides() == p.strides();
    }
    if (!same) continue;
    params[i] = flat(p);
    grads[i] = flat(grads[i]);
    for (auto* state : states) (*state)[i] = flat((*state)[i]);
  }
}

bool HasAny(const std::vector<at::Tensor>& copies) {
  return std::any_of(copies.begin(), copies.end(), [](const at::Tensor& c) { return c.defined(); });
}

}  // namespace

void FusedOptimizer::SetLowPrecisionCopies(std::vector<at::Tensor> copies) {
  TORCH_CHECK(copies.size() <= params_.size(), "SetLowPrecisionCopies: ", copies.size(),
              " copies for ", params_.size(), " parameters");
  for (size_t i = 0; i < copies.size(); ++i) {
    const at::Tensor& c = copies[i];
    if (!c.defined()) continue;
    TORCH_CHECK(c.sizes() == params_[i].sizes() && c.device() == params_[i].device() &&
                    params_[i].is_contiguous() && c.is_contiguous() &&
                    (c.scalar_type() == at::kBFloat16 || c.scalar_type() == at::kHalf),
                "SetLowPrecisionCopies: copy ", i, " (", c.sizes(), ", ", c.scalar_type(),
                ") is no contiguous bfloat16/float16 tensor of parameter ", i, "'s shape ",
                params_[i].sizes(), " on its device");
  }
  copies.resize(HasAny(copies) ? params_.size() : 0);
  copies_ = std::move(copies);
}

FusedOptimizer::FusedOptimizer(std::vector<at::Tensor> params, OptimizerOptions options)
    : params_(std::move(params)), options_(options) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    all_.push_back(i);
    const bool exempt =
        options_.exempt_1d_from_decay && options_.weight_decay != 0.0 && params_[i].dim() < 2;
    exempt_.push_back(exempt ? 1 : 0);
    any_exempt_ = any_exempt_ || exempt;
  }
  // The CUDA kernels read a float32 lr through a device pointer. On the CPU (no graphs)
  // the tensor overloads would only read the value back: the scalar path does the same.
  if (options_.lr_on_device && !params_.empty() && params_.front().is_cuda()) {
    lr_tensor_ = at::full({}, options_.lr, params_.front().options().dtype(at::kFloat));
  }
  for (const auto& p : params_) {
    if (options_.kind == config::Optimizer::kSgd) {
      if (options_.momentum != 0.0) momentum_.push_back(at::zeros_like(p));
    } else {
      exp_avg_.push_back(at::zeros_like(p));
      exp_avg_sq_.push_back(at::zeros_like(p));
      step_.push_back(at::zeros({}, p.options().dtype(at::kFloat)));
    }
  }
}

void FusedOptimizer::set_lr(double lr) {
  options_.lr = lr;
  if (lr_tensor_.defined()) lr_tensor_.fill_(lr);
}

void FusedOptimizer::Step() {
  if (any_exempt_) {
    Update(all_);
  } else {
    Apply(params_, momentum_, exp_avg_, exp_avg_sq_, step_, copies_, options_.weight_decay);
  }
  EndStep();
}

void FusedOptimizer::StepParams(const std::vector<size_t>& indices) {
  if (!indices.empty()) Update(indices);
}

void FusedOptimizer::Update(const std::vector<size_t>& indices) {
  // The fused kernels take parallel lists and one weight decay: pick each group's subset.
  auto run = [this](const std::vector<size_t>& group, double weight_decay) {
    if (group.empty()) return;
    auto pick = [&group](const std::vector<at::Tensor>& from) {
      std::vector<at::Tensor> out;
      if (from.empty()) return out;
      out.reserve(group.size());
      for (size_t i : group) out.push_back(from.at(i));
      return out;
    };
    Apply(pick(params_), pick(momentum_), pick(exp_avg_), pick(exp_avg_sq_), pick(step_),
          pick(copies_), weight_decay);
  };
  if (!any_exempt_) return run(indices, options_.weight_decay);
  std::vector<size_t> decayed, exempt;
  for (size_t i : indices) (exempt_.at(i) ? exempt : decayed).push_back(i);
  run(decayed, options_.weight_decay);
  run(exempt, 0.0);
}

void FusedOptimizer::Apply(const std::vector<at::Tensor>& params,
                           const std::vector<at::Tensor>& momentum,
                           const std::vector<at::Tensor>& exp_avg,
                           const std::vector<at::Tensor>& exp_avg_sq,
                           const std::vector<at::Tensor>& step,
                           const std::vector<at::Tensor>& copies, double weight_decay) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> p = params, grads;
  grads.reserve(params.size());
  for (const auto& t : params) grads.push_back(t.grad());
  if (options_.kind == config::Optimizer::kSgd) {
    std::vector<at::Tensor> m = momentum;
    MatchLayoutsAndFlatten(p, grads, {&m});
    // is_first_step makes the momentum buffer start as the gradient, as torch.optim.SGD.
    if (lr_tensor_.defined()) {
      at::_fused_sgd_(p, grads, m, weight_decay, options_.momentum, lr_tensor_,
                      /*dampening=*/0.0, /*nesterov=*/false, /*maximize=*/false,
                      /*is_first_step=*/steps_done_ == 0);
    } else {
      at::_fused_sgd_(p, grads, m, weight_decay, options_.momentum, options_.lr,
                      /*dampening=*/0.0, /*nesterov=*/false, /*maximize=*/false,
                      /*is_first_step=*/steps_done_ == 0);
    }
    ops::WriteLowPrecisionCopies(params, copies);
  } else {
    std::vector<at::Tensor> m1 = exp_avg, m2 = exp_avg_sq;
    MatchLayoutsAndFlatten(p, grads, {&m1, &m2});
    // The fused kernel reads the step count but leaves incrementing it to the caller,
    // as torch.optim.AdamW does.
    at::_foreach_add_(step, 1.0);
    ops::AdamWHyper h;
    h.lr_tensor = lr_tensor_;  // undefined: the scalar lr
    h.lr = options_.lr;
    h.beta1 = options_.beta1;
    h.beta2 = options_.beta2;
    h.weight_decay = weight_decay;
    h.eps = options_.eps;
    // Without copies this is at::_fused_adamw_ itself.
    ops::FusedAdamWWithCopies(p, grads, m1, m2, step, copies, h);
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

}  // namespace ringpilot::trainer::step
