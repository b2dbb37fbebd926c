// Test helper: watches a parameter's AccumulateGrad node as the gradient reducer does (a
// post-hook), and records whether autograd handed it a gradient (ops that add into .grad
// themselves hand it none).
#pragma once

#include <memory>

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

namespace ringpilot::trainer {

/// Attaches to `param`'s AccumulateGrad node: `*hook_calls` counts its post-hook's runs,
/// `*incoming_defined` becomes 1 or 0 as the gradient arriving there is defined or not.
/// Returns the node: the caller keeps it (a tensor holds its accumulator only weakly, as the
/// reducer keeps its own). The counters must outlive the backward passes.
inline std::shared_ptr<torch::autograd::Node> ProbeAccumulateGrad(const at::Tensor& param,
                                                                  int* hook_calls,
                                                                  int* incoming_defined) {
  struct IncomingGrad : torch::autograd::FunctionPreHook {
    explicit IncomingGrad(int* defined) : defined(defined) {}
    torch::autograd::variable_list operator()(
        const torch::autograd::variable_list& grads) override {
      *defined = grads.at(0).defined() ? 1 : 0;
      return grads;
    }
    int* defined;
  };
  auto acc = torch::autograd::impl::grad_accumulator(param);
  acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [hook_calls](const torch::autograd::variable_list& outputs,
                   const torch::autograd::variable_list&) {
        ++*hook_calls;
        return outputs;
      }));
  acc->add_pre_hook(std::make_unique<IncomingGrad>(incoming_defined));
  return acc;
}

}  // namespace ringpilot::trainer
