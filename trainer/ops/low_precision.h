// Helpers of the ops that compute in autocast's low precision (bf16/fp16) while their
// parameters and gradients stay float32: which dtype autocast would compute in, and GEMMs
// whose result keeps the float32 accumulator.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

namespace ringpilot::trainer::ops {

/// The dtype at::conv2d or at::linear would compute x in: autocast's for x's device where
/// autocast is enabled there, else x's own.
inline at::ScalarType AutocastDtypeFor(const at::Tensor& x) {
  const at::DeviceType device = x.device().type();
  return at::autocast::is_autocast_enabled(device) ? at::autocast::get_autocast_dtype(device)
                                                   : x.scalar_type();
}

/// a @ b with a result of `dtype`: on CUDA, float32 straight from the GEMM's float32
/// accumulator for low-precision operands (mm's out_dtype); elsewhere the operands are
/// converted to `dtype` first.
inline at::Tensor MatmulIn(const at::Tensor& a, const at::Tensor& b, at::ScalarType dtype) {
  if (a.scalar_type() == dtype) return at::mm(a, b);
  if (a.is_cuda() && dtype == at::kFloat) return at::mm(a, b, at::kFloat);
  return at::mm(a.to(dtype), b.to(dtype));
}

}  // namespace ringpilot::trainer::ops
