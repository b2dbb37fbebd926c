#include "trainer/ops/embedding.h"

#include <torch/autograd.h>

#include "trainer/ops/grad_accumulation.h"

namespace ringpilot::trainer::ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class EmbeddingLookupFn : public torch::autograd::Function<EmbeddingLookupFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weight, const at::Tensor& ids,
                            bool accumulate_into_grad) {
    ctx->save_for_backward({weight, ids});
    ctx->saved_data["accumulate"] = accumulate_into_grad;
    return at::embedding(weight, ids);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[0];
    const at::Tensor& ids = saved[1];
    const at::Tensor& dy = grads[0];
    variable_list out(3);
    if (!ctx->needs_input_grad(0)) return out;
    at::Tensor grad = weight.grad();
    if (ctx->saved_data["accumulate"].toBool() && weight.is_cuda() &&
        CanAccumulateInto(grad, weight) && dy.scalar_type() == at::kFloat) {
      // unsafe = true: no range check of the ids, which would read their minimum and
      // maximum back to the host (a synchronisation, and no CUDA-graph capture); the
      // forward's lookup has read every one of them already.
      const int64_t h = weight.size(1);
      at::_index_put_impl_(grad, {ids.reshape({-1})}, dy.reshape({-1, h}), /*accumulate=*/true,
                           /*unsafe=*/true);
      return out;  // nothing for AccumulateGrad to add; its post-hooks still run
    }
    out[0] = at::embedding_backward(dy, ids, weight.size(0), /*padding_idx=*/-1,
                                    /*scale_grad_by_freq=*/false, /*sparse=*/false);
    return out;
  }
};

}  // namespace

at::Tensor EmbeddingLookup(const at::Tensor& weight, const at::Tensor& ids,
                           bool accumulate_into_grad) {
  TORCH_CHECK(weight.dim() == 2, "EmbeddingLookup: weight must be [V, H], got ", weight.sizes());
  TORCH_CHECK(ids.scalar_type() == at::kLong, "EmbeddingLookup: ids must be int64, got ",
              ids.scalar_type());
  return EmbeddingLookupFn::apply(weight, ids, accumulate_into_grad);
}

}  // namespace ringpilot::trainer::ops
