#include "trainer/ops/residual_norm.h"

#include <cstdint>
#include <mutex>
#include <vector>

#include <torch/autograd.h>

#include "trainer/ops/grad_accumulation.h"
#include "trainer/ops/layer_norm.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/residual_norm_kernels.h"
#include "trainer/ops/tensor_element_type.h"
#endif

namespace ringpilot::trainer::ops {

namespace {

// ATen's dropout draws (its default generator of the device), so checkpointed RNG state
// and CUDA-graph replays behave as with at::dropout.
ResidualNorm Composed(const at::Tensor& branch, const at::Tensor& residual,
                      const at::Tensor& weight, const at::Tensor& bias, double eps, double p) {
  ResidualNorm r;
  at::Tensor kept = branch.to(at::kFloat);
  if (p > 0) {
    r.keep = at::rand(branch.sizes(), branch.options().dtype(at::kFloat)).lt(1.0 - p).to(at::kByte);
    kept = kept * r.keep * (1.0 / (1.0 - p));
  }
  r.out = LayerNorm(kept + residual, weight, bias, eps);
  r.out_low = r.out.to(branch.scalar_type());
  return r;
}

#ifdef RINGPILOT_WITH_CUDA
namespace rn = residual_norm;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool Aligned(const at::Tensor& t, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % bytes == 0;
}

// Contiguous, and on the kernels' vector boundary (a view may start anywhere): a copy
// where it is not.
at::Tensor ForKernel(const at::Tensor& t, uintptr_t bytes) {
  at::Tensor c = t.contiguous();
  return Aligned(c, bytes) ? c : c.clone();
}

bool KernelApplies(const at::Tensor& branch, const at::Tensor& residual, const at::Tensor& weight,
                   const at::Tensor& bias) {
  const auto dtype = branch.scalar_type();
  const int64_t h = residual.dim() > 0 ? residual.size(-1) : 0;
  return branch.is_cuda() && (dtype == at::kBFloat16 || dtype == at::kHalf) &&
         residual.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
         bias.scalar_type() == at::kFloat && branch.sizes() == residual.sizes() &&
         weight.dim() == 1 && weight.size(0) == h && bias.dim() == 1 && bias.size(0) == h &&
         residual.device() == branch.device() && weight.device() == branch.device() &&
         bias.device() == branch.device() && rn::Supported(h) && weight.is_contiguous() &&
         bias.is_contiguous() && Aligned(weight, 16) && Aligned(bias, 16);
}

class ResidualNormFn : public torch::autograd::Function<ResidualNormFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& branch_in,
                               const at::Tensor& residual_in, const at::Tensor& weight,
                               const at::Tensor& bias, double eps, double p, bool accumulate) {
    const c10::cuda::CUDAGuard guard(branch_in.device());
    const at::Tensor branch = ForKernel(branch_in, 8), residual = ForKernel(residual_in, 16);
    const int64_t h = residual.size(-1), rows = residual.numel() / h;
    rn::ForwardArgs a;
    at::Tensor out = at::empty_like(residual, at::MemoryFormat::Contiguous);
    at::Tensor z = at::empty_like(out);
    at::Tensor out_low = at::empty_like(branch, at::MemoryFormat::Contiguous);
    at::Tensor mean = at::empty({rows}, out.options()), rstd = at::empty({rows}, out.options());
    // An empty uint8 tensor stands for "no mask": a Function's outputs must be tensors.
    const std::vector<int64_t> no_mask{0};
    at::Tensor keep = at::empty(p > 0 ? branch.sizes() : at::IntArrayRef(no_mask),
                                branch.options().dtype(at::kByte));
    if (p > 0) {
      auto* gen = at::check_generator<at::CUDAGeneratorImpl>(
          at::cuda::detail::getDefaultCUDAGenerator(branch.get_device()));
      at::PhiloxCudaState state;
      {
        const std::lock_guard<std::mutex> lock(gen->mutex_);
        state = gen->philox_cuda_state(rn::kPhiloxIncrement);
      }
      if (state.captured_) {
        a.philox.seed_ptr = state.seed_.ptr;
        a.philox.offset_ptr = state.offset_.ptr;
        a.philox.offset_intragraph = state.offset_intragraph_;
      } else {
        a.philox.seed = state.seed_.val;
        a.philox.offset = state.offset_.val;
      }
      a.keep_mask = keep.data_ptr<uint8_t>();
    }
    a.branch = branch.data_ptr();
    a.residual = residual.data_ptr<float>();
    a.weight = weight.data_ptr<float>();
    a.bias = bias.data_ptr<float>();
    a.dtype = ElementTypeOf(branch.scalar_type());
    a.rows = rows;
    a.cols = h;
    a.eps = static_cast<float>(eps);
    a.keep = static_cast<float>(1.0 - p);
    a.out = out.data_ptr<float>();
    a.out_low = out_low.data_ptr();
    a.z = z.data_ptr<float>();
    a.mean = mean.data_ptr<float>();
    a.rstd = rstd.data_ptr<float>();
    const char* error = rn::Forward(a, at::cuda::getCurrentCUDAStream(branch.get_device()));
    TORCH_CHECK(error == nullptr, "ResidualLayerNorm forward: ", error);
    ctx->save_for_backward({z, mean, rstd, weight, bias, keep});
    ctx->saved_data["keep"] = 1.0 - p;
    ctx->saved_data["branch_dtype"] = static_cast<int64_t>(branch.scalar_type());
    ctx->saved_data["accumulate"] = accumulate;
    ctx->set_materialize_grads(false);  // an unused output's gradient: none, not zeros
    ctx->mark_non_differentiable({keep});
    return {out, out_low, keep};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    const at::Tensor &z = s[0], &weight = s[3], &bias = s[4], &keep = s[5];
    variable_list result(7);
    const at::Tensor grad_out = grads[0].defined() ? ForKernel(grads[0], 16) : at::Tensor();
    const at::Tensor grad_low = grads[1].defined() ? ForKernel(grads[1], 8) : at::Tensor();
    if (!grad_out.defined() && !grad_low.defined()) return result;
    const c10::cuda::CUDAGuard guard(z.device());
    rn::BackwardArgs a;
    a.grad_out = grad_out.defined() ? grad_out.data_ptr<float>() : nullptr;
    a.grad_out_low = grad_low.defined() ? grad_low.data_ptr() : nullptr;
    a.z = z.data_ptr<float>();
    a.mean = s[1].data_ptr<float>();
    a.rstd = s[2].data_ptr<float>();
    a.weight = weight.data_ptr<float>();
    a.keep_mask = keep.numel() > 0 ? keep.data_ptr<uint8_t>() : nullptr;
    const auto branch_dtype = static_cast<at::ScalarType>(ctx->saved_data["branch_dtype"].toInt());
    a.dtype = ElementTypeOf(branch_dtype);
    a.cols = z.size(-1);
    a.rows = z.numel() / a.cols;
    a.keep = static_cast<float>(ctx->saved_data["keep"].toDouble());
    at::Tensor grad_branch, grad_residual;
    if (ctx->needs_input_grad(0)) {
      grad_branch = at::empty(z.sizes(), z.options().dtype(branch_dtype));
      a.grad_branch = grad_branch.data_ptr();
    }
    if (ctx->needs_input_grad(1)) {
      grad_residual = at::empty_like(z);
      a.grad_residual = grad_residual.data_ptr<float>();
    }
    at::Tensor gw = weight.grad(), gb = bias.grad();
    a.accumulate = ctx->saved_data["accumulate"].toBool() && CanAccumulateInto(gw, weight) &&
                   CanAccumulateInto(gb, bias);
    if (!a.accumulate) {
      gw = at::empty_like(weight, at::MemoryFormat::Contiguous);
      gb = at::empty_like(bias, at::MemoryFormat::Contiguous);
    }
    a.grad_weight = gw.data_ptr<float>();
    a.grad_bias = gb.data_ptr<float>();
    const at::Tensor workspace = at::empty({rn::WorkspaceFloats(a)}, z.options());
    a.workspace = workspace.data_ptr<float>();
    const char* error = rn::Backward(a, at::cuda::getCurrentCUDAStream(z.get_device()));
    TORCH_CHECK(error == nullptr, "ResidualLayerNorm backward: ", error);
    result[0] = grad_branch;
    result[1] = grad_residual;
    // Accumulated: no gradient returned, AccumulateGrad adds nothing and still runs its
    // post-hooks (the gradient reducer's).
    if (!a.accumulate) {
      result[2] = ctx->needs_input_grad(2) ? gw : at::Tensor();
      result[3] = ctx->needs_input_grad(3) ? gb : at::Tensor();
    }
    return result;
  }
};
#endif

}  // namespace

ResidualNorm ResidualLayerNorm(const at::Tensor& branch, const at::Tensor& residual,
                               const at::Tensor& weight, const at::Tensor& bias, double eps,
                               double p, bool accumulate_param_grads) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "ResidualLayerNorm: dropout probability ", p,
              " is outside [0, 1)");
#ifdef RINGPILOT_WITH_CUDA
  if (KernelApplies(branch, residual, weight, bias)) {
    const variable_list outs =
        ResidualNormFn::apply(branch, residual, weight, bias, eps, p, accumulate_param_grads);
    return {outs[0], outs[1], p > 0 ? outs[2] : at::Tensor()};
  }
#endif
  (void)accumulate_param_grads;
  return Composed(branch, residual, weight, bias, eps, p);
}

}  // namespace ringpilot::trainer::ops
