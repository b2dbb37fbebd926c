#include "trainer/ops/fused_adamw.h"

#include <vector>

#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_fused_adamw.h>

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/adamw_kernels.h"
#include "trainer/ops/tensor_element_type.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

#ifdef RINGPILOT_WITH_CUDA
// Whether the one-sweep kernel takes these lists: CUDA, contiguous float32 tensors of equal
// sizes on one device, at least one copy, all copies of one low-precision dtype.
bool KernelTakes(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                 at::TensorList exp_avg_sqs, at::TensorList steps, at::TensorList copies,
                 c10::ScalarType* copy_dtype) {
  if (params.empty() || !params.front().is_cuda()) return false;
  const at::Device device = params.front().device();
  *copy_dtype = c10::ScalarType::Undefined;
  for (size_t i = 0; i < params.size(); ++i) {
    for (const at::Tensor& t : {params[i], grads[i], exp_avgs[i], exp_avg_sqs[i]}) {
      if (!t.defined() || t.device() != device || t.scalar_type() != at::kFloat ||
          !t.is_contiguous() || t.sizes() != params[i].sizes()) {
        return false;
      }
    }
    if (steps[i].device() != device || steps[i].scalar_type() != at::kFloat) return false;
    if (i >= copies.size() || !copies[i].defined()) continue;
    const at::Tensor& c = copies[i];
    if (c.device() != device || !c.is_contiguous() || c.sizes() != params[i].sizes() ||
        (c.scalar_type() != at::kBFloat16 && c.scalar_type() != at::kHalf) ||
        (*copy_dtype != c10::ScalarType::Undefined && c.scalar_type() != *copy_dtype)) {
      return false;
    }
    *copy_dtype = c.scalar_type();
  }
  // Without copies ATen's own kernel does the same update.
  return *copy_dtype != c10::ScalarType::Undefined;
}
#endif

}  // namespace

void FusedAdamWWithCopies(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                          at::TensorList exp_avg_sqs, at::TensorList steps, at::TensorList copies,
                          const AdamWHyper& h) {
  TORCH_CHECK(grads.size() == params.size() && exp_avgs.size() == params.size() &&
                  exp_avg_sqs.size() == params.size() && steps.size() == params.size() &&
                  copies.size() <= params.size(),
              "FusedAdamWWithCopies: the lists must be parallel");
#ifdef RINGPILOT_WITH_CUDA
  c10::ScalarType copy_dtype = c10::ScalarType::Undefined;
  if (KernelTakes(params, grads, exp_avgs, exp_avg_sqs, steps, copies, &copy_dtype)) {
    const c10::cuda::CUDAGuard guard(params.front().device());
    std::vector<adamw::TensorSet> sets(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      adamw::TensorSet& s = sets[i];
      s.param = params[i].data_ptr<float>();
      s.grad = grads[i].data_ptr<float>();
      s.exp_avg = exp_avgs[i].data_ptr<float>();
      s.exp_avg_sq = exp_avg_sqs[i].data_ptr<float>();
      s.step = steps[i].data_ptr<float>();
      s.copy = i < copies.size() && copies[i].defined() ? copies[i].data_ptr() : nullptr;
      s.numel = params[i].numel();
    }
    adamw::Hyper hyper;
    hyper.lr_ptr = h.lr_tensor.defined() ? h.lr_tensor.data_ptr<float>() : nullptr;
    hyper.lr = h.lr;
    hyper.beta1 = h.beta1;
    hyper.beta2 = h.beta2;
    hyper.weight_decay = h.weight_decay;
    hyper.eps = h.eps;
    const char* error =
        adamw::Step(sets.data(), static_cast<int>(sets.size()), ElementTypeOf(copy_dtype), hyper,
                    at::cuda::getCurrentCUDAStream(params.front().get_device()));
    TORCH_CHECK(error == nullptr, "FusedAdamWWithCopies: ", error);
    return;
  }
#endif
  if (h.lr_tensor.defined()) {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps,
                      h.lr_tensor, h.beta1, h.beta2, h.weight_decay, h.eps, /*amsgrad=*/false,
                      /*maximize=*/false);
  } else {
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, h.lr,
                      h.beta1, h.beta2, h.weight_decay, h.eps, /*amsgrad=*/false,
                      /*maximize=*/false);
  }
  WriteLowPrecisionCopies(params, copies);
}

void WriteLowPrecisionCopies(at::TensorList params, at::TensorList copies) {
  std::vector<at::Tensor> to, from;
  for (size_t i = 0; i < copies.size() && i < params.size(); ++i) {
    const at::Tensor& c = copies[i];
    if (!c.defined()) continue;
    // A fresh alias of the copy's memory has a version counter of its own.
    to.push_back(at::from_blob(c.data_ptr(), c.sizes(), c.strides(), c.options()));
    // The optimizer may pass flat views of (contiguous) parameters: the copy's shape back.
    from.push_back(params[i].view(c.sizes()));
  }
  if (!to.empty()) at::_foreach_copy_(to, from);
}

}  // namespace ringpilot::trainer::ops
