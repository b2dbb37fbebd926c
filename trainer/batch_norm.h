// BatchNorm2d whose statistics can span every rank (synchronised BatchNorm), so a
// data-parallel run normalises exactly as one process holding the whole batch would.
#pragma once

#include <torch/nn/module.h>

#include "comm/communicator.h"

namespace ringpilot::trainer {

struct BatchNormOptions {
  static constexpr double kDefaultMomentum = 0.1;
  static constexpr double kDefaultEps = 1e-5;
  int64_t channels = 0;
  double momentum = kDefaultMomentum;
  double eps = kDefaultEps;
};

/// Parameters and buffers are named as torch.nn.BatchNorm2d's (weight, bias,
/// running_mean, running_var, num_batches_tracked). With `sync` set and more than one
/// rank, training-mode statistics are all-reduced over `sync` in forward and the
/// gradient sums in backward (two small blocking collectives each; they must run in the
/// same order on every rank, which a deterministic model guarantees).
class BatchNorm2dImpl : public torch::nn::Module {
 public:
  BatchNorm2dImpl(BatchNormOptions options, comm::Communicator* sync);
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  BatchNormOptions options_;
  comm::Communicator* sync_;
};
TORCH_MODULE(BatchNorm2d);

}  // namespace ringpilot::trainer
