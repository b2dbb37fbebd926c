// 2-D max-pool of channels-last activations with a compact backward (ResNet's stem).
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// at::max_pool2d(x, kernel, stride, padding) (dilation 1, floor mode): the same values,
/// and the gradient of each window routed to its first maximum in row-major order (a NaN
/// wins), as ATen. Where MaxPoolKernelSupported(x, ...) holds, ringpilot's kernels run
/// (trainer/ops/max_pool_kernels.h): one uint8 window offset per output element is saved
/// instead of ATen's int64 input index (8x less), and backward gathers from the windows
/// covering each input element, writing every input gradient once (ATen zero-fills, then
/// runs a channels-last backward that took 1.8 ms for ResNet-50's stem at batch 256 on an
/// H200). Elsewhere at::max_pool2d. Differentiable in x; capturable in CUDA graphs.
at::Tensor MaxPool2d(const at::Tensor& x, int kernel, int stride, int padding);

/// A CUDA build, x a 4-D CUDA tensor contiguous in channels_last, float32 or bfloat16,
/// kernel * kernel <= 255, 0 <= padding <= kernel / 2, stride >= 1, a non-empty output.
bool MaxPoolKernelSupported(const at::Tensor& x, int kernel, int stride, int padding);

}  // namespace ringpilot::trainer::ops
