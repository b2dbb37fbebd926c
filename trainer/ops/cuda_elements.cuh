// Element conversions, vector loads and the alignment test shared by ringpilot's CUDA
// kernels (fused BatchNorm, column sums, max-pool, residual LayerNorm, GELU, AdamW): float32
// arithmetic on float, bfloat16 and float16 storage. nvcc only.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ringpilot::trainer::ops::cuda_elements {

/// Threads of a warp (the kernels' shuffles and per-warp row layouts assume it).
constexpr int kWarp = 32;

/// Whether `p` is a multiple of `bytes` (the vector paths' 16-, 8- and 4-byte accesses).
__host__ __device__ inline bool AlignedTo(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    static_assert(std::is_same_v<T, __half>, "float, __nv_bfloat16 or __half");
    return __half2float(v);
  }
}

/// Round to nearest even.
template <typename T>
__device__ __forceinline__ T FromFloat(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    static_assert(std::is_same_v<T, __half>, "float, __nv_bfloat16 or __half");
    return __float2half_rn(v);
  }
}

/// VEC elements loaded or stored as one aligned access (16 bytes for VEC * sizeof(T) = 16).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

}  // namespace ringpilot::trainer::ops::cuda_elements
