// trainer/step/gradient_clipping.h against torch::nn::utils::clip_grad_norm_ on the same gradients.
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/step/gradient_clipping.h"

namespace ringpilot::trainer {
namespace {

// Parameters of mixed shapes and layouts (a channels_last convolution weight included),
// with random gradients scaled by `scale`; `twin` gets the same values.
std::vector<at::Tensor> Params(double scale, std::vector<at::Tensor>* twin) {
  torch::manual_seed(21);
  std::vector<at::Tensor> out;
  const std::vector<std::vector<int64_t>> shapes = {{8, 3, 3, 3}, {8}, {16, 8}, {16}, {5}};
  for (const auto& shape : shapes) {
    at::Tensor p = torch::randn(shape);
    at::Tensor g = torch::randn(shape) * scale;
    if (p.dim() == 4) {
      p = p.contiguous(at::MemoryFormat::ChannelsLast);
      g = g.contiguous(at::MemoryFormat::ChannelsLast);
    }
    p.requires_grad_();
    p.mutable_grad() = g;
    out.push_back(p);
    at::Tensor q = p.detach().clone().requires_grad_();
    q.mutable_grad() = g.clone();
    twin->push_back(q);
  }
  return out;
}

TEST(GradientClipper, MatchesTorchClipGradNorm) {
  // Norm far above the cap (clipped), and below it (left alone).
  for (double scale : {10.0, 0.01}) {
    std::vector<at::Tensor> ref;
    std::vector<at::Tensor> params = Params(scale, &ref);
    const double max_norm = 1.5;
    step::GradientClipper clipper(params, max_norm);
    clipper.Clip();
    const double ref_norm = torch::nn::utils::clip_grad_norm_(ref, max_norm);
    EXPECT_NEAR(clipper.norm().item<double>(), ref_norm, 1e-6 * ref_norm) << scale;
    double clipped_sq = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::allclose(params[i].grad(), ref[i].grad(), 1e-6, 1e-9))
          << "scale " << scale << ", param " << i;
      EXPECT_EQ(params[i].grad().strides(), ref[i].grad().strides());
      clipped_sq += params[i].grad().square().sum().item<double>();
    }
    if (scale > 1) {
      EXPECT_GT(ref_norm, max_norm);
      EXPECT_NEAR(std::sqrt(clipped_sq), max_norm, 1e-5);
    } else {
      EXPECT_LT(ref_norm, max_norm);
    }
  }
}

TEST(GradientClipper, RejectsANonPositiveNorm) {
  std::vector<at::Tensor> twin;
  EXPECT_THROW(step::GradientClipper(Params(1.0, &twin), 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace ringpilot::trainer
