// Training-mode BatchNorm2d fused with an optional residual add and ReLU, for
// channels-last activations (CUDA kernels in fused_batch_norm_forward.cu and
// fused_batch_norm_backward.cu; a plain ATen reference elsewhere so the autograd wiring is
// the same on every device).
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

namespace ringpilot::trainer::ops {

/// y = act(batch_norm(x) [+ residual]), act = ReLU when `relu`, with the maths of
/// torch.nn.functional.batch_norm(training=True) followed by `+ residual` and ReLU:
/// biased batch variance for normalising, running_mean / running_var (float32 [C],
/// updated in place) with the unbiased one, all arithmetic in float32, y in x's dtype.
/// x is [N, C, H, W] float32 or bfloat16 (the bf16 output of a convolution under
/// autocast); weight and bias float32 [C]; residual has x's shape. Differentiable in x,
/// weight, bias and residual. On CUDA tensors the fused kernels run (no host
/// synchronisation or allocation outside the caching allocator: CUDA-graph safe);
/// otherwise an ATen reference with the same semantics (which also takes float64 x,
/// weight and bias, and then computes in float64).
///
/// `accumulate_param_grads`: where weight's and bias's .grad are contiguous float32
/// tensors (the gradient reducer's bucket views; grad_accumulation.h), backward adds their
/// gradients into them itself (on CUDA in the kernel that computes them) and returns none,
/// so autograd's AccumulateGrad adds nothing (its post-hooks still run): for ResNet-50 that
/// is 106 add kernels fewer per step. Not under double backward.
///
/// `num_batches_tracked` (optional, the module's one-element counter) is incremented by
/// one; when it is int64 on x's CUDA device, by the statistics kernel (no launch of its own).
///
/// With `relu` and no residual, backward recomputes the ReLU mask from x (bit for bit the
/// forward's) instead of saving and reading y. weight and bias are saved variables: a
/// backward after either was changed in place is refused by autograd's version check.
at::Tensor FusedBatchNormAct(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             at::Tensor running_mean, at::Tensor running_var, double momentum,
                             double eps, const c10::optional<at::Tensor>& residual, bool relu,
                             bool accumulate_param_grads = false,
                             const at::Tensor& num_batches_tracked = at::Tensor());

/// True when FusedBatchNormAct would run the fused CUDA kernels for x: a CUDA build,
/// x a 4-D CUDA tensor contiguous in channels_last, float32 or bfloat16.
bool FusedBatchNormSupported(const at::Tensor& x);

}  // namespace ringpilot::trainer::ops
