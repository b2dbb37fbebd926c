#include "trainer/models/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/models/bert.h"
#include "trainer/models/resnet.h"

namespace ringpilot::trainer::models {

int64_t TokenSpec::masked_per_row() const {
  return std::max<int64_t>(1, std::lround(mask_fraction * (seq_len - 2)));
}

at::Tensor Model::Logits(const at::Tensor&) {
  throw std::logic_error("this model has no class scores to evaluate");
}

MlmScores Model::ScoreMasked(const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("this model has no masked-LM scores to evaluate");
}

std::shared_ptr<Model> MakeModel(const ModelOptions& o, comm::Communicator* sync_comm) {
  comm::Communicator* sync = o.sync_batchnorm ? sync_comm : nullptr;
  switch (o.name) {
    case config::ModelName::kResnet18Cifar: {
      ResNetConfig c;
      c.num_classes = o.num_classes;
      c.fused_batchnorm = o.fused_batchnorm;
      c.fused_batchnorm_accumulate = o.fused_batchnorm_accumulate;
      c.label_smoothing = o.label_smoothing;
      return MakeResNet(c, sync);
    }
    case config::ModelName::kResnet50: {
      ResNetConfig c{{3, 4, 6, 3}, /*bottleneck=*/true, /*cifar_stem=*/false, 224, o.num_classes};
      c.fused_batchnorm = o.fused_batchnorm;
      c.fused_batchnorm_accumulate = o.fused_batchnorm_accumulate;
      c.label_smoothing = o.label_smoothing;
      c.maxpool_kernel = o.maxpool_kernel;
      c.stem_space_to_depth = o.stem_space_to_depth;
      c.shortcut_in_gemm = o.shortcut_in_gemm;
      return MakeResNet(c, sync);
    }
    case config::ModelName::kBertBase:
    case config::ModelName::kBertTiny:
      break;
  }
  return MakeBert(BertConfigFor(o));
}

BertConfig BertConfigFor(const ModelOptions& o) {
  BertConfig bert;
  switch (o.name) {
    case config::ModelName::kBertBase:
      bert.layers = 12;
      bert.hidden = 768;
      bert.heads = 12;
      bert.intermediate = 3072;
      break;
    case config::ModelName::kBertTiny:
      break;
    case config::ModelName::kResnet18Cifar:
    case config::ModelName::kResnet50:
      throw std::invalid_argument(std::string("not a BERT model: ") + config::ToString(o.name));
  }
  if (o.seq_len < 3) throw std::invalid_argument("model.seq_len: must be at least 3");
  if (o.vocab_size < 1) throw std::invalid_argument("BERT needs a vocabulary size above 0");
  bert.seq_len = o.seq_len;
  bert.vocab = o.vocab_size;
  bert.dropout = o.dropout;
  bert.mixed_linear = o.mixed_linear;
  bert.mixed_linear_accumulate = o.mixed_linear_accumulate;
  bert.fused_residual_norm = o.fused_residual_norm;
  return bert;
}

}  // namespace ringpilot::trainer::models
