// The element types the CUDA kernels of trainer/ops handle: one enum for every kernel
// header (each kernel supports a subset and says which).
#pragma once

namespace ringpilot::trainer::ops {

enum class ElementType { kFloat32, kBFloat16, kFloat16 };

/// Bytes of one element.
constexpr int ElementBytes(ElementType t) { return t == ElementType::kFloat32 ? 4 : 2; }

}  // namespace ringpilot::trainer::ops
