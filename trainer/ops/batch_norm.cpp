#include "trainer/ops/batch_norm.h"

#include <torch/autograd.h>

#include "trainer/ops/fused_batch_norm.h"

namespace ringpilot::trainer::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<int64_t> ReduceDims(const at::Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d != 1) dims.push_back(d);
  }
  return dims;
}

std::vector<int64_t> ChannelShape(const at::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = x.size(1);
  return shape;
}

// Global statistics from per-rank sums: one all-reduce of [sum, sum of squares, count]
// in forward, one of [sum dy, sum dy*(x-mean)] in backward (the formulas of PyTorch's
// SyncBatchNorm). Host-sync free, so it also works inside CUDA graphs.
class SyncBatchNormFn : public torch::autograd::Function<SyncBatchNormFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, at::Tensor running_mean, at::Tensor running_var,
                            double momentum, double eps, int64_t comm_handle) {
    auto* comm = reinterpret_cast<comm::Communicator*>(comm_handle);
    const auto dims = ReduceDims(x);
    const auto shape = ChannelShape(x);
    const int64_t c = x.size(1);
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor count = at::full({1}, static_cast<double>(x.numel() / c), xf.options());
    at::Tensor stats = at::cat({xf.sum(dims), xf.square().sum(dims), count});
    comm->AllReduce(stats, comm::ReduceOp::kSum)->Wait();
    at::Tensor n = stats.narrow(0, 2 * c, 1);
    at::Tensor mean = stats.narrow(0, 0, c) / n;
    at::Tensor var = (stats.narrow(0, c, c) / n - mean.square()).clamp_min(0);
    at::Tensor invstd = (var + eps).rsqrt();
    {
      at::NoGradGuard no_grad;
      running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
      running_var.mul_(1 - momentum)
          .add_((var * n / (n - 1).clamp_min(1)).to(running_var.scalar_type()), momentum);
    }
    at::Tensor y = (xf - mean.view(shape)) * (invstd * weight.to(at::kFloat)).view(shape) +
                   bias.to(at::kFloat).view(shape);
    ctx->save_for_backward({x, weight, mean, invstd, n});
    ctx->saved_data["comm"] = comm_handle;
    return y.to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    const at::Tensor& n = saved[4];
    auto* comm = reinterpret_cast<comm::Communicator*>(ctx->saved_data["comm"].toInt());
    const auto dims = ReduceDims(x);
    const auto shape = ChannelShape(x);
    const int64_t c = x.size(1);
    at::Tensor dy = grads[0].to(at::kFloat);
    at::Tensor xmu = x.to(at::kFloat) - mean.view(shape);
    at::Tensor sum_dy = dy.sum(dims);
    at::Tensor sum_dy_xmu = (dy * xmu).sum(dims);
    at::Tensor grad_weight = (sum_dy_xmu * invstd).to(weight.scalar_type());
    at::Tensor grad_bias = sum_dy.to(weight.scalar_type());
    at::Tensor global = at::cat({sum_dy, sum_dy_xmu});
    comm->AllReduce(global, comm::ReduceOp::kSum)->Wait();
    at::Tensor mean_dy = global.narrow(0, 0, c) / n;
    at::Tensor mean_dy_xmu = global.narrow(0, c, c) / n;
    at::Tensor grad_x =
        (dy - mean_dy.view(shape) - xmu * (invstd.square() * mean_dy_xmu).view(shape)) *
        (invstd * weight.to(at::kFloat)).view(shape);
    return {grad_x.to(x.scalar_type()),
            grad_weight,
            grad_bias,
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

BatchNorm2dImpl::BatchNorm2dImpl(BatchNormOptions options, comm::Communicator* sync)
    : options_(options), sync_(sync) {
  weight = register_parameter("weight", torch::ones({options.channels}));
  bias = register_parameter("bias", torch::zeros({options.channels}));
  running_mean = register_buffer("running_mean", torch::zeros({options.channels}));
  running_var = register_buffer("running_var", torch::ones({options.channels}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

at::Tensor BatchNorm2dImpl::forward(const at::Tensor& x) { return forward_act(x, nullptr, false); }

at::Tensor BatchNorm2dImpl::forward_act(const at::Tensor& x, const at::Tensor* residual,
                                        bool relu) {
  const bool synchronised = sync_ != nullptr && sync_->size() > 1;
  if (is_training() && options_.fused && !synchronised &&
      (FusedBatchNormSupported(x) || options_.fused_reference) &&
      (residual == nullptr || residual->sizes() == x.sizes())) {
    return FusedBatchNormAct(x, weight, bias, running_mean, running_var, options_.momentum,
                             options_.eps,
                             residual ? c10::optional<at::Tensor>(*residual) : c10::nullopt, relu,
                             options_.accumulate_param_grads, num_batches_tracked);
  }
  at::Tensor y = Unfused(x);
  if (residual != nullptr) y = y + *residual;
  if (relu) y.relu_();
  return y;
}

at::Tensor BatchNorm2dImpl::Unfused(const at::Tensor& x) {
  if (!is_training()) {
    return at::batch_norm(x, weight, bias, running_mean, running_var, false, options_.momentum,
                          options_.eps, /*cudnn_enabled=*/true);
  }
  {
    at::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  if (sync_ == nullptr || sync_->size() == 1) {
    return at::batch_norm(x, weight, bias, running_mean, running_var, true, options_.momentum,
                          options_.eps, /*cudnn_enabled=*/true);
  }
  return SyncBatchNormFn::apply(x, weight, bias, running_mean, running_var, options_.momentum,
                                options_.eps, reinterpret_cast<int64_t>(sync_));
}

}  // namespace ringpilot::trainer::ops
