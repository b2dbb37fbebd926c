// ResNet family (internal to the trainer; use MakeModel).
#pragma once

#include <memory>

#include "trainer/models/model.h"

namespace ringpilot::trainer::models {

struct ResNetConfig {
  int blocks[4] = {2, 2, 2, 2};
  bool bottleneck = false;
  bool cifar_stem = true;  ///< 3x3 stride-1 stem and no max-pool (32x32 inputs)
  int image_size = 32;
  int num_classes = 10;
  bool fused_batchnorm = true;             ///< ops::BatchNormOptions::fused of every BatchNorm
  bool fused_batchnorm_accumulate = true;  ///< ops::BatchNormOptions::accumulate_param_grads
  bool maxpool_kernel = true;  ///< the stem max-pool by ops::MaxPool2d (trainer/ops/max_pool.h)
  /// The 7x7 stride-2 stem by ops::SpaceToDepthConv2d (trainer/ops/space_to_depth_conv.h)
  bool stem_space_to_depth = true;
  /// Bottlenecks whose shortcut is their input enter through ops::PointwiseConvWithShortcut
  /// (trainer/ops/pointwise_conv.h): conv1's backward GEMM adds the shortcut's gradient
  bool shortcut_in_gemm = true;
  double label_smoothing = 0;  ///< Loss: cross-entropy against (1 - x) one-hot + x / classes
};

std::shared_ptr<Model> MakeResNet(const ResNetConfig& cfg, comm::Communicator* sync);

}  // namespace ringpilot::trainer::models
