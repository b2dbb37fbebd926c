// A stride-2 convolution over few input channels, computed as a stride-1 convolution over
// 2x2 space-to-depth blocks (ResNet's 7x7 stem).
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// at::conv2d(x, weight, /*bias=*/{}, /*stride=*/2, padding) for x [n, c, h, w] and weight
/// [o, c, k, k], computed as a k' x k' stride-1 convolution (k' = ceil(k / 2)) over the
/// padded input rearranged into 2x2 blocks: [n, 4 * c', h' / 2, w' / 2], c' = c rounded up
/// to a multiple of 2 so that 4 * c' is a multiple of 8. The weight is rearranged the same
/// way (zero taps past k, zero channels past c) on every call; both rearrangements are
/// differentiable, so x and weight get their ordinary gradients, and the parameter keeps its
/// [o, c, k, k] shape (checkpoints and reference weights unchanged).
///
/// Why: cuDNN runs ResNet-50's 7x7 stride-2 stem over 3 channels by padding them to 8 and
/// an Ampere-era kernel (1.55 ms forward and 1.72 ms weight gradient of a 37 ms step at batch
/// 256 on an H200, 10% of the step for 2% of its FLOPs); as a 4x4 convolution over 16
/// channels it is an ordinary implicit GEMM with K = 256. The same sums in another order:
/// equal within the rounding of x's dtype. The output is channels_last when x is.
///
/// Under CUDA autocast x and the weight are used in the autocast dtype, as at::conv2d
/// would. The blocks are made by one kernel on CUDA (trainer/ops/space_to_depth_kernels.h)
/// and are not kept for backward, which makes them again from x: the step's peak memory
/// stays that of the strided convolution.
at::Tensor SpaceToDepthConv2d(const at::Tensor& x, const at::Tensor& weight, int64_t padding);

}  // namespace ringpilot::trainer::ops
