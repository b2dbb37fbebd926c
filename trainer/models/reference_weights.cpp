#include "trainer/models/reference_weights.h"

#include <regex>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "trainer/models/bert.h"

namespace ringpilot::trainer::models {
namespace {

// trainer/models/bert.cpp's module names -> BertForMaskedLM's.
std::string BertReferenceName(const std::string& name) {
  static const std::pair<const char*, const char*> kTopLevel[] = {
      {"word_embeddings.", "bert.embeddings.word_embeddings."},
      {"position_embeddings.", "bert.embeddings.position_embeddings."},
      {"token_type_embeddings.", "bert.embeddings.token_type_embeddings."},
      {"embeddings_norm.", "bert.embeddings.LayerNorm."},
      {"head_transform.", "cls.predictions.transform.dense."},
      {"head_norm.", "cls.predictions.transform.LayerNorm."},
  };
  static const std::pair<const char*, const char*> kLayer[] = {
      {"query", "attention.self.query"},
      {"key", "attention.self.key"},
      {"value", "attention.self.value"},
      {"attn_out", "attention.output.dense"},
      {"attn_norm", "attention.output.LayerNorm"},
      {"intermediate", "intermediate.dense"},
      {"output", "output.dense"},
      {"output_norm", "output.LayerNorm"},
  };
  if (name == "decoder_bias") return "cls.predictions.bias";
  for (const auto& [ours, theirs] : kTopLevel) {
    const std::string prefix = ours;
    if (name.rfind(prefix, 0) == 0) return theirs + name.substr(prefix.size());
  }
  static const std::regex kEncoder(R"(encoder\.(\d+)\.(\w+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(name, m, kEncoder)) {
    for (const auto& [ours, theirs] : kLayer) {
      if (m[2] == ours) {
        return "bert.encoder.layer." + m[1].str() + "." + theirs + "." + m[3].str();
      }
    }
  }
  throw std::logic_error("export: BERT tensor '" + name + "' has no BertForMaskedLM name");
}

std::string BertConfigJson(const BertConfig& c, int64_t pad_token_id) {
  const nlohmann::ordered_json j = {
      {"architectures", {"BertForMaskedLM"}},
      {"model_type", "bert"},
      {"vocab_size", c.vocab},
      {"hidden_size", c.hidden},
      {"num_hidden_layers", c.layers},
      {"num_attention_heads", c.heads},
      {"intermediate_size", c.intermediate},
      {"hidden_act", "gelu"},  // exact (erf) GELU, as at::gelu
      {"hidden_dropout_prob", c.dropout},
      {"attention_probs_dropout_prob", c.dropout},
      {"max_position_embeddings", c.max_positions},
      {"type_vocab_size", 2},
      {"initializer_range", 0.02},
      {"layer_norm_eps", c.layer_norm_eps},
      {"pad_token_id", pad_token_id},
      {"position_embedding_type", "absolute"},
      {"tie_word_embeddings", true},
      {"dtype", "float32"},
  };
  return j.dump(2) + "\n";
}

}  // namespace

ReferenceWeights ToReferenceWeights(const ModelOptions& options, Model& model,
                                    int64_t pad_token_id) {
  ReferenceWeights out;
  std::vector<std::pair<std::string, at::Tensor>> ours;
  for (const auto& p : model.named_parameters()) ours.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) ours.emplace_back(b.key(), b.value());
  switch (options.name) {
    case config::ModelName::kResnet18Cifar:
    case config::ModelName::kResnet50: {
      // trainer/models/resnet.cpp names its modules as torchvision's ResNet does (conv1,
      // bn1, layerN.i.{conv,bn}k, layerN.0.downsample.{0,1}, fc), BatchNorm buffers
      // included; only names outside that pattern would need a mapping.
      static const std::regex kTorchvision(
          R"((conv1|bn1|fc|layer[1-4]\.\d+\.(conv[1-3]|bn[1-3]|downsample\.[01]))\.)"
          R"((weight|bias|running_mean|running_var|num_batches_tracked))");
      for (auto& [name, tensor] : ours) {
        if (!std::regex_match(name, kTorchvision)) {
          throw std::logic_error("export: ResNet tensor '" + name + "' has no torchvision name");
        }
        out.tensors.emplace_back(name, tensor);
      }
      out.library = "torchvision";
      out.architecture =
          options.name == config::ModelName::kResnet50 ? "resnet50" : "resnet18 (CIFAR stem)";
      return out;
    }
    case config::ModelName::kBertTiny:
    case config::ModelName::kBertBase:
      for (auto& [name, tensor] : ours) out.tensors.emplace_back(BertReferenceName(name), tensor);
      out.library = "transformers";
      out.architecture = "BertForMaskedLM";
      out.config_json = BertConfigJson(BertConfigFor(options), pad_token_id);
      return out;
  }
  throw std::logic_error("export: unknown model");
}

}  // namespace ringpilot::trainer::models
