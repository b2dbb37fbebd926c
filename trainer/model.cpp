#include "trainer/model.h"

#include <stdexcept>

#include "trainer/bert.h"
#include "trainer/resnet.h"

namespace ringpilot::trainer {

std::shared_ptr<Model> MakeModel(const ModelOptions& o, comm::Communicator* sync_comm) {
  comm::Communicator* sync = o.sync_batchnorm ? sync_comm : nullptr;
  if (o.name == "resnet18-cifar") {
    ResNetConfig c;
    c.num_classes = o.num_classes;
    c.fused_batchnorm = o.fused_batchnorm;
    return MakeResNet(c, sync);
  }
  if (o.name == "resnet50") {
    ResNetConfig c{{3, 4, 6, 3}, /*bottleneck=*/true, /*cifar_stem=*/false, 224, o.num_classes};
    c.fused_batchnorm = o.fused_batchnorm;
    c.maxpool_kernel = o.maxpool_kernel;
    return MakeResNet(c, sync);
  }
  if (o.name == "bert-tiny" || o.name == "bert-base") {
    BertConfig c;
    if (o.name == "bert-base") {
      c.layers = 12;
      c.hidden = 768;
      c.heads = 12;
      c.intermediate = 3072;
    }
    c.seq_len = o.seq_len;
    c.dropout = o.dropout;
    c.mixed_linear = o.mixed_linear;
    c.mixed_linear_accumulate = o.mixed_linear_accumulate;
    c.fused_residual_norm = o.fused_residual_norm;
    return MakeBert(c);
  }
  throw std::invalid_argument("model.name: unknown model '" + o.name + "'");
}

}  // namespace ringpilot::trainer
