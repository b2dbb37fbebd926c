#include "trainer/evaluation.h"

#include <algorithm>

#include <torch/torch.h>

#include "trainer/autocast_region.h"
#include "trainer/options.h"
#include "trainer/synthetic_data.h"

namespace ringpilot::trainer {

EvalResult Evaluate(const config::JobConfig& job, const RankPlace& place, const RankDevice& device,
                    TrainingState& state, ValidationSet& val, const RankCommunicators& comms) {
  std::vector<at::Tensor> buffers;
  for (const auto& b : state.model->named_buffers()) buffers.push_back(b.value());
  comm::BroadcastCoalesced(*comms.device, buffers, 0);
  const int64_t n = val.size();
  const int64_t first = n * place.rank / place.world;
  const int64_t last = n * (place.rank + 1) / place.world;
  const int batch = job.eval.batch_per_rank > 0 ? job.eval.batch_per_rank : job.data.batch_per_rank;
  const std::optional<c10::ScalarType> autocast = AutocastDtypeFor(job.train.precision);
  // The model scores model.num_classes classes (a set may use fewer).
  const int k = std::min(5, job.model.num_classes);
  // correct@1, correct@5, loss sum, samples
  at::Tensor totals = at::zeros({4}, at::kDouble);
  double* t = totals.data_ptr<double>();
  state.model->eval();
  {
    torch::NoGradGuard no_grad;
    val.ForEachBatch(
        first, last, batch, [&](const at::Tensor& images, const at::Tensor& cpu_labels) {
          at::Tensor input = NormalizeImages(images.to(device.device), at::kFloat);
          if (state.channels_last) input = input.contiguous(at::MemoryFormat::ChannelsLast);
          const at::Tensor labels = cpu_labels.to(device.device);
          at::Tensor logits;
          {
            const AutocastRegion region(device.device.type(), autocast);
            logits = state.model->Logits(input).to(at::kFloat);
          }
          const at::Tensor top = std::get<1>(logits.topk(k, /*dim=*/1));
          const at::Tensor hit = top.eq(labels.unsqueeze(1));
          t[0] += hit.select(1, 0).sum().item<double>();
          t[1] += hit.any(1).sum().item<double>();
          t[2] += at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum).item<double>();
          t[3] += static_cast<double>(images.size(0));
        });
  }
  state.model->train();
  comms.host->AllReduce(totals, comm::ReduceOp::kSum)->Wait();
  EvalResult r;
  r.samples = static_cast<int64_t>(t[3]);
  if (r.samples > 0) {
    r.top1 = t[0] / t[3];
    r.top5 = t[1] / t[3];
    r.loss = t[2] / t[3];
  }
  return r;
}

}  // namespace ringpilot::trainer
