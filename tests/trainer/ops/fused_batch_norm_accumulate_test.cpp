// FusedBatchNormAct's accumulate_param_grads: weight and bias gradients added into their
// .grad buffers (the gradient reducer's bucket views) by backward itself, AccumulateGrad
// handed nothing and its post-hooks still run; the same sums as autograd's.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/trainer/accumulate_grad_probe.h"
#include "trainer/ops/fused_batch_norm.h"

namespace ringpilot::trainer::ops {
namespace {

struct Run {
  at::Tensor dx, grad_weight, grad_bias;
  int hook_calls[2] = {0, 0};
  int incoming_defined[2] = {-1, -1};
};

// weight's and bias's .grad are views of one float32 buffer holding earlier gradients
// (0.25 and -0.5), with a post-hook on each AccumulateGrad node, as the reducer sets up.
Run Backward(bool accumulate, const at::Tensor& x0, const at::Tensor& z0, const at::Tensor& dy,
             const at::Tensor& w0, const at::Tensor& b0) {
  Run run;
  at::Tensor x = x0.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_();
  at::Tensor w = w0.detach().clone().requires_grad_();
  at::Tensor b = b0.detach().clone().requires_grad_();
  const int64_t c = w.numel();
  at::Tensor bucket = at::empty({2 * c}, w.options());
  bucket.narrow(0, 0, c).fill_(0.25);
  bucket.narrow(0, c, c).fill_(-0.5);
  w.mutable_grad() = bucket.narrow(0, 0, c);
  b.mutable_grad() = bucket.narrow(0, c, c);
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  at::Tensor* params[] = {&w, &b};
  for (int i = 0; i < 2; ++i) {
    accumulators.push_back(
        ProbeAccumulateGrad(*params[i], &run.hook_calls[i], &run.incoming_defined[i]));
  }
  at::Tensor y = FusedBatchNormAct(x, w, b, at::Tensor(), at::Tensor(), 0.1, 1e-5, z0,
                                   /*relu=*/true, accumulate);
  y.backward(dy);
  run.dx = x.grad();
  run.grad_weight = w.grad().clone();
  run.grad_bias = b.grad().clone();
  EXPECT_EQ(w.grad().data_ptr(), bucket.data_ptr()) << "the .grad view stays the bucket's";
  return run;
}

void Check(const at::TensorOptions& options, double tolerance) {
  torch::manual_seed(41);
  const auto cl = at::MemoryFormat::ChannelsLast;
  const at::Tensor x = at::randn({6, 16, 5, 7}).to(options).contiguous(cl);
  const at::Tensor z = at::randn({6, 16, 5, 7}).to(options).contiguous(cl);
  const at::Tensor dy = at::randn({6, 16, 5, 7}).to(options).contiguous(cl);
  const auto params = options.dtype(at::kFloat);
  const at::Tensor w = at::rand({16}).to(params) + 0.5, b = at::randn({16}).to(params);
  const Run added = Backward(true, x, z, dy, w, b);
  const Run returned = Backward(false, x, z, dy, w, b);
  EXPECT_TRUE(at::allclose(added.dx, returned.dx, tolerance, tolerance));
  EXPECT_TRUE(at::allclose(added.grad_weight, returned.grad_weight, tolerance, tolerance));
  EXPECT_TRUE(at::allclose(added.grad_bias, returned.grad_bias, tolerance, tolerance));
  EXPECT_FALSE(at::allclose(returned.grad_bias, at::full_like(returned.grad_bias, -0.5)))
      << "the gradient was added, not left out";
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(added.hook_calls[i], 1) << i;
    EXPECT_EQ(returned.hook_calls[i], 1) << i;
    EXPECT_EQ(added.incoming_defined[i], 0) << i << ": AccumulateGrad is handed nothing";
    EXPECT_EQ(returned.incoming_defined[i], 1) << i;
  }
}

TEST(FusedBatchNormAccumulate, ReferenceAddsIntoGradOnCpu) {
  Check(at::TensorOptions().dtype(at::kDouble), 1e-10);
}

TEST(FusedBatchNormAccumulate, WithoutGradBuffersTheGradientsAreReturned) {
  torch::manual_seed(42);
  at::Tensor x = at::randn({4, 8, 3, 3}).requires_grad_();
  at::Tensor w = at::ones({8}).requires_grad_(), b = at::zeros({8}).requires_grad_();
  FusedBatchNormAct(x, w, b, at::Tensor(), at::Tensor(), 0.1, 1e-5, c10::nullopt, true, true)
      .sum()
      .backward();
  ASSERT_TRUE(w.grad().defined() && b.grad().defined());
  EXPECT_GT(b.grad().abs().sum().item<float>(), 0.f);
}

#ifdef RINGPILOT_WITH_CUDA
TEST(FusedBatchNormAccumulateCuda, KernelsAddIntoGradInFloat32AndBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(FusedBatchNormSupported(
      at::zeros({2, 8, 2, 2}, at::kCUDA).contiguous(at::MemoryFormat::ChannelsLast)));
  Check(at::TensorOptions().device(at::kCUDA).dtype(at::kFloat), 1e-5);
  Check(at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16), 1e-5);
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
