// BERT's post-LayerNorm residual block, LayerNorm(dropout(branch) + residual), as one
// kernel per direction under low-precision autocast.
//
// Composed from ATen under bf16 autocast the block is a dropout, a float32 add, a
// LayerNorm and a cast of its output for the next linear layer; backward adds the two
// gradients of that output, runs LayerNorm's backward (input, then parameter gradients),
// casts the branch gradient and runs dropout's backward: ~3.7 ms of BERT-base's 16 ms
// step at batch 64 on an H200, over ~250 kernels, nearly all memory traffic.
#pragma once

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// What ResidualLayerNorm returns.
struct ResidualNorm {
  at::Tensor out;      ///< float32, residual's shape: the block's output (the next residual)
  at::Tensor out_low;  ///< `out` in branch's dtype, rounded to nearest: the next linear's input
  at::Tensor keep;     ///< uint8, branch's shape: 1 where dropout kept the element;
                       ///< undefined when p == 0. Not differentiable.
};

/// out = LayerNorm(dropout(branch, p) + residual) over the last dimension, with `weight`
/// and `bias` (float32 [H]) and `eps`; branch bf16/fp16/float32, residual float32, both
/// [..., H] with the same shape. Dropout keeps each element with probability 1 - p and
/// scales it by 1 / (1 - p); its draws come from ATen's default generator of the device
/// (CUDA: Philox, graph-safe: every replay of a captured step draws a fresh mask).
///
/// Gradients flow to branch, residual, weight and bias from both outputs (the gradient
/// of `out_low` is added to that of `out`). With `accumulate_param_grads`, where weight's
/// and bias's .grad are contiguous float32 tensors (the gradient reducer's bucket views),
/// backward adds their gradients into them itself and returns none, as MixedLinear's
/// accumulate_into_grad does; not under double backward.
///
/// CUDA, branch bf16/fp16, H a multiple of 4 and <= 1024: one kernel forward (float32
/// statistics per row, two-pass variance), three backward (one pass over rows, then a
/// fixed-order sum of per-block parameter-gradient partials: deterministic). Elsewhere
/// the same maths from ATen ops (LayerNorm of trainer/ops/layer_norm.h). Thread-safe as ATen
/// ops are; no host synchronisation.
ResidualNorm ResidualLayerNorm(const at::Tensor& branch, const at::Tensor& residual,
                               const at::Tensor& weight, const at::Tensor& bias, double eps,
                               double p, bool accumulate_param_grads = false);

}  // namespace ringpilot::trainer::ops
