#include "trainer/ops/layer_norm.h"

#include <array>
#include <tuple>

#include <torch/autograd.h>

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/column_sum_kernels.h"
#endif

namespace ringpilot::trainer::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Weight and bias gradients by the column-sum kernel; false where it does not apply.
bool KernelParamGrads(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& mean,
                      const at::Tensor& rstd, at::Tensor& grad_weight, at::Tensor& grad_bias) {
#ifdef RINGPILOT_WITH_CUDA
  if (!x.is_cuda() || x.scalar_type() != at::kFloat || dy.scalar_type() != at::kFloat) {
    return false;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  namespace cs = column_sum;
  const int64_t cols = x.size(-1);
  cs::LayerNormArgs a;
  a.dy = dy.data_ptr<float>();
  a.x = x.data_ptr<float>();
  a.mean = mean.data_ptr<float>();
  a.rstd = rstd.data_ptr<float>();
  a.rows = x.numel() / cols;
  a.cols = cols;
  grad_weight = at::empty({cols}, x.options());
  grad_bias = at::empty({cols}, x.options());
  a.grad_weight = grad_weight.data_ptr<float>();
  a.grad_bias = grad_bias.data_ptr<float>();
  const int64_t floats = cs::WorkspaceFloats(a);
  const at::Tensor workspace = at::empty({floats}, x.options());
  a.workspace = floats > 0 ? workspace.data_ptr<float>() : nullptr;
  const char* error = cs::LayerNormParamGrads(a, at::cuda::getCurrentCUDAStream(x.get_device()));
  TORCH_CHECK(error == nullptr, "LayerNorm backward: ", error);
  return true;
#else
  (void)dy, (void)x, (void)mean, (void)rstd, (void)grad_weight, (void)grad_bias;
  return false;
#endif
}

class LayerNormFn : public torch::autograd::Function<LayerNormFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, double eps) {
    const at::Tensor xc = x.contiguous();
    auto [y, mean, rstd] = at::native_layer_norm(xc, {x.size(-1)}, weight, bias, eps);
    ctx->save_for_backward({xc, weight, bias, mean, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    const at::Tensor& x = s[0];
    const at::Tensor dy = grads[0].contiguous();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                      ctx->needs_input_grad(2)};
    at::Tensor dw, db;
    const bool kernel = (mask[1] || mask[2]) && KernelParamGrads(dy, x, s[3], s[4], dw, db);
    const std::array<bool, 3> aten_mask = {mask[0], mask[1] && !kernel, mask[2] && !kernel};
    at::Tensor dx;
    if (aten_mask[0] || aten_mask[1] || aten_mask[2]) {
      at::Tensor aten_dw, aten_db;
      std::tie(dx, aten_dw, aten_db) =
          at::native_layer_norm_backward(dy, x, {x.size(-1)}, s[3], s[4], s[1], s[2], aten_mask);
      if (!kernel) dw = aten_dw, db = aten_db;
    }
    return {dx, mask[1] ? dw : at::Tensor(), mask[2] ? db : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     double eps) {
  // Autocast runs layer_norm in float32; the Function's native_layer_norm is not on its
  // lists, so the cast is ours.
  const at::Tensor xf = x.scalar_type() == weight.scalar_type() ? x : x.to(weight.scalar_type());
  return LayerNormFn::apply(xf, weight, bias, eps);
}

}  // namespace ringpilot::trainer::ops
