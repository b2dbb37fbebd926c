#include "trainer/evaluation.h"

#include <algorithm>

#include <torch/torch.h>

#include "trainer/input/mlm_masking.h"
#include "trainer/input/synthetic_data.h"
#include "trainer/step/autocast_region.h"

namespace ringpilot::trainer {
namespace {

// Rank 0's buffers (BatchNorm statistics) on every rank, so scores do not depend on which
// rank scored which sample.
void ShareBuffers(step::TrainingState& state, const startup::RankCommunicators& comms) {
  std::vector<at::Tensor> buffers;
  for (const auto& b : state.model->named_buffers()) buffers.push_back(b.value());
  comm::BroadcastCoalesced(*comms.device, buffers, 0);
}

// data.val's token sequences [first, last), masked with their evaluation keys: accuracy
// and loss sums over the masked positions into `t` (correct, loss sum, positions,
// sequences).
void ScoreTokens(input::ValidationSet& val, const models::TokenSpec& tokens, int64_t first,
                 int64_t last, int batch, const startup::RankDevice& device,
                 const std::optional<c10::ScalarType>& autocast, step::TrainingState& state,
                 double* t) {
  val.ForEachBatch(first, last, batch, [&](const at::Tensor& ids, const at::Tensor& keys) {
    const input::MaskedTokens masked =
        input::MaskTokens(ids.to(device.device), keys.to(device.device), tokens);
    models::MlmScores scores;
    {
      const step::AutocastRegion region(device.device.type(), autocast);
      scores = state.model->ScoreMasked(masked.input, masked.target);
    }
    t[0] += scores.correct.item<double>();
    t[1] += scores.loss_sum.item<double>();
    t[2] += static_cast<double>(scores.count);
    t[3] += static_cast<double>(ids.size(0));
  });
}

}  // namespace

EvalResult Evaluate(const EvaluationOptions& options, const startup::RankPlace& place,
                    const startup::RankDevice& device, step::TrainingState& state,
                    input::ValidationSet& val, const startup::RankCommunicators& comms) {
  ShareBuffers(state, comms);
  const int64_t n = val.size();
  const int64_t first = n * place.rank / place.world;
  const int64_t last = n * (place.rank + 1) / place.world;
  const int batch = options.batch_per_rank;
  const std::optional<c10::ScalarType>& autocast = options.autocast;
  // The model scores model.num_classes classes (a set may use fewer).
  const int k = std::min(5, options.num_classes);
  // correct@1, correct@5, loss sum, samples
  at::Tensor totals = at::zeros({4}, at::kDouble);
  double* t = totals.data_ptr<double>();
  state.model->eval();
  {
    torch::NoGradGuard no_grad;
    val.ForEachBatch(
        first, last, batch, [&](const at::Tensor& images, const at::Tensor& cpu_labels) {
          at::Tensor pixels = input::NormalizeImages(images.to(device.device), at::kFloat);
          if (state.channels_last) pixels = pixels.contiguous(at::MemoryFormat::ChannelsLast);
          const at::Tensor labels = cpu_labels.to(device.device);
          at::Tensor logits;
          {
            const step::AutocastRegion region(device.device.type(), autocast);
            logits = state.model->Logits(pixels).to(at::kFloat);
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

EvalResult EvaluateMaskedLm(const EvaluationOptions& options, const startup::RankPlace& place,
                            const startup::RankDevice& device, step::TrainingState& state,
                            input::ValidationSet& val, const models::TokenSpec& tokens,
                            const startup::RankCommunicators& comms) {
  ShareBuffers(state, comms);
  const int64_t n = val.size();
  const int64_t first = n * place.rank / place.world;
  const int64_t last = n * (place.rank + 1) / place.world;
  // correct, loss sum, masked positions, sequences
  at::Tensor totals = at::zeros({4}, at::kDouble);
  double* t = totals.data_ptr<double>();
  state.model->eval();
  {
    torch::NoGradGuard no_grad;
    ScoreTokens(val, tokens, first, last, options.batch_per_rank, device, options.autocast, state,
                t);
  }
  state.model->train();
  comms.host->AllReduce(totals, comm::ReduceOp::kSum)->Wait();
  EvalResult r;
  r.mlm = true;
  r.samples = static_cast<int64_t>(t[3]);
  if (t[2] > 0) {
    r.mlm_accuracy = t[0] / t[2];
    r.loss = t[1] / t[2];
  }
  return r;
}

}  // namespace ringpilot::trainer
