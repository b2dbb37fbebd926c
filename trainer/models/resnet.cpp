// ResNet v1.5 as in torchvision (stride on the 3x3 convolution of bottlenecks), plus
// the CIFAR variant of ResNet-18 (3x3 stem, no max-pool) for 32x32 inputs.
#include "trainer/models/resnet.h"

#include <torch/nn/functional/loss.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "trainer/models/model.h"
#include "trainer/ops/batch_norm.h"
#include "trainer/ops/max_pool.h"
#include "trainer/ops/pointwise_conv.h"
#include "trainer/ops/space_to_depth_conv.h"

namespace ringpilot::trainer::models {

namespace {

namespace nn = torch::nn;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

ops::BatchNorm2d MakeBatchNorm(int64_t channels, const ResNetConfig& cfg,
                               comm::Communicator* sync) {
  ops::BatchNormOptions options;
  options.channels = channels;
  options.fused = cfg.fused_batchnorm;
  options.accumulate_param_grads = cfg.fused_batchnorm_accumulate;
  return ops::BatchNorm2d(options, sync);
}

struct BlockImpl : nn::Module {
  BlockImpl(int64_t in, int64_t planes, int64_t stride, const ResNetConfig& cfg,
            comm::Communicator* sync)
      : bottleneck(cfg.bottleneck) {
    const int64_t expansion = bottleneck ? 4 : 1;
    const int64_t out = planes * expansion;
    auto bn = [&](int64_t c) { return MakeBatchNorm(c, cfg, sync); };
    if (bottleneck) {
      conv1 = register_module("conv1", Conv(in, planes, 1, 1));
      bn1 = register_module("bn1", bn(planes));
      conv2 = register_module("conv2", Conv(planes, planes, 3, stride));
      bn2 = register_module("bn2", bn(planes));
      conv3 = register_module("conv3", Conv(planes, out, 1, 1));
      bn3 = register_module("bn3", bn(out));
    } else {
      conv1 = register_module("conv1", Conv(in, planes, 3, stride));
      bn1 = register_module("bn1", bn(planes));
      conv2 = register_module("conv2", Conv(planes, planes, 3, 1));
      bn2 = register_module("bn2", bn(planes));
    }
    if (stride != 1 || in != out) {
      downsample = register_module("downsample", nn::Sequential(Conv(in, out, 1, stride), bn(out)));
    }
    shortcut_gemm = cfg.shortcut_in_gemm && bottleneck && downsample.is_empty();
  }

  // The last BatchNorm takes the residual add and the ReLU (one fused pass on CUDA), so
  // the shortcut is computed before it.
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y, identity;
    if (shortcut_gemm) {
      ops::PointwiseConvAndShortcut entry = ops::PointwiseConvWithShortcut(x, conv1->weight);
      y = entry.y;
      identity = entry.shortcut;
    } else {
      y = conv1(x);
    }
    y = bn1->forward_act(y, nullptr, /*relu=*/true);
    if (bottleneck) {
      y = conv3(bn2->forward_act(conv2(y), nullptr, /*relu=*/true));
    } else {
      y = conv2(y);
    }
    if (!identity.defined()) identity = downsample.is_empty() ? x : downsample->forward(x);
    ops::BatchNorm2d& last = bottleneck ? bn3 : bn2;
    return last->forward_act(y, &identity, /*relu=*/true);
  }

  bool bottleneck;
  bool shortcut_gemm;  ///< conv1 and the shortcut by ops::PointwiseConvWithShortcut
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  ops::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Block);

class ResNet : public Model {
 public:
  ResNet(const ResNetConfig& cfg, comm::Communicator* sync) : cfg_(cfg) {
    const int64_t stem = 64;
    if (cfg.cifar_stem) {
      conv1 = register_module("conv1", Conv(3, stem, 3, 1));
    } else {
      conv1 = register_module("conv1", Conv(3, stem, 7, 2));
    }
    bn1 = register_module("bn1", MakeBatchNorm(stem, cfg, sync));
    int64_t in = stem;
    const int64_t expansion = cfg.bottleneck ? 4 : 1;
    for (int stage = 0; stage < 4; ++stage) {
      nn::Sequential layer;
      const int64_t planes = 64LL << stage;
      for (int b = 0; b < cfg.blocks[stage]; ++b) {
        const int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
        layer->push_back(Block(in, planes, stride, cfg, sync));
        in = planes * expansion;
      }
      layers[stage] = register_module("layer" + std::to_string(stage + 1), layer);
    }
    fc = register_module("fc", nn::Linear(in, cfg.num_classes));
    // torchvision's initialisation: He (fan-out) for convolutions, BN at (1, 0).
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      }
    }
  }

  InputKind input_kind() const override { return InputKind::kImages; }
  ImageSpec image_spec() const override {
    return {cfg_.image_size, cfg_.image_size, cfg_.num_classes};
  }

  at::Tensor Logits(const at::Tensor& x) override {
    const bool space_to_depth = cfg_.stem_space_to_depth && !cfg_.cifar_stem;
    at::Tensor stem =
        space_to_depth ? ops::SpaceToDepthConv2d(x, conv1->weight, /*padding=*/3) : conv1(x);
    at::Tensor y = bn1->forward_act(stem, nullptr, /*relu=*/true);
    if (!cfg_.cifar_stem) {
      y = cfg_.maxpool_kernel ? ops::MaxPool2d(y, 3, 2, 1)
                              : at::max_pool2d(y, {3, 3}, {2, 2}, {1, 1});
    }
    for (auto& layer : layers) y = layer->forward(y);
    y = at::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
    return fc(y);
  }

  at::Tensor Loss(const at::Tensor& input, const at::Tensor& target) override {
    at::Tensor logits = Logits(input);
    return at::cross_entropy_loss(logits.to(at::kFloat), target, /*weight=*/{}, at::Reduction::Mean,
                                  /*ignore_index=*/-100, cfg_.label_smoothing);
  }

 private:
  ResNetConfig cfg_;
  nn::Conv2d conv1{nullptr};
  ops::BatchNorm2d bn1{nullptr};
  nn::Sequential layers[4];
  nn::Linear fc{nullptr};
};

}  // namespace

std::shared_ptr<Model> MakeResNet(const ResNetConfig& cfg, comm::Communicator* sync) {
  return std::make_shared<ResNet>(cfg, sync);
}

}  // namespace ringpilot::trainer::models
