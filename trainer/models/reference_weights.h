// The models' weights under the names of the implementations they follow (torchvision's
// ResNets, Hugging Face's BertForMaskedLM), for `ringpilot export`. The mapping lives here,
// beside the models, so that a change of a model's modules fails the export's strict check
// (every parameter and buffer must map) until the mapping follows.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/TensorBody.h>

#include "trainer/models/model.h"

namespace ringpilot::trainer::models {

/// What the reference implementation loads:
///   resnet50        torchvision.models.resnet50(num_classes=N)
///   resnet18-cifar  torchvision.models.resnet18(num_classes=N) with the CIFAR stem:
///                   conv1 = Conv2d(3, 64, 3, stride 1, padding 1, bias=False) and
///                   maxpool = Identity (same parameter names and shapes otherwise)
///   bert-tiny/base  transformers.BertForMaskedLM(BertConfig(config_json)); the decoder
///                   weight is tied to the word embeddings and not written
struct ReferenceWeights {
  /// Reference name -> the model's own tensor (not copied), in the model's order.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::string library;       ///< "torchvision" or "transformers"
  std::string architecture;  ///< "resnet50", "resnet18 (CIFAR stem)", "BertForMaskedLM"
  std::string config_json;   ///< transformers: the config.json; empty for torchvision
};

/// `model` must have been built from `options` (MakeModel). `pad_token_id`: BERT's [PAD] id
/// in its vocabulary (config.json's pad_token_id; the token shards' header says it).
/// Throws std::logic_error naming a parameter or buffer the mapping does not know.
ReferenceWeights ToReferenceWeights(const ModelOptions& options, Model& model,
                                    int64_t pad_token_id);

}  // namespace ringpilot::trainer::models
