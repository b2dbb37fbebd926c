// trainer/models: ResNet's loss with train.label_smoothing is torch's smoothed cross-entropy;
// ResNet-50's stem and bottleneck options compute what the plain layers do.
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/models/model.h"

namespace ringpilot::trainer::models {
namespace {

std::shared_ptr<Model> SmallResNet(double label_smoothing) {
  ModelOptions o;
  o.name = config::ModelName::kResnet18Cifar;
  o.num_classes = 10;
  o.label_smoothing = label_smoothing;
  torch::manual_seed(0);
  std::shared_ptr<Model> m = MakeModel(o, nullptr);
  m->train();
  return m;
}

TEST(ResNet, LabelSmoothingIsTorchsSmoothedCrossEntropy) {
  torch::manual_seed(1);
  const at::Tensor x = torch::randn({4, 3, 32, 32});
  const at::Tensor target = torch::tensor({1, 2, 3, 9}, at::kLong);
  std::shared_ptr<Model> smoothed = SmallResNet(0.2), plain = SmallResNet(0);
  const at::Tensor loss = smoothed->Loss(x, target);
  // Train-mode BatchNorm normalises with the batch's own statistics: the same logits again.
  const at::Tensor logits = smoothed->Logits(x);
  const at::Tensor expected =
      at::cross_entropy_loss(logits, target, {}, at::Reduction::Mean, -100, 0.2);
  EXPECT_TRUE(at::allclose(loss, expected, 1e-5, 1e-6)) << loss << " vs " << expected;
  EXPECT_TRUE(at::allclose(plain->Loss(x, target), at::cross_entropy_loss(logits, target), 1e-5,
                           1e-6));  // same initial weights, no smoothing
  EXPECT_GT(std::abs(loss.item<double>() - plain->Loss(x, target).item<double>()), 1e-4);
}

// model.stem_space_to_depth and model.shortcut_in_gemm change how ResNet-50 computes, not
// what: in float64 the loss and every parameter's gradient match the plain layers'.
TEST(ResNet, Resnet50StemAndShortcutOptionsKeepLossAndGradients) {
  const auto run = [](bool options_on) {
    ModelOptions o;
    o.name = config::ModelName::kResnet50;
    o.num_classes = 5;
    o.stem_space_to_depth = options_on;
    o.shortcut_in_gemm = options_on;
    torch::manual_seed(3);
    std::shared_ptr<Model> m = MakeModel(o, nullptr);
    m->to(at::kDouble);
    m->train();
    torch::manual_seed(4);
    const at::Tensor x = torch::randn({2, 3, 64, 64}, at::kDouble);
    // Logits, not Loss: Loss takes the cross-entropy in float32.
    const at::Tensor loss = at::cross_entropy_loss(m->Logits(x), torch::tensor({1, 4}, at::kLong));
    loss.backward();
    return std::make_pair(loss.detach(), m->named_parameters());
  };
  const auto [loss_on, params_on] = run(true);
  const auto [loss_off, params_off] = run(false);
  EXPECT_TRUE(at::allclose(loss_on, loss_off, 1e-12, 1e-12)) << loss_on << " vs " << loss_off;
  ASSERT_EQ(params_on.size(), params_off.size());
  for (const auto& p : params_off) {
    const at::Tensor& g_off = p.value().grad();
    const at::Tensor& g_on = params_on[p.key()].grad();
    ASSERT_TRUE(g_on.defined() && g_off.defined()) << p.key();
    EXPECT_TRUE(at::allclose(g_on, g_off, 1e-8, 1e-9)) << p.key();
  }
}

}  // namespace
}  // namespace ringpilot::trainer::models
