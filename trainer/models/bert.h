// BERT for masked-language modelling (internal to the trainer; use MakeModel).
#pragma once

#include <memory>

#include "trainer/models/model.h"

namespace ringpilot::trainer::models {

struct BertConfig {
  int layers = 2;
  int hidden = 128;
  int heads = 2;
  int intermediate = 512;
  int max_positions = 512;
  int64_t vocab = 0;  ///< MakeModel: ModelOptions::vocab_size
  int seq_len = 128;
  double dropout = 0.1;
  double layer_norm_eps = 1e-12;
  /// Under CUDA autocast, linear layers through MixedLinear (trainer/ops/mixed_linear.h).
  bool mixed_linear = true;
  /// MixedLinear adds weight gradients into .grad in its GEMM (ShadowWeightsOptions), and
  /// the word embeddings' lookup its rows' gradients (trainer/ops/embedding.h).
  bool mixed_linear_accumulate = true;
  /// With MixedLinear, each residual block's dropout + add + LayerNorm by
  /// ResidualLayerNorm (trainer/ops/residual_norm.h); its LayerNorm parameter gradients are
  /// added into .grad when mixed_linear_accumulate is on.
  bool fused_residual_norm = true;
};

std::shared_ptr<Model> MakeBert(const BertConfig& cfg);

/// The BERT sizes of model.name bert-tiny / bert-base with the rest of `options`. Throws
/// std::invalid_argument for another model or a seq_len below 3.
BertConfig BertConfigFor(const ModelOptions& options);

}  // namespace ringpilot::trainer::models
