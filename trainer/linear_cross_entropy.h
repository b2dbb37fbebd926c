// Mean cross-entropy of a linear layer's output, with the gradients computed in the same
// pass as the loss (the MLM decoder over 30522 words: logits, softmax and their gradient
// are one [rows, vocab] buffer instead of log-softmax output, NLL gradient and
// log-softmax gradient buffers, each a full pass over memory).
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer {

/// mean_i CE(x_i W^T + b, labels_i), differentiable in x, weight and bias: the same value
/// and gradients as at::cross_entropy_loss(at::linear(x, weight, bias), labels) up to
/// float rounding. x [N, K], weight [V, K], bias [V], all float32; labels int64 [N] in
/// [0, V) (no ignore index: the caller passes only the scored rows). The gradients are
/// computed in forward and kept until backward (one weight-sized buffer), which may hand
/// those buffers out as they are: one backward per forward (no retain_graph). No host sync.
at::Tensor LinearCrossEntropy(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              const at::Tensor& labels);

}  // namespace ringpilot::trainer
