// trainer/models/reference_weights.h: every parameter and buffer of each model gets one
// reference name, the torchvision / BertForMaskedLM names a few spot checks expect, and
// the config.json of each BERT size. (tests/integration/export_models.sh loads exports into
// torchvision and transformers.)
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "trainer/models/reference_weights.h"

namespace ringpilot::trainer::models {
namespace {

ModelOptions Options(config::ModelName name) {
  ModelOptions o;
  o.name = name;
  o.num_classes = 10;
  o.seq_len = 16;
  o.vocab_size = 30522;  // BERT's WordPiece
  return o;
}

void ExpectEveryTensorOnce(const ReferenceWeights& w, Model& model) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : w.tensors) EXPECT_TRUE(names.insert(name).second) << name;
  EXPECT_EQ(w.tensors.size(), model.named_parameters().size() + model.named_buffers().size());
}

TEST(ReferenceWeights, ResNetsKeepTorchvisionNames) {
  for (auto name : {config::ModelName::kResnet18Cifar, config::ModelName::kResnet50}) {
    const ModelOptions o = Options(name);
    auto model = MakeModel(o, nullptr);
    const ReferenceWeights w = ToReferenceWeights(o, *model, 0);
    ExpectEveryTensorOnce(w, *model);
    EXPECT_EQ(w.library, "torchvision");
    EXPECT_TRUE(w.config_json.empty());
    std::set<std::string> names;
    for (const auto& entry : w.tensors) names.insert(entry.first);
    for (const char* expected : {"conv1.weight", "bn1.running_var", "bn1.num_batches_tracked",
                                 "layer2.0.downsample.0.weight", "layer4.1.bn2.bias", "fc.bias"}) {
      EXPECT_EQ(names.count(expected), 1u) << expected;
    }
  }
}

TEST(ReferenceWeights, BertGetsBertForMaskedLMNamesAndConfig) {
  for (auto name : {config::ModelName::kBertTiny, config::ModelName::kBertBase}) {
    const ModelOptions o = Options(name);
    auto model = MakeModel(o, nullptr);
    const ReferenceWeights w = ToReferenceWeights(o, *model, /*pad_token_id=*/6);
    ExpectEveryTensorOnce(w, *model);
    std::set<std::string> names;
    for (const auto& entry : w.tensors) names.insert(entry.first);
    for (const char* expected :
         {"bert.embeddings.word_embeddings.weight", "bert.embeddings.LayerNorm.bias",
          "bert.encoder.layer.1.attention.self.value.weight",
          "bert.encoder.layer.1.attention.output.LayerNorm.weight",
          "bert.encoder.layer.0.intermediate.dense.bias",
          "bert.encoder.layer.0.output.dense.weight", "cls.predictions.transform.dense.weight",
          "cls.predictions.transform.LayerNorm.bias", "cls.predictions.bias"}) {
      EXPECT_EQ(names.count(expected), 1u) << expected;
    }
    const auto config = nlohmann::json::parse(w.config_json);
    const bool base = name == config::ModelName::kBertBase;
    EXPECT_EQ(config["architectures"][0], "BertForMaskedLM");
    EXPECT_EQ(config["hidden_size"], base ? 768 : 128);
    EXPECT_EQ(config["num_hidden_layers"], base ? 12 : 2);
    EXPECT_EQ(config["num_attention_heads"], base ? 12 : 2);
    EXPECT_EQ(config["intermediate_size"], base ? 3072 : 512);
    EXPECT_EQ(config["vocab_size"], 30522);
    EXPECT_EQ(config["hidden_act"], "gelu");
    EXPECT_EQ(config["pad_token_id"], 6);  // the vocabulary's [PAD], not 0
  }
}

}  // namespace
}  // namespace ringpilot::trainer::models
