#include "trainer/ops/pointwise_conv.h"

#include <torch/autograd.h>

#include "trainer/ops/low_precision.h"

namespace ringpilot::trainer::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [n, c, h, w] channels_last as the [n * h * w, c] matrix it is in memory (a view: fails
// rather than copies for any other layout).
at::Tensor Rows(const at::Tensor& t) { return t.permute({0, 2, 3, 1}).view({-1, t.size(1)}); }

class PointwiseConvFn : public torch::autograd::Function<PointwiseConvFn> {
 public:
  // x: channels_last, already in the compute dtype; weight: the parameter.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x,
                               const at::Tensor& weight) {
    const int64_t n = x.size(0), h = x.size(2), w = x.size(3), out = weight.size(0);
    const at::Tensor w_low = weight.reshape({out, x.size(1)}).to(x.scalar_type());
    const at::Tensor y = at::mm(Rows(x), w_low.t()).view({n, h, w, out}).permute({0, 3, 1, 2});
    ctx->save_for_backward({x, w_low});
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    // Returned unchanged, x becomes a view of itself with this node as its history.
    return {y, x};
  }

  // `grads` by reference: the engine's list, so that moving the shortcut's gradient out of
  // it leaves this node the only holder when autograd gave it to no other node.
  static variable_list backward(AutogradContext* ctx, variable_list& grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w_low = saved[1];
    const auto weight_dtype = ctx->saved_data["weight_dtype"].toScalarType();
    at::Tensor dy = grads[0];
    at::Tensor d_shortcut = std::move(grads[1]);
    variable_list result(2);
    if (!dy.defined()) {
      result[0] = d_shortcut;
      return result;
    }
    dy = dy.to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor dy_rows = Rows(dy);
    if (ctx->needs_input_grad(1)) {
      result[1] = MatmulIn(dy_rows.t(), Rows(x), weight_dtype).unsqueeze(-1).unsqueeze(-1);
    }
    if (ctx->needs_input_grad(0)) {
      if (!d_shortcut.defined()) {
        result[0] = at::mm(dy_rows, w_low)
                        .view({x.size(0), x.size(2), x.size(3), x.size(1)})
                        .permute({0, 3, 1, 2});
      } else {
        // In place only when this node holds the shortcut's gradient alone: an add's
        // backward, for one, hands the same tensor to both of its inputs.
        const bool own = d_shortcut.use_count() == 1 && d_shortcut.storage().use_count() == 1 &&
                         d_shortcut.scalar_type() == x.scalar_type() &&
                         d_shortcut.sizes() == x.sizes() &&
                         d_shortcut.is_contiguous(at::MemoryFormat::ChannelsLast);
        at::Tensor dx =
            own ? d_shortcut : d_shortcut.to(x.scalar_type()).clone(at::MemoryFormat::ChannelsLast);
        Rows(dx).addmm_(dy_rows, w_low);  // a view: the GEMM writes into dx
        result[0] = dx;
      }
    }
    return result;
  }
};

}  // namespace

PointwiseConvAndShortcut PointwiseConvWithShortcut(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1) &&
                  weight.size(2) == 1 && weight.size(3) == 1,
              "PointwiseConvWithShortcut: x [n, c, h, w] and weight [o, c, 1, 1], got x ",
              x.sizes(), " and weight ", weight.sizes());
  const at::Tensor input = x.to(AutocastDtypeFor(x)).contiguous(at::MemoryFormat::ChannelsLast);
  variable_list out = PointwiseConvFn::apply(input, weight);
  return {out[0], out[1]};
}

}  // namespace ringpilot::trainer::ops
