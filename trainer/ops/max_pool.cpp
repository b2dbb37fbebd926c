#include "trainer/ops/max_pool.h"

#include <torch/autograd.h>

#ifdef RINGPILOT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/ops/max_pool_kernels.h"
#include "trainer/ops/tensor_element_type.h"
#endif

namespace ringpilot::trainer::ops {

namespace {

int64_t PooledSize(int64_t in, int kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

#ifdef RINGPILOT_WITH_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

max_pool::Shape ShapeOf(const at::Tensor& x, int kernel, int stride, int padding) {
  max_pool::Shape s;
  s.n = x.size(0);
  s.c = x.size(1);
  s.h = x.size(2);
  s.w = x.size(3);
  s.kernel = kernel;
  s.stride = stride;
  s.padding = padding;
  s.oh = PooledSize(s.h, kernel, stride, padding);
  s.ow = PooledSize(s.w, kernel, stride, padding);
  return s;
}

class MaxPoolFn : public torch::autograd::Function<MaxPoolFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t kernel,
                            int64_t stride, int64_t padding) {
    const c10::cuda::CUDAGuard guard(x.device());
    const max_pool::Shape s =
        ShapeOf(x, static_cast<int>(kernel), static_cast<int>(stride), static_cast<int>(padding));
    at::Tensor y = at::empty({s.n, s.c, s.oh, s.ow},
                             x.options().memory_format(at::MemoryFormat::ChannelsLast));
    // [n, oh, ow, c]: the output's memory order.
    at::Tensor offset = at::empty({s.n, s.oh, s.ow, s.c}, x.options().dtype(at::kByte));
    const char* error =
        max_pool::Forward(x.data_ptr(), y.data_ptr(), offset.data_ptr<uint8_t>(), s,
                          ElementTypeOf(x.scalar_type()), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(error == nullptr, "MaxPool2d forward: ", error);
    ctx->save_for_backward({offset});
    ctx->saved_data["shape"] = std::vector<int64_t>{s.n, s.c, s.h, s.w, kernel, stride, padding};
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor offset = ctx->get_saved_variables()[0];
    const std::vector<int64_t> d = ctx->saved_data["shape"].toIntVector();
    const at::Tensor dy = grads[0].contiguous(at::MemoryFormat::ChannelsLast);
    const c10::cuda::CUDAGuard guard(dy.device());
    at::Tensor dx = at::empty({d[0], d[1], d[2], d[3]},
                              dy.options().memory_format(at::MemoryFormat::ChannelsLast));
    const max_pool::Shape s =
        ShapeOf(dx, static_cast<int>(d[4]), static_cast<int>(d[5]), static_cast<int>(d[6]));
    const char* error =
        max_pool::Backward(dy.data_ptr(), offset.data_ptr<uint8_t>(), dx.data_ptr(), s,
                           ElementTypeOf(dy.scalar_type()), at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(error == nullptr, "MaxPool2d backward: ", error);
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};
#endif

}  // namespace

bool MaxPoolKernelSupported(const at::Tensor& x, int kernel, int stride, int padding) {
#ifdef RINGPILOT_WITH_CUDA
  return x.is_cuda() && x.dim() == 4 &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16) &&
         x.is_contiguous(at::MemoryFormat::ChannelsLast) && kernel > 0 && kernel * kernel <= 255 &&
         stride > 0 && padding >= 0 && 2 * padding <= kernel && x.numel() > 0 &&
         PooledSize(x.size(2), kernel, stride, padding) > 0 &&
         PooledSize(x.size(3), kernel, stride, padding) > 0;
#else
  (void)x, (void)kernel, (void)stride, (void)padding;
  return false;
#endif
}

at::Tensor MaxPool2d(const at::Tensor& x, int kernel, int stride, int padding) {
#ifdef RINGPILOT_WITH_CUDA
  if (MaxPoolKernelSupported(x, kernel, stride, padding)) {
    return MaxPoolFn::apply(x, int64_t{kernel}, int64_t{stride}, int64_t{padding});
  }
#endif
  return at::max_pool2d(x, {kernel, kernel}, {stride, stride}, {padding, padding});
}

}  // namespace ringpilot::trainer::ops
