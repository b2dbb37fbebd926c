#include "trainer/ops/embedding.h"

#include <torch/autograd.h>

#include "trainer/ops/grad_accumulation.h"

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/embedding_kernels.h"
#endif

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
#ifdef RINGPILOT_WITH_CUDA
    if (ctx->saved_data["accumulate"].toBool() && weight.is_cuda() &&
        CanAccumulateInto(grad, weight) && dy.scalar_type() == at::kFloat &&
        ids.numel() <= INT32_MAX && weight.size(0) <= INT32_MAX) {
      const c10::cuda::CUDAGuard guard(weight.device());
      const at::Tensor flat_ids = ids.reshape({-1}).contiguous();
      const at::Tensor rows = dy.reshape({-1, weight.size(1)}).contiguous();
      embedding::BackwardArgs a;
      a.ids = flat_ids.data_ptr<int64_t>();
      a.count = flat_ids.numel();
      a.grad = rows.data_ptr<float>();
      a.hidden = weight.size(1);
      a.vocab = weight.size(0);
      a.table_grad = grad.data_ptr<float>();
      // From the caching allocator: capturable.
      const at::Tensor workspace =
          at::empty({static_cast<int64_t>(embedding::WorkspaceBytes(a.count, a.hidden, a.vocab))},
                    weight.options().dtype(at::kByte));
      a.workspace = workspace.data_ptr();
      const char* error =
          embedding::AddRowGradients(a, at::cuda::getCurrentCUDAStream(weight.get_device()));
      TORCH_CHECK(error == nullptr, "EmbeddingLookup: ", error);
      return out;  // nothing for AccumulateGrad to add; its post-hooks still run
    }
#endif
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
