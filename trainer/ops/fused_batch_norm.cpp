#include "trainer/ops/fused_batch_norm.h"

#include <torch/autograd.h>

#include "trainer/ops/grad_accumulation.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/fused_batch_norm_kernels.h"
#include "trainer/ops/tensor_element_type.h"
#endif

namespace ringpilot::trainer::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kReduceDims[] = {0, 2, 3};

std::vector<int64_t> ChannelShape(const at::Tensor& x) { return {1, x.size(1), 1, 1}; }

bool KernelDtype(const at::Tensor& x) {
  return x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16;
}

bool UseKernels(const at::Tensor& x) {
#ifdef RINGPILOT_WITH_CUDA
  return x.is_cuda() && KernelDtype(x);
#else
  (void)x;
  return false;
#endif
}

struct ForwardOut {
  at::Tensor y, mean, invstd;
  at::Tensor relu_bits;  ///< the kernels' ReLU mask bits (uint8), where they wrote them
};

struct BackwardOut {
  at::Tensor dx, grad_weight, grad_bias, dz;
};

// The arithmetic type of the ATen reference: float32 (what the kernels use), or float64
// for float64 inputs, so that a double-precision model can check the autograd wiring
// without float32 rounding (which flips ReLU masks between two implementations).
at::ScalarType MathType(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// The maths the kernels implement, in ATen ops (any device, any floating dtype).
ForwardOut ReferenceForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            at::Tensor& running_mean, at::Tensor& running_var, double momentum,
                            double eps, const at::Tensor& z, bool relu) {
  const auto shape = ChannelShape(x);
  const int64_t rows = x.numel() / x.size(1);
  const at::ScalarType math = MathType(x);
  at::Tensor xf = x.to(math);
  at::Tensor mean = xf.mean(kReduceDims);
  // Two passes (mean, then centred squares): as stable as the kernels' Welford merging.
  at::Tensor var = (xf - mean.view(shape)).square().mean(kReduceDims);
  at::Tensor invstd = (var + eps).rsqrt();
  at::Tensor y =
      (xf - mean.view(shape)) * (invstd * weight.to(math)).view(shape) + bias.to(math).view(shape);
  if (z.defined()) y.add_(z.to(math));
  if (relu) y.relu_();
  if (running_mean.defined()) {
    running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
  }
  if (running_var.defined()) {
    const double unbias = static_cast<double>(rows) / static_cast<double>(rows - 1);
    running_var.mul_(1 - momentum).add_((var * unbias).to(running_var.scalar_type()), momentum);
  }
  return {y.to(x.scalar_type()), mean, invstd, at::Tensor()};
}

// With relu and y undefined the mask is recomputed from x with ReferenceForward's
// arithmetic (valid without a residual), as the kernels do.
BackwardOut ReferenceBackward(const at::Tensor& dy, const at::Tensor& y, const at::Tensor& x,
                              const at::Tensor& weight, const at::Tensor& bias,
                              const at::Tensor& mean, const at::Tensor& invstd, bool relu,
                              bool want_dz) {
  const auto shape = ChannelShape(x);
  const double rows = static_cast<double>(x.numel() / x.size(1));
  const at::ScalarType math = MathType(x);
  at::Tensor g = dy.to(math);
  if (relu) {
    const at::Tensor pre =
        y.defined() ? y
                    : (x.to(math) - mean.view(shape)) * (invstd * weight.to(math)).view(shape) +
                          bias.to(math).view(shape);
    // threshold_backward's mask: a NaN output passes no gradient either.
    g = at::where(pre > 0, g, at::zeros({}, g.options()));
  }
  at::Tensor xhat = (x.to(math) - mean.view(shape)) * invstd.view(shape);
  at::Tensor grad_bias = g.sum(kReduceDims);
  at::Tensor grad_weight = (g * xhat).sum(kReduceDims);
  at::Tensor dx = (g - (grad_bias / rows).view(shape) - xhat * (grad_weight / rows).view(shape)) *
                  (weight.to(math) * invstd).view(shape);
  return {dx.to(x.scalar_type()), grad_weight, grad_bias,
          want_dz ? g.to(x.scalar_type()) : at::Tensor()};
}

#ifdef RINGPILOT_WITH_CUDA
float* OptionalPtr(at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// Shape, dtype and workspace fields common to ForwardArgs and BackwardArgs. The workspace
// comes from the caching allocator, so the step stays capturable; the caller keeps it alive
// until the kernels are enqueued.
template <typename Args>
at::Tensor SetShape(Args& a, const at::Tensor& x, int64_t rows, int64_t channels) {
  at::Tensor workspace =
      at::empty({fused_bn::WorkspaceFloats(rows, channels)}, x.options().dtype(at::kFloat));
  a.workspace = workspace.data_ptr<float>();
  a.workspace_floats = workspace.numel();
  a.rows = rows;
  a.channels = channels;
  a.dtype = ElementTypeOf(x.scalar_type());
  return workspace;
}

ForwardOut KernelForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                         at::Tensor& running_mean, at::Tensor& running_var,
                         int64_t* num_batches_tracked, double momentum, double eps,
                         const at::Tensor& z, bool relu) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t channels = x.size(1);
  const int64_t rows = x.numel() / channels;
  const auto stats = x.options().dtype(at::kFloat);
  ForwardOut out{at::empty_like(x, at::MemoryFormat::ChannelsLast), at::empty({channels}, stats),
                 at::empty({channels}, stats), at::Tensor()};
  fused_bn::ForwardArgs a;
  const at::Tensor workspace = SetShape(a, x, rows, channels);
  a.x = x.data_ptr();
  a.z = z.defined() ? z.data_ptr() : nullptr;
  a.y = out.y.data_ptr();
  // With a residual the mask cannot come from x in backward: keep it as bits, 1/16 of y.
  if (relu && z.defined() && fused_bn::ReluBitsSupported(a.dtype, channels, a.x, a.z, a.y)) {
    out.relu_bits = at::empty({rows * channels / 8}, x.options().dtype(at::kByte));
    a.relu_bits = out.relu_bits.data_ptr<uint8_t>();
  }
  a.weight = weight.data_ptr<float>();
  a.bias = bias.data_ptr<float>();
  a.running_mean = OptionalPtr(running_mean);
  a.running_var = OptionalPtr(running_var);
  a.num_batches_tracked = num_batches_tracked;
  a.mean = out.mean.data_ptr<float>();
  a.invstd = out.invstd.data_ptr<float>();
  a.momentum = static_cast<float>(momentum);
  a.eps = static_cast<float>(eps);
  a.relu = relu;
  const char* error = fused_bn::Forward(a, at::cuda::getCurrentCUDAStream(x.get_device()));
  TORCH_CHECK(error == nullptr, "FusedBatchNormAct forward: ", error);
  return out;
}

BackwardOut KernelBackward(const at::Tensor& dy, const at::Tensor& y, const at::Tensor& relu_bits,
                           const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& mean, const at::Tensor& invstd, bool relu,
                           bool want_dz, at::Tensor* add_grad_weight, at::Tensor* add_grad_bias) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t channels = x.size(1);
  const int64_t rows = x.numel() / channels;
  const auto stats = x.options().dtype(at::kFloat);
  BackwardOut out{at::empty_like(x, at::MemoryFormat::ChannelsLast), at::empty({channels}, stats),
                  at::empty({channels}, stats),
                  want_dz ? at::empty_like(x, at::MemoryFormat::ChannelsLast) : at::Tensor()};
  fused_bn::BackwardArgs a;
  const at::Tensor workspace = SetShape(a, x, rows, channels);
  a.dy = dy.data_ptr();
  a.y = relu && y.defined() ? y.data_ptr() : nullptr;
  a.relu_bits = relu && relu_bits.defined() ? relu_bits.data_ptr<uint8_t>() : nullptr;
  a.x = x.data_ptr();
  a.weight = weight.data_ptr<float>();
  a.bias = bias.data_ptr<float>();
  a.mean = mean.data_ptr<float>();
  a.invstd = invstd.data_ptr<float>();
  a.dx = out.dx.data_ptr();
  a.dz = want_dz ? out.dz.data_ptr() : nullptr;
  a.grad_weight = out.grad_weight.data_ptr<float>();
  a.grad_bias = out.grad_bias.data_ptr<float>();
  if (add_grad_weight != nullptr) {
    a.add_grad_weight = add_grad_weight->data_ptr<float>();
    a.add_grad_bias = add_grad_bias->data_ptr<float>();
  }
  a.relu = relu;
  const char* error = fused_bn::Backward(a, at::cuda::getCurrentCUDAStream(x.get_device()));
  TORCH_CHECK(error == nullptr, "FusedBatchNormAct backward: ", error);
  return out;
}
#endif

// Saves x, not x_hat: no activation-sized tensor beyond those the unfused graph keeps. The
// ReLU mask: without a residual recomputed from x, so backward reads one activation fewer;
// with one, the kernels' bits (1/16 of y) where they wrote them, else the output y (as
// relu_'s backward does).
class FusedBatchNormFn : public torch::autograd::Function<FusedBatchNormFn> {
 public:
  // Optional tensors are c10::optional: autograd::Function rejects undefined tensors.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, c10::optional<at::Tensor> running_mean_arg,
                            c10::optional<at::Tensor> running_var_arg, double momentum, double eps,
                            const c10::optional<at::Tensor>& residual_arg, bool relu,
                            bool accumulate_param_grads,
                            c10::optional<at::Tensor> num_batches_tracked_arg) {
    at::Tensor running_mean = running_mean_arg.value_or(at::Tensor());
    at::Tensor running_var = running_var_arg.value_or(at::Tensor());
    at::Tensor num_batches_tracked = num_batches_tracked_arg.value_or(at::Tensor());
    const at::Tensor residual = residual_arg.value_or(at::Tensor());
    ForwardOut out;
    bool counted = !num_batches_tracked.defined();
#ifdef RINGPILOT_WITH_CUDA
    if (UseKernels(x)) {
      // A module converted whole to another dtype holds a non-int64 counter: added below.
      int64_t* counter = nullptr;
      if (!counted && num_batches_tracked.scalar_type() == at::kLong &&
          num_batches_tracked.device() == x.device()) {
        counter = num_batches_tracked.data_ptr<int64_t>();
        counted = true;
      }
      out = KernelForward(x, weight, bias, running_mean, running_var, counter, momentum, eps,
                          residual, relu);
    }
#endif
    if (!out.y.defined()) {
      out = ReferenceForward(x, weight, bias, running_mean, running_var, momentum, eps, residual,
                             relu);
    }
    if (!counted) num_batches_tracked.add_(1);
    const bool save_y = relu && residual.defined() && !out.relu_bits.defined();
    // weight and bias as saved variables: backward may add into their .grad, the mask from x
    // reads bias, and autograd's version check refuses a backward after either was changed
    // in place.
    ctx->save_for_backward(
        {x, weight, out.mean, out.invstd, save_y ? out.y : at::Tensor(), out.relu_bits, bias});
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["accumulate"] = accumulate_param_grads;
    // needs_input_grad counts the tensor arguments that were given.
    ctx->saved_data["residual_index"] =
        residual.defined() ? int64_t{3} + running_mean.defined() + running_var.defined()
                           : int64_t{-1};
    return out.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const bool relu = ctx->saved_data["relu"].toBool();
    const int64_t residual_index = ctx->saved_data["residual_index"].toInt();
    const bool want_dz = residual_index >= 0 && ctx->needs_input_grad(residual_index);
    variable_list result(11);
    if (!grads[0].defined()) return result;
    const at::Tensor& bias = saved[6];
    at::Tensor grad_weight = weight.grad();
    at::Tensor grad_bias = bias.grad();
    const bool accumulate = ctx->saved_data["accumulate"].toBool() && ctx->needs_input_grad(1) &&
                            ctx->needs_input_grad(2) && CanAccumulateInto(grad_weight, weight) &&
                            CanAccumulateInto(grad_bias, bias);
    BackwardOut out;
#ifdef RINGPILOT_WITH_CUDA
    if (UseKernels(x)) {
      // The incoming gradient may have any layout; the kernels read rows of channels.
      at::Tensor dy = grads[0].to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
      out =
          KernelBackward(dy, saved[4], saved[5], x, weight, bias, saved[2], saved[3], relu, want_dz,
                         accumulate ? &grad_weight : nullptr, accumulate ? &grad_bias : nullptr);
    }
#endif
    if (!out.dx.defined()) {
      out =
          ReferenceBackward(grads[0], saved[4], x, weight, bias, saved[2], saved[3], relu, want_dz);
      if (accumulate) {
        grad_weight.add_(out.grad_weight);
        grad_bias.add_(out.grad_bias);
      }
    }
    result[0] = out.dx;
    // Accumulated: no gradient returned, AccumulateGrad adds nothing and still runs its
    // post-hooks (the gradient reducer's).
    if (!accumulate) {
      result[1] = out.grad_weight.to(weight.scalar_type());
      result[2] = out.grad_bias.to(weight.scalar_type());
    }
    result[7] = out.dz;
    return result;
  }
};

}  // namespace

bool FusedBatchNormSupported(const at::Tensor& x) {
  return UseKernels(x) && x.dim() == 4 && x.is_contiguous(at::MemoryFormat::ChannelsLast);
}

at::Tensor FusedBatchNormAct(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             at::Tensor running_mean, at::Tensor running_var, double momentum,
                             double eps, const c10::optional<at::Tensor>& residual, bool relu,
                             bool accumulate_param_grads, const at::Tensor& num_batches_tracked) {
  TORCH_CHECK(x.dim() == 4, "FusedBatchNormAct: x must be [N, C, H, W], got ", x.sizes());
  const int64_t channels = x.size(1);
  TORCH_CHECK(x.numel() / std::max<int64_t>(channels, 1) > 1,
              "FusedBatchNormAct: expected more than 1 value per channel when training, got ",
              x.sizes());
  TORCH_CHECK(
      weight.defined() && bias.defined() && weight.numel() == channels && bias.numel() == channels,
      "FusedBatchNormAct: weight and bias must be [", channels, "]");
  for (const at::Tensor* t : {&running_mean, &running_var}) {
    TORCH_CHECK(!t->defined() || t->numel() == channels,
                "FusedBatchNormAct: running statistics must be [", channels, "]");
  }
  TORCH_CHECK(!num_batches_tracked.defined() || num_batches_tracked.numel() == 1,
              "FusedBatchNormAct: num_batches_tracked must hold one value");
  at::Tensor input = x;
  at::Tensor z = residual.has_value() ? *residual : at::Tensor();
  if (z.defined()) {
    TORCH_CHECK(z.sizes() == x.sizes(), "FusedBatchNormAct: residual ", z.sizes(),
                " does not match x ", x.sizes());
  }
  if (UseKernels(x)) {
    const at::Tensor* float_params[] = {&weight, &bias, &running_mean, &running_var};
    for (const at::Tensor* t : float_params) {
      TORCH_CHECK(!t->defined() || (t->scalar_type() == at::kFloat && t->is_contiguous() &&
                                    t->device() == x.device()),
                  "FusedBatchNormAct: parameters and running statistics must be contiguous "
                  "float32 tensors on ",
                  x.device());
    }
    // Differentiable conversions outside the Function: autograd maps the gradients back.
    input = x.contiguous(at::MemoryFormat::ChannelsLast);
    if (z.defined()) z = z.to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
  }
  auto optional = [](const at::Tensor& t) {
    return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt;
  };
  return FusedBatchNormFn::apply(input, weight, bias, optional(running_mean), optional(running_var),
                                 momentum, eps, optional(z), relu, accumulate_param_grads,
                                 optional(num_batches_tracked));
}

}  // namespace ringpilot::trainer::ops
