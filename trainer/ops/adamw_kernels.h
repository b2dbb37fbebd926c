// AdamW's update over many parameters in one sweep, writing each parameter's
// low-precision copy (MixedLinear's shadow weights) in the same pass: the copy then needs
// no refresh of its own, which read every float32 weight a second time each step. Plain
// launch functions on raw pointers, no LibTorch (trainer/ops/fused_adamw.cpp is the
// LibTorch side).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::adamw {

/// One parameter's tensors: float32, dense, all laid out alike, `numel` elements each.
struct TensorSet {
  float* param = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  const float* step = nullptr;  ///< the parameter's step count (already incremented)
  void* copy = nullptr;         ///< numel elements of the copy dtype, or null: no copy
  int64_t numel = 0;
};

struct Hyper {
  const float* lr_ptr = nullptr;  ///< a float32 learning rate on the device, or null: `lr`
  double lr = 0;
  double beta1 = 0;
  double beta2 = 0;
  double weight_decay = 0;
  double eps = 0;
};

/// AdamW (decoupled weight decay; no amsgrad, no maximize, no gradient scale) with
/// at::_fused_adamw_'s float32 arithmetic, term for term, so the parameters and moments
/// come out as ATen's do; then copy = the updated parameter rounded to nearest even in
/// `copy_dtype` (kBFloat16 or kFloat16) where a set has one. Enqueues one kernel per
/// kMaxSetsPerLaunch sets; no allocation, no host synchronisation, capturable. Returns
/// nullptr, or a static message for invalid arguments or a failed launch.
const char* Step(const TensorSet* sets, int count, ElementType copy_dtype, const Hyper& hyper,
                 cudaStream_t stream);

/// Sets one kernel launch takes (its parameter block stays under 4 KB).
constexpr int kMaxSetsPerLaunch = 48;

}  // namespace ringpilot::trainer::ops::adamw
