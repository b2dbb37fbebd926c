// trainer/models: ResNet's loss with train.label_smoothing is torch's smoothed cross-entropy.
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

}  // namespace
}  // namespace ringpilot::trainer::models
