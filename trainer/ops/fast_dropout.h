// Inverted dropout whose CPU masks come from a counter-based hash instead of ATen's
// per-element Bernoulli draws (`bernoulli_` was 14 of 274 ms in a one-core bert-tiny step).
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace ringpilot::trainer::ops {

/// x with each element kept with probability 1 - p and scaled by 1 / (1 - p), zeroed
/// otherwise; differentiable in x (the gradient uses the same mask). p in [0, 1).
/// p == 0: x itself. CUDA tensors: at::dropout (ATen's Philox kernels are already fast).
/// CPU: the mask of element i is a hash of (seed, i), the seed one 64-bit draw from the
/// default CPU generator per call, so the generator's state (checkpointed by the trainer)
/// reproduces it; deterministic for any thread count. Thread-safe as ATen ops are.
at::Tensor Dropout(const at::Tensor& x, double p);

/// The CPU mask itself, for tests: element i is 1 / (1 - p) or 0 as Dropout would use it.
at::Tensor DropoutMask(const at::IntArrayRef sizes, double p, uint64_t seed);

}  // namespace ringpilot::trainer::ops
