// ATen scalar types to the kernels' ElementType (the kernel headers stay free of ATen so
// nvcc compiles them quickly).
#pragma once

#include <c10/core/ScalarType.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops {

/// kFloat32, kBFloat16 or kFloat16 for at::kFloat, at::kBFloat16, at::kHalf; callers check
/// the type is one their kernel supports before launching it.
inline ElementType ElementTypeOf(c10::ScalarType t) {
  return t == c10::kBFloat16 ? ElementType::kBFloat16
         : t == c10::kHalf   ? ElementType::kFloat16
                             : ElementType::kFloat32;
}

}  // namespace ringpilot::trainer::ops
