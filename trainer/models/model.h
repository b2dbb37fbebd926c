// Models the trainer can run, built in LibTorch C++ with the maths of their reference
// implementations (torchvision ResNet v1.5, Hugging Face BertForMaskedLM).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/nn/module.h>

#include "comm/communicator.h"
#include "config/job.h"

namespace ringpilot::trainer::models {

enum class InputKind { kImages, kTokens };

/// Image input of an image model: uint8 [B,3,H,W], class labels [B].
struct ImageSpec {
  int height = 32;
  int width = 32;
  int num_classes = 10;
  int workers = 1;  ///< threads that generate one batch (trainer/input/synthetic_data.h)
};

/// Token input of a masked-LM model: int64 [B,L] ids, targets -100 where not masked. The
/// vocabulary and special ids are the run's: the shards' (data.kind tokens) or synthetic
/// data's (trainer/input/dataset_factory.h TokenSpecFor fills them).
struct TokenSpec {
  static constexpr int64_t kIgnore = -100;
  int64_t vocab = 0;  ///< ids are below this (model.vocab_size)
  int64_t cls = 0;
  int64_t sep = 0;
  int64_t mask = 0;
  int64_t pad = 0;
  int seq_len = 128;
  double mask_fraction = 0.15;
  /// Masked positions in every sequence: round(mask_fraction x (seq_len - 2)), at least 1.
  int64_t masked_per_row() const;
};

/// What to build. No job defaults here: trainer/options.cpp fills every field from the
/// job (config/job.h holds the defaults).
struct ModelOptions {
  config::ModelName name = config::ModelName::kResnet18Cifar;
  int num_classes = 0;                      ///< ResNet
  int seq_len = 0;                          ///< BERT (at least 3: [CLS] ... [SEP])
  int64_t vocab_size = 0;                   ///< BERT: embedding and decoder rows
  double dropout = 0.0;                     ///< BERT
  bool sync_batchnorm = false;              ///< ResNet: BatchNorm statistics over `sync_comm`
  bool fused_batchnorm = false;             ///< ResNet: fused BatchNorm+add+ReLU CUDA kernels
  bool fused_batchnorm_accumulate = false;  ///< ops::BatchNormOptions::accumulate_param_grads
  bool maxpool_kernel = false;              ///< ResNet-50: stem max-pool by trainer/ops/max_pool.h
  bool stem_space_to_depth = false;      ///< ResNet-50: stem by trainer/ops/space_to_depth_conv.h
  bool shortcut_in_gemm = false;         ///< ResNet-50: trainer/ops/pointwise_conv.h in bottlenecks
  bool mixed_linear = false;             ///< BERT under CUDA autocast: trainer/ops/mixed_linear.h
  bool mixed_linear_accumulate = false;  ///< ops::ShadowWeightsOptions::accumulate_into_grad
  bool fused_residual_norm = false;  ///< BERT with ops::MixedLinear: trainer/ops/residual_norm.h
  double label_smoothing = 0;        ///< ResNet: Loss against smoothed targets
};

/// Sums over the masked positions of a batch (evaluation of masked-LM models), as device
/// scalars: no host synchronisation until the caller reads them.
struct MlmScores {
  at::Tensor loss_sum;  ///< float64: cross-entropy summed over the masked positions
  at::Tensor correct;   ///< float64: masked positions whose top-scored id is the target
  int64_t count = 0;    ///< masked positions scored
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
  /// Image models: class scores [B, classes] of a device batch (for evaluation). Masked-LM
  /// models: token scores [B, L, vocab] at every position of token ids [B, L] (what
  /// BertForMaskedLM returns; for checking an export). Throws std::logic_error for models
  /// without scores.
  virtual at::Tensor Logits(const at::Tensor& input);
  /// Masked-LM models: MlmScores of a device batch (input ids, target -100 where not
  /// masked, the same count of masked positions in every row); logits scored in float32.
  /// Throws std::logic_error for other models.
  virtual MlmScores ScoreMasked(const at::Tensor& input, const at::Tensor& target);
  /// The low-precision copies the model keeps of its parameters (BERT's MixedLinear shadow
  /// weights), one per entry of `params` (undefined where none), once they exist (after a
  /// forward under autocast); empty when there are none (yet). When it returns copies, the
  /// model stops refreshing them: from then on the caller writes each copy whenever its
  /// parameter changes (FusedOptimizer::SetLowPrecisionCopies). Call after a forward,
  /// before the optimizer step that follows it.
  virtual std::vector<at::Tensor> HandOverLowPrecisionCopies(
      const std::vector<at::Tensor>& params) {
    (void)params;
    return {};
  }
};

/// Throws std::invalid_argument for options no model accepts. `sync_comm` is used only when
/// options.sync_batchnorm is set; it must outlive the model.
std::shared_ptr<Model> MakeModel(const ModelOptions& options, comm::Communicator* sync_comm);

}  // namespace ringpilot::trainer::models
