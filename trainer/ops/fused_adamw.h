// AdamW over a parameter list that also writes the parameters' low-precision copies (the
// shadow weights of trainer/ops/mixed_linear.h) as it updates them.
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

struct AdamWHyper {
  at::Tensor lr_tensor;  ///< a float32 scalar on the parameters' device, or undefined: `lr`
  double lr = 0;
  double beta1 = 0;
  double beta2 = 0;
  double weight_decay = 0;
  double eps = 0;
};

/// at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, ...) with amsgrad and
/// maximize off, then copies[i].copy_(params[i]) for each defined copies[i] (a bfloat16 or
/// float16 tensor of params[i]'s shape): the same values. `steps` are float32 scalars,
/// already incremented (as _fused_adamw_ takes them). Lists are parallel; `copies` may be
/// shorter (missing entries: no copy). On CUDA one sweep (trainer/ops/adamw_kernels.h) over
/// contiguous float32 tensors with copies of one dtype; elsewhere, and without copies,
/// ATen's calls. No host synchronisation; capturable.
void FusedAdamWWithCopies(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                          at::TensorList exp_avg_sqs, at::TensorList steps, at::TensorList copies,
                          const AdamWHyper& hyper);

/// copies[i] = params[i] (rounded to the copy's dtype) for each defined copies[i], written
/// as the CUDA kernel writes them: through the memory, without bumping the copies' autograd
/// version counter (a model's copies are views of one buffer that MixedLinear's backward
/// nodes save, and the write is not a change autograd should check them against).
void WriteLowPrecisionCopies(at::TensorList params, at::TensorList copies);

}  // namespace ringpilot::trainer::ops
