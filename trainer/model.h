// Models the trainer can run, built in LibTorch C++ with the maths of their reference
// implementations (torchvision ResNet v1.5, Hugging Face BertForMaskedLM).
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "trainer/synthetic_data.h"

namespace ringpilot::trainer {

enum class InputKind { kImages, kTokens };

struct ModelOptions {
  std::string name;             ///< resnet18-cifar | resnet50 | bert-tiny | bert-base
  int num_classes = 10;         ///< ResNet
  int seq_len = 128;            ///< BERT
  double dropout = 0.1;         ///< BERT
  bool sync_batchnorm = false;  ///< ResNet: BatchNorm statistics over `sync_comm`
  bool fused_batchnorm = true;  ///< ResNet: fused BatchNorm+add+ReLU CUDA kernels
  bool maxpool_kernel = true;   ///< ResNet: stem max-pool by trainer/max_pool.h
  bool mixed_linear = true;     ///< BERT under CUDA autocast: MixedLinear (trainer/mixed_linear.h)
  bool mixed_linear_accumulate = true;  ///< ShadowWeightsOptions::accumulate_into_grad
  bool fused_residual_norm = true;      ///< BERT with MixedLinear: trainer/residual_norm.h
};

/// A trainable model with its own loss. `Loss` takes a device batch as produced by
/// `PrepareInput` and returns the mean loss over the batch (a scalar).
class Model : public torch::nn::Module {
 public:
  virtual InputKind input_kind() const = 0;
  /// Image size for image models.
  virtual ImageSpec image_spec() const { return {}; }
  virtual TokenSpec token_spec() const { return {}; }
  virtual at::Tensor Loss(const at::Tensor& input, const at::Tensor& target) = 0;
};

/// Throws std::invalid_argument for an unknown name. `sync_comm` is used only when
/// options.sync_batchnorm is set; it must outlive the model.
std::shared_ptr<Model> MakeModel(const ModelOptions& options, comm::Communicator* sync_comm);

}  // namespace ringpilot::trainer
