#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/ops/space_to_depth_conv.h"

namespace ringpilot::trainer::ops {
namespace {

struct ConvResult {
  at::Tensor y, dx, dw;
};

ConvResult RunOp(bool blocks, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& dy,
                 int64_t padding, at::MemoryFormat format) {
  at::Tensor x = x0.detach().clone(format).requires_grad_();
  at::Tensor w = w0.detach().clone().requires_grad_();
  at::Tensor y = blocks ? SpaceToDepthConv2d(x, w, padding)
                        : at::conv2d(x, w, /*bias=*/{}, /*stride=*/2, padding);
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad()};
}

struct Case {
  std::vector<int64_t> x;  // n, c, h, w
  int64_t out, k, padding;
};

// float64: the block convolution is the strided one, up to the order of the sums.
TEST(SpaceToDepthConv2d, EqualsTheStrideTwoConvolutionAndItsGradients) {
  torch::manual_seed(21);
  const std::vector<Case> cases = {
      {{2, 3, 32, 32}, 8, 7, 3},  // ResNet's stem, small
      {{2, 3, 31, 29}, 8, 7, 3},  // odd sizes: the last padded row or column is unused
      {{1, 1, 9, 12}, 4, 3, 1},   // one channel, padded to two (eight block channels)
      {{3, 4, 10, 10}, 5, 4, 1},  // an even kernel
      {{2, 5, 11, 8}, 3, 5, 0},   // no padding, the input cropped
  };
  for (const Case& c : cases) {
    const std::string what = "x " + c10::str(at::IntArrayRef(c.x)) + " k " + std::to_string(c.k);
    const at::Tensor x = at::randn(c.x, at::kDouble);
    const at::Tensor w = at::randn({c.out, c.x[1], c.k, c.k}, at::kDouble);
    const int64_t oh = (c.x[2] + 2 * c.padding - c.k) / 2 + 1;
    const int64_t ow = (c.x[3] + 2 * c.padding - c.k) / 2 + 1;
    const at::Tensor dy = at::randn({c.x[0], c.out, oh, ow}, at::kDouble);
    for (const auto format : {at::MemoryFormat::Contiguous, at::MemoryFormat::ChannelsLast}) {
      const ConvResult ours = RunOp(true, x, w, dy, c.padding, format);
      const ConvResult ref = RunOp(false, x, w, dy, c.padding, format);
      ASSERT_EQ(ours.y.sizes(), ref.y.sizes()) << what;
      EXPECT_TRUE(at::allclose(ours.y, ref.y, 1e-10, 1e-10)) << what << ": y";
      EXPECT_TRUE(at::allclose(ours.dx, ref.dx, 1e-10, 1e-10)) << what << ": dx";
      EXPECT_TRUE(at::allclose(ours.dw, ref.dw, 1e-10, 1e-10)) << what << ": dw";
      EXPECT_EQ(ours.dw.sizes(), w.sizes()) << what << ": the parameter keeps its shape";
      if (format == at::MemoryFormat::ChannelsLast) {
        EXPECT_TRUE(ours.y.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
      }
    }
  }
}

TEST(SpaceToDepthConv2d, RejectsMismatchedChannels) {
  EXPECT_THROW(SpaceToDepthConv2d(at::zeros({1, 3, 8, 8}), at::zeros({4, 2, 3, 3}), 1), c10::Error);
  EXPECT_THROW(SpaceToDepthConv2d(at::zeros({1, 3, 8, 8}), at::zeros({4, 3, 3, 2}), 1), c10::Error);
}

#ifdef RINGPILOT_WITH_CUDA
// ResNet-50's stem at batch 32 in bf16, channels_last, on the GPU: within bf16 rounding of
// the float64 reference, as close as cuDNN's strided convolution is.
TEST(SpaceToDepthConv2dCuda, ResNetStemInBf16IsAsCloseAsTheStridedConvolution) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(22);
  const at::Tensor x = at::randn({32, 3, 224, 224}, at::kDouble);
  const at::Tensor w = at::randn({64, 3, 7, 7}, at::kDouble) * 0.1;
  const at::Tensor dy = at::randn({32, 64, 112, 112}, at::kDouble);
  const ConvResult ref = RunOp(false, x, w, dy, 3, at::MemoryFormat::Contiguous);
  const auto cuda = [](const at::Tensor& t) { return t.to(at::kCUDA, at::kBFloat16); };
  const ConvResult ours =
      RunOp(true, cuda(x), cuda(w), cuda(dy), 3, at::MemoryFormat::ChannelsLast);
  const ConvResult strided =
      RunOp(false, cuda(x), cuda(w), cuda(dy), 3, at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(ours.y.is_contiguous(at::MemoryFormat::ChannelsLast));
  const auto error = [](const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kCPU, at::kDouble) - b).abs().max().item<double>() /
           b.abs().max().item<double>();
  };
  for (const auto& [name, o, s, r] :
       {std::tuple{"y", ours.y, strided.y, ref.y}, std::tuple{"dw", ours.dw, strided.dw, ref.dw}}) {
    const double e_ours = error(o, r), e_strided = error(s, r);
    EXPECT_LT(e_ours, 2e-2) << name;
    EXPECT_LT(e_ours, 2 * e_strided + 1e-3) << name << ": strided conv's error " << e_strided;
  }
}
#endif

}  // namespace
}  // namespace ringpilot::trainer::ops
