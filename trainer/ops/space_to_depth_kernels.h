// CUDA kernel of ops::SpaceToDepthConv2d's input rearrangement: a channels-last (NHWC)
// image padded and regrouped into 2x2 blocks in one pass. Plain launch function on raw
// pointers, no LibTorch (trainer/ops/space_to_depth_conv.cpp is the LibTorch side).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "trainer/ops/element_type.h"

namespace ringpilot::trainer::ops::space_to_depth {

/// Input [n, h, w, c] and output [n, rows, cols, 4 * block_channels] in memory order;
/// block_channels >= c and even (so an output pixel is whole 16-byte vectors).
struct Shape {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t rows = 0, cols = 0, block_channels = 0;
  int64_t padding = 0;
};

/// out[i, Y, X, (ry * 2 + rx) * block_channels + ch] = x[i, 2Y + ry - padding,
/// 2X + rx - padding, ch] where that is inside x and ch < c, else 0. float32 or bfloat16,
/// 16-byte aligned pointers; fewer than 2^31 output pixels. No host synchronisation;
/// capturable. Returns nullptr, or a static message for invalid arguments or a failed launch.
const char* Forward(const void* x, void* out, const Shape& shape, ElementType dtype,
                    cudaStream_t stream);

}  // namespace ringpilot::trainer::ops::space_to_depth
