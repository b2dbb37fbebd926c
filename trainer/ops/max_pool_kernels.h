// CUDA kernels of a 2-D max-pool over channels-last (NHWC) tensors that keep one uint8
// window offset per output element instead of ATen's int64 input index. Plain launch
// functions on raw pointers, no LibTorch (trainer/ops/max_pool.cpp is the LibTorch side).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::max_pool {

/// Input [n, h, w, c] and output [n, oh, ow, c] in memory order (NHWC), window `kernel` x
/// `kernel`, `stride`, `padding` (dilation 1, floor mode): oh = (h + 2 padding - kernel) /
/// stride + 1. Requires kernel * kernel <= 255 and padding <= kernel / 2 (as ATen).
struct Shape {
  int64_t n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int kernel = 3, stride = 2, padding = 1;
};

/// y = the window maxima; offset[o] = dh * kernel + dw of the maximum within the
/// (unclipped) window of output o: the first maximum in row-major order, a NaN winning
/// over numbers (ATen's rule). A window whose valid elements are all -inf keeps its first
/// valid element (ATen keeps input index 0 there). No host synchronisation; capturable.
/// Returns nullptr, or a static message for invalid arguments or a failed launch.
const char* Forward(const void* x, void* y, uint8_t* offset, const Shape& shape, ElementType dtype,
                    cudaStream_t stream);

/// dx[i] = sum of dy[o] over the outputs o whose window maximum is input i (float32 sums
/// in ascending (oh, ow) order, as ATen's channels-last backward). Writes every element
/// of dx. Same contract as Forward.
const char* Backward(const void* dy, const uint8_t* offset, void* dx, const Shape& shape,
                     ElementType dtype, cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::max_pool
