#include <string>
#include <tuple>

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/pointwise_conv.h"

namespace ringpilot::trainer::ops {
namespace {

struct Grads {
  at::Tensor y, shortcut, dx, dw;
};

// A block's use of both outputs: the convolution through a nonlinearity, the shortcut
// scaled, or (`add`) the two added, whose backward hands one gradient tensor to both.
Grads RunOp(bool ours, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& a,
            const at::Tensor& b, bool add) {
  at::Tensor x = x0.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_();
  at::Tensor w = w0.detach().clone().requires_grad_();
  at::Tensor y, shortcut;
  if (ours) {
    PointwiseConvAndShortcut out = PointwiseConvWithShortcut(x, w);
    y = out.y;
    shortcut = out.shortcut;
  } else {
    y = at::conv2d(x, w);
    shortcut = x;
  }
  at::Tensor loss =
      add ? ((y + shortcut) * a).sum() : (at::tanh(y) * a).sum() + (shortcut * b).sum();
  loss.backward();
  return {y.detach(), shortcut.detach(), x.grad(), w.grad()};
}

void ExpectClose(const Grads& ours, const Grads& ref, const std::string& what) {
  EXPECT_TRUE(at::allclose(ours.y, ref.y, 1e-10, 1e-10)) << what << ": y";
  EXPECT_TRUE(at::equal(ours.shortcut, ref.shortcut)) << what << ": shortcut";
  EXPECT_TRUE(at::allclose(ours.dx, ref.dx, 1e-10, 1e-10)) << what << ": dx";
  EXPECT_TRUE(at::allclose(ours.dw, ref.dw, 1e-10, 1e-10)) << what << ": dw";
  EXPECT_EQ(ours.dw.sizes(), ref.dw.sizes()) << what;
}

// float64: conv2d's values and gradients, the shortcut's gradient added in the GEMM.
TEST(PointwiseConvWithShortcut, ConvolutionShortcutAndGradientsAsAutograds) {
  torch::manual_seed(31);
  const at::Tensor x = at::randn({3, 8, 5, 7}, at::kDouble);
  const at::Tensor w = at::randn({6, 8, 1, 1}, at::kDouble);
  const at::Tensor a = at::randn({3, 6, 5, 7}, at::kDouble);
  const at::Tensor b = at::randn({3, 8, 5, 7}, at::kDouble);
  const Grads ours = RunOp(true, x, w, a, b, false);
  ExpectClose(ours, RunOp(false, x, w, a, b, false), "separate uses");
  EXPECT_TRUE(ours.y.is_contiguous(at::MemoryFormat::ChannelsLast));
}

// An add's backward gives y and the shortcut the same tensor: updating it in place would
// change the gradient the other branch reads. The result must still be autograd's.
TEST(PointwiseConvWithShortcut, SharedIncomingGradientIsNotOverwritten) {
  torch::manual_seed(32);
  const at::Tensor x = at::randn({2, 8, 4, 4}, at::kDouble);
  const at::Tensor w = at::randn({8, 8, 1, 1}, at::kDouble);
  const at::Tensor a = at::randn({2, 8, 4, 4}, at::kDouble);
  ExpectClose(RunOp(true, x, w, a, a, true), RunOp(false, x, w, a, a, true), "added");
}

TEST(PointwiseConvWithShortcut, RejectsAWideKernel) {
  EXPECT_THROW(PointwiseConvWithShortcut(at::zeros({1, 4, 3, 3}), at::zeros({4, 4, 3, 3})),
               c10::Error);
}

#ifdef RINGPILOT_WITH_CUDA
// Under bf16 autocast on the GPU, as a bottleneck uses it: within bf16 rounding of the
// float64 result, and no further from it than autocast's conv2d + autograd's sum.
TEST(PointwiseConvWithShortcutCuda, Bf16AutocastIsAsCloseAsConv2d) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(33);
  const at::Tensor x = at::randn({16, 256, 28, 28}, at::kDouble);
  const at::Tensor w = at::randn({64, 256, 1, 1}, at::kDouble) * 0.05;
  const at::Tensor a = at::randn({16, 64, 28, 28}, at::kDouble);
  const at::Tensor b = at::randn({16, 256, 28, 28}, at::kDouble);
  const Grads ref = RunOp(false, x, w, a, b, false);
  const auto on_gpu = [&](bool ours) {
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    Grads g = RunOp(ours, x.to(at::kCUDA, at::kBFloat16), w.to(at::kCUDA, at::kFloat),
                    a.to(at::kCUDA, at::kBFloat16), b.to(at::kCUDA, at::kBFloat16), false);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    return g;
  };
  const Grads ours = on_gpu(true), conv = on_gpu(false);
  EXPECT_EQ(ours.dw.scalar_type(), at::kFloat);
  const auto error = [](const at::Tensor& t, const at::Tensor& r) {
    return (t.to(at::kCPU, at::kDouble) - r).abs().max().item<double>() /
           r.abs().max().item<double>();
  };
  for (const auto& [name, o, c, r] :
       {std::tuple{"y", ours.y, conv.y, ref.y}, std::tuple{"dx", ours.dx, conv.dx, ref.dx},
        std::tuple{"dw", ours.dw, conv.dw, ref.dw}}) {
    EXPECT_LT(error(o, r), 2e-2) << name;
    EXPECT_LE(error(o, r), error(c, r) * 1.5 + 1e-3) << name << ": conv2d's " << error(c, r);
  }
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
