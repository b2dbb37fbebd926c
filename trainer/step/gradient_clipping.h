// train.max_grad_norm: the gradients' global L2 norm clipped on the device, as
// torch.nn.utils.clip_grad_norm_ (foreach norms, total norm, grads x min(1, max / (norm +
// 1e-6))), with no host synchronisation, so it runs inside a captured step.
#pragma once

#include <vector>

#include <ATen/core/TensorBody.h>

namespace ringpilot::trainer::step {

/// Holds the parameters (whose `.grad` must be defined when Clip runs; the reducer's
/// gradients, views with stable addresses). Not thread-safe.
class GradientClipper {
 public:
  /// `max_norm` > 0. The norm tensor is made on the parameters' device.
  GradientClipper(std::vector<at::Tensor> params, double max_norm);

  /// Computes the global L2 norm of every `.grad` into norm() and scales the gradients by
  /// min(1, max_norm / (norm + 1e-6)). Queued on the current stream; capturable.
  void Clip();

  /// The last Clip()'s norm before clipping: a float32 scalar on the device, written in
  /// place (graph replays update it). Reading it on the host synchronises: read it with
  /// the progress line, not every step.
  const at::Tensor& norm() const { return norm_; }
  double max_norm() const { return max_norm_; }

 private:
  std::vector<at::Tensor> params_;
  double max_norm_;
  at::Tensor norm_;
};

}  // namespace ringpilot::trainer::step
