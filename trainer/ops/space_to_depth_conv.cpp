#include "trainer/ops/space_to_depth_conv.h"

#include <c10/util/Exception.h>

namespace ringpilot::trainer::ops {

at::Tensor SpaceToDepthConv2d(const at::Tensor& x, const at::Tensor& weight, int64_t padding) {
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1) &&
                  weight.size(2) == weight.size(3) && padding >= 0,
              "SpaceToDepthConv2d: x [n, c, h, w] and a square weight [o, c, k, k], got x ",
              x.sizes(), " and weight ", weight.sizes());
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t k = weight.size(2);
  const int64_t out_h = (h + 2 * padding - k) / 2 + 1, out_w = (w + 2 * padding - k) / 2 + 1;
  TORCH_CHECK(out_h > 0 && out_w > 0, "SpaceToDepthConv2d: empty output for x ", x.sizes());
  const int64_t taps = (k + 1) / 2;          // k' of the stride-1 convolution
  const int64_t channels = (c + 1) / 2 * 2;  // 4 * channels is a multiple of 8
  // Output row y reads padded rows 2y .. 2y + 2 * taps - 1: the padded input needs
  // 2 * (out_h + taps - 1) rows, which may be more or fewer than h + 2 * padding.
  const int64_t rows = 2 * (out_h + taps - 1), cols = 2 * (out_w + taps - 1);

  // Work in the memory order [n, h, w, c]: a permute of a channels_last x costs nothing.
  // constant_pad_nd takes negative padding as a crop, so one call pads or trims each side.
  const at::Tensor nhwc = x.permute({0, 2, 3, 1});
  const at::Tensor padded = at::constant_pad_nd(
      nhwc, {0, channels - c, padding, cols - w - padding, padding, rows - h - padding});
  // [n, rows/2, 2, cols/2, 2, c'] -> [n, rows/2, cols/2, 2 (ry), 2 (rx), c']: block channel
  // (ry * 2 + rx) * c' + ch holds padded pixel (2Y + ry, 2X + rx) of channel ch.
  const at::Tensor blocks = padded.view({n, rows / 2, 2, cols / 2, 2, channels})
                                .permute({0, 1, 3, 2, 4, 5})
                                .reshape({n, rows / 2, cols / 2, 4 * channels})
                                .permute({0, 3, 1, 2});

  // weight[o, ch, 2A + ry, 2B + rx] -> block weight [o, (ry * 2 + rx) * c' + ch, A, B].
  const int64_t o = weight.size(0);
  const at::Tensor block_weight =
      at::constant_pad_nd(weight, {0, 2 * taps - k, 0, 2 * taps - k, 0, channels - c})
          .view({o, channels, taps, 2, taps, 2})
          .permute({0, 3, 5, 1, 2, 4})
          .reshape({o, 4 * channels, taps, taps})
          .contiguous(x.suggest_memory_format());
  return at::conv2d(blocks.contiguous(x.suggest_memory_format()), block_weight);
}

}  // namespace ringpilot::trainer::ops
