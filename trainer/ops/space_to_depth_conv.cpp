#include "trainer/ops/space_to_depth_conv.h"

#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include "trainer/ops/low_precision.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/space_to_depth_kernels.h"
#include "trainer/ops/tensor_element_type.h"
#endif

namespace ringpilot::trainer::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Sizes of the rearrangement for x [n, c, h, w], a k x k kernel and `padding`.
struct Geometry {
  int64_t n, c, h, w, k, padding;
  int64_t out_h, out_w;
  int64_t taps;      // k' of the stride-1 convolution
  int64_t channels;  // c rounded up to even: 4 * channels is a multiple of 8
  // Output row y reads padded rows 2y .. 2y + 2 * taps - 1: the padded input needs
  // 2 * (out_h + taps - 1) rows, which may be more or fewer than h + 2 * padding.
  int64_t rows, cols;  // of the padded input (the blocks are rows / 2 x cols / 2)
};

Geometry GeometryOf(const at::Tensor& x, int64_t k, int64_t padding) {
  Geometry g{};
  g.n = x.size(0);
  g.c = x.size(1);
  g.h = x.size(2);
  g.w = x.size(3);
  g.k = k;
  g.padding = padding;
  g.out_h = (g.h + 2 * padding - k) / 2 + 1;
  g.out_w = (g.w + 2 * padding - k) / 2 + 1;
  g.taps = (k + 1) / 2;
  g.channels = (g.c + 1) / 2 * 2;
  g.rows = 2 * (g.out_h + g.taps - 1);
  g.cols = 2 * (g.out_w + g.taps - 1);
  return g;
}

// constant_pad_nd's pads of [n, h, w, c] (negative ones crop).
std::vector<int64_t> Pads(const Geometry& g) {
  return {0,         g.channels - g.c,        g.padding, g.cols - g.w - g.padding,
          g.padding, g.rows - g.h - g.padding};
}

// The blocks [n, 4c', rows/2, cols/2], channels_last: block channel (ry * 2 + rx) * c' + ch
// holds padded pixel (2Y + ry, 2X + rx) of channel ch. One kernel on CUDA; elsewhere a pad
// and a permuted copy.
at::Tensor Blocks(const at::Tensor& x, const Geometry& g) {
#ifdef RINGPILOT_WITH_CUDA
  if (x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat) &&
      x.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor out = at::empty({g.n, 4 * g.channels, g.rows / 2, g.cols / 2},
                               x.options().memory_format(at::MemoryFormat::ChannelsLast));
    space_to_depth::Shape s;
    s.n = g.n;
    s.h = g.h;
    s.w = g.w;
    s.c = g.c;
    s.rows = g.rows / 2;
    s.cols = g.cols / 2;
    s.block_channels = g.channels;
    s.padding = g.padding;
    const char* error =
        space_to_depth::Forward(x.data_ptr(), out.data_ptr(), s, ElementTypeOf(x.scalar_type()),
                                at::cuda::getCurrentCUDAStream(x.get_device()));
    if (error == nullptr) return out;
  }
#endif
  // A permute of a channels_last x costs nothing: work in the memory order [n, h, w, c].
  return at::constant_pad_nd(x.permute({0, 2, 3, 1}), Pads(g))
      .view({g.n, g.rows / 2, 2, g.cols / 2, 2, g.channels})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({g.n, g.rows / 2, g.cols / 2, 4 * g.channels})
      .permute({0, 3, 1, 2})
      .contiguous(x.suggest_memory_format());
}

// Blocks' inverse for gradients: [n, 4c', rows/2, cols/2] -> [n, c, h, w].
at::Tensor FromBlocks(const at::Tensor& blocks, const Geometry& g) {
  std::vector<int64_t> unpad = Pads(g);
  for (int64_t& p : unpad) p = -p;
  return at::constant_pad_nd(blocks.permute({0, 2, 3, 1})
                                 .reshape({g.n, g.rows / 2, g.cols / 2, 2, 2, g.channels})
                                 .permute({0, 1, 3, 2, 4, 5})
                                 .reshape({g.n, g.rows, g.cols, g.channels}),
                             unpad)
      .permute({0, 3, 1, 2});
}

// weight[o, ch, 2A + ry, 2B + rx] -> block weight [o, (ry * 2 + rx) * c' + ch, A, B], zero
// taps past k and channels past c.
at::Tensor BlockWeight(const at::Tensor& weight, const Geometry& g) {
  const int64_t o = weight.size(0), pad = 2 * g.taps - g.k;
  return at::constant_pad_nd(weight, {0, pad, 0, pad, 0, g.channels - g.c})
      .view({o, g.channels, g.taps, 2, g.taps, 2})
      .permute({0, 3, 5, 1, 2, 4})
      .reshape({o, 4 * g.channels, g.taps, g.taps});
}

// BlockWeight's inverse for gradients.
at::Tensor FromBlockWeight(const at::Tensor& block_weight, const Geometry& g) {
  const int64_t o = block_weight.size(0);
  return block_weight.reshape({o, 2, 2, g.channels, g.taps, g.taps})
      .permute({0, 3, 4, 1, 5, 2})
      .reshape({o, g.channels, 2 * g.taps, 2 * g.taps})
      .slice(1, 0, g.c)
      .slice(2, 0, g.k)
      .slice(3, 0, g.k);
}

// Saves x (the batch, alive anyway), not the blocks: backward makes them again (one light
// pass) instead of keeping 1.4x the input's bytes through the step.
class SpaceToDepthConvFn : public torch::autograd::Function<SpaceToDepthConvFn> {
 public:
  // x and weight already in the compute dtype.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            int64_t padding) {
    const Geometry g = GeometryOf(x, weight.size(2), padding);
    const auto format = x.suggest_memory_format();
    ctx->save_for_backward({x, weight});
    ctx->saved_data["padding"] = padding;
    return at::conv2d(Blocks(x, g), BlockWeight(weight, g).contiguous(format));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const Geometry g = GeometryOf(x, weight.size(2), ctx->saved_data["padding"].toInt());
    const auto format = x.suggest_memory_format();
    const at::Tensor blocks = Blocks(x, g);
    const at::Tensor block_weight = BlockWeight(weight, g).contiguous(format);
    const at::Tensor dy = grads[0].to(blocks.scalar_type()).contiguous(format);
    auto [d_blocks, d_block_weight, d_bias] = at::convolution_backward(
        dy, blocks, block_weight, /*bias_sizes=*/c10::nullopt, /*stride=*/{1, 1},
        /*padding=*/{0, 0}, /*dilation=*/{1, 1}, /*transposed=*/false, /*output_padding=*/{0, 0},
        /*groups=*/1, {ctx->needs_input_grad(0), ctx->needs_input_grad(1), false});
    (void)d_bias;
    variable_list result(3);
    if (d_blocks.defined()) result[0] = FromBlocks(d_blocks, g);
    if (d_block_weight.defined()) result[1] = FromBlockWeight(d_block_weight, g);
    return result;
  }
};

}  // namespace

at::Tensor SpaceToDepthConv2d(const at::Tensor& x, const at::Tensor& weight, int64_t padding) {
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1) &&
                  weight.size(2) == weight.size(3) && padding >= 0,
              "SpaceToDepthConv2d: x [n, c, h, w] and a square weight [o, c, k, k], got x ",
              x.sizes(), " and weight ", weight.sizes());
  const Geometry g = GeometryOf(x, weight.size(2), padding);
  TORCH_CHECK(g.out_h > 0 && g.out_w > 0, "SpaceToDepthConv2d: empty output for x ", x.sizes());
  // Autocast's cast, made here so that backward recomputes the blocks in the same dtype;
  // the weight's gradient goes back to the parameter's dtype through the cast's backward.
  const at::ScalarType dtype = AutocastDtypeFor(x);
  return SpaceToDepthConvFn::apply(x.to(dtype), weight.to(dtype), padding);
}

}  // namespace ringpilot::trainer::ops
