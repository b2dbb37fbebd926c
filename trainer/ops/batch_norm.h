// BatchNorm2d whose statistics can span every rank (synchronised BatchNorm), so a
// data-parallel run normalises exactly as one process holding the whole batch would.
#pragma once

#include <torch/nn/module.h>

#include "comm/communicator.h"

namespace ringpilot::trainer::ops {

struct BatchNormOptions {
  static constexpr double kDefaultMomentum = 0.1;
  static constexpr double kDefaultEps = 1e-5;
  int64_t channels = 0;
  double momentum = kDefaultMomentum;
  double eps = kDefaultEps;
  /// Training without cross-rank statistics uses the fused channels-last CUDA kernels
  /// (trainer/ops/fused_batch_norm.h) when the input allows; off: ATen's batch_norm.
  bool fused = true;
  /// With `fused`: also route training-mode `forward_act` through FusedBatchNormAct when
  /// its CUDA kernels cannot run (CPU, float64, non-channels-last), i.e. through its ATen
  /// reference and the same autograd Function. For tests of that wiring inside a model.
  bool fused_reference = false;
  /// With `fused`: FusedBatchNormAct's accumulate_param_grads (weight and bias gradients
  /// added into their .grad by the backward kernel).
  bool accumulate_param_grads = false;
};

/// Parameters and buffers are named as torch.nn.BatchNorm2d's (weight, bias,
/// running_mean, running_var, num_batches_tracked). With `sync` set and more than one
/// rank, training-mode statistics are all-reduced over `sync` in forward and the
/// gradient sums in backward (two small blocking collectives each; they must run in the
/// same order on every rank, which a deterministic model guarantees).
///
/// `forward_act` is act(bn(x) [+ *residual]) with act = ReLU when `relu`: one fused
/// kernel chain when training unsynchronised on a CUDA channels-last float/bf16 input
/// with `options.fused`, otherwise `forward` followed by add and relu_ (the same maths).
class BatchNorm2dImpl : public torch::nn::Module {
 public:
  BatchNorm2dImpl(BatchNormOptions options, comm::Communicator* sync);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor forward_act(const at::Tensor& x, const at::Tensor* residual, bool relu);

  /// Mutable, e.g. to set `fused_reference` on every BatchNorm of a built model.
  BatchNormOptions& options() { return options_; }

  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  at::Tensor Unfused(const at::Tensor& x);

  BatchNormOptions options_;
  comm::Communicator* sync_;
};
TORCH_MODULE(BatchNorm2d);

}  // namespace ringpilot::trainer::ops
