#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/max_pool.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include "tests/trainer/cuda_graph_capture.h"
#endif

namespace ringpilot::trainer::ops {
namespace {

struct Pooled {
  at::Tensor y, dx;
};

Pooled Pool(bool ours, const at::Tensor& x0, const at::Tensor& dy, int k, int s, int p) {
  at::Tensor x = x0.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_();
  at::Tensor y = ours ? MaxPool2d(x, k, s, p) : at::max_pool2d(x, {k, k}, {s, s}, {p, p});
  y.backward(dy);
  return {y.detach(), x.grad()};
}

// Equal values, NaN where the reference has NaN.
void ExpectSame(const at::Tensor& a, const at::Tensor& ref, const std::string& what) {
  ASSERT_EQ(a.sizes(), ref.sizes()) << what;
  const at::Tensor an = at::isnan(a), rn = at::isnan(ref);
  EXPECT_TRUE(at::equal(an, rn)) << what << ": NaN in other places";
  EXPECT_TRUE(at::equal(a.masked_fill(an, 0), ref.masked_fill(rn, 0))) << what << ": values differ";
}

TEST(MaxPool2d, MatchesAtenOnCpu) {
  torch::manual_seed(12);
  const at::Tensor x = at::randn({2, 8, 9, 7}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_FALSE(MaxPoolKernelSupported(x, 3, 2, 1)) << "the kernels are CUDA only";
  const at::Tensor dy = at::randn({2, 8, 5, 4});
  const Pooled ours = Pool(true, x, dy, 3, 2, 1), ref = Pool(false, x, dy, 3, 2, 1);
  ExpectSame(ours.y, ref.y, "y");
  ExpectSame(ours.dx, ref.dx, "dx");
}

#ifdef RINGPILOT_WITH_CUDA
TEST(MaxPool2dCuda, KernelsMatchAtenValuesTiesAndNaN) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(13);
  struct Case {
    std::vector<int64_t> shape;
    at::ScalarType dtype;
    int k, s, p;
    bool ties;
  };
  const std::vector<Case> cases = {
      {{256, 64, 112, 112}, at::kBFloat16, 3, 2, 1, false},  // ResNet-50's stem
      {{4, 64, 112, 112}, at::kFloat, 3, 2, 1, false},
      {{2, 24, 13, 11}, at::kBFloat16, 3, 2, 1, true},
      {{3, 5, 9, 7}, at::kFloat, 3, 2, 1, true},
      {{3, 5, 9, 7}, at::kBFloat16, 3, 2, 1, false},
      {{2, 16, 8, 8}, at::kBFloat16, 2, 2, 0, true},
      {{2, 8, 10, 6}, at::kFloat, 3, 1, 1, true},
      {{1, 32, 15, 15}, at::kBFloat16, 5, 3, 2, true}};
  for (const Case& c : cases) {
    const auto options = at::device(at::kCUDA).dtype(c.dtype);
    at::Tensor x = c.ties ? at::randint(0, 3, c.shape, options) : at::randn(c.shape, options);
    x = x.contiguous(at::MemoryFormat::ChannelsLast);
    ASSERT_TRUE(MaxPoolKernelSupported(x, c.k, c.s, c.p));
    const int64_t oh = (c.shape[2] + 2 * c.p - c.k) / c.s + 1,
                  ow = (c.shape[3] + 2 * c.p - c.k) / c.s + 1;
    const at::Tensor dy = at::randn({c.shape[0], c.shape[1], oh, ow}, options)
                              .contiguous(at::MemoryFormat::ChannelsLast);
    std::string what = std::string(c10::toString(c.dtype)) + " k" + std::to_string(c.k) + " s" +
                       std::to_string(c.s) + " p" + std::to_string(c.p);
    for (int64_t d : c.shape) what += " " + std::to_string(d);
    const Pooled ours = Pool(true, x, dy, c.k, c.s, c.p), ref = Pool(false, x, dy, c.k, c.s, c.p);
    EXPECT_TRUE(ours.y.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
    EXPECT_TRUE(ours.dx.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
    ExpectSame(ours.y, ref.y, what + " y");
    ExpectSame(ours.dx, ref.dx, what + " dx");
  }
  // NaN wins its window, as in ATen, and takes the gradient.
  at::Tensor x =
      at::randn({2, 16, 9, 9}, at::device(at::kCUDA)).contiguous(at::MemoryFormat::ChannelsLast);
  x.index_put_({0, 3, 4, 4}, std::numeric_limits<float>::quiet_NaN());
  x.index_put_({1, 7, 0, 8}, std::numeric_limits<float>::quiet_NaN());
  const at::Tensor dy =
      at::randn({2, 16, 5, 5}, x.options()).contiguous(at::MemoryFormat::ChannelsLast);
  const Pooled ours = Pool(true, x, dy, 3, 2, 1), ref = Pool(false, x, dy, 3, 2, 1);
  ExpectSame(ours.y, ref.y, "NaN y");
  ExpectSame(ours.dx, ref.dx, "NaN dx");
}

TEST(MaxPool2dCuda, ReplaysInACudaGraph) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(14);
  const auto options = at::device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor x = at::randn({8, 64, 56, 56}, options)
                           .contiguous(at::MemoryFormat::ChannelsLast)
                           .requires_grad_();
  const at::Tensor dy =
      at::randn({8, 64, 28, 28}, options).contiguous(at::MemoryFormat::ChannelsLast);
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(side);
  at::Tensor y, dx;
  auto step = [&] {
    y = MaxPool2d(x, 3, 2, 1);
    dx = torch::autograd::grad({y}, {x}, {dy})[0];
  };
  step();
  const at::Tensor y0 = y.clone(), dx0 = dx.clone();
  y = dx = at::Tensor();
  at::cuda::CUDAGraph graph;
  CaptureStep(graph, step);
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(y, y0) && at::equal(dx, dx0));
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
