#include "trainer/input_feed.h"

#include <chrono>

#include "base/time.h"

namespace ringpilot::trainer {

InputFeed::InputFeed(const config::JobConfig& job, const models::Model& model,
                     const RankPlace& place, const RankDevice& device,
                     telemetry::TrainingMetrics& metrics)
    : seed_(job.train.seed),
      rank_(place.rank),
      world_(place.world),
      batch_(job.data.batch_per_rank),
      images_(model.input_kind() == models::InputKind::kImages),
      image_spec_(model.image_spec()),
      token_spec_(model.token_spec()),
      metrics_(metrics),
      copied_(device.cuda) {
  image_spec_.workers = device.threads;
  if (images_) PrepareImages(seed_, image_spec_);
  const auto pin = at::TensorOptions().pinned_memory(device.cuda);
  for (Batch& h : host_) {
    h.input = images_ ? at::empty({batch_, 3, image_spec_.height, image_spec_.width},
                                  pin.dtype(at::kByte))
                      : at::empty({batch_, token_spec_.seq_len}, pin.dtype(at::kLong));
    h.target = images_ ? at::empty({batch_}, pin.dtype(at::kLong))
                       : at::empty({batch_, token_spec_.seq_len}, pin.dtype(at::kLong));
  }
  device_.input = at::empty_like(host_[0].input, at::TensorOptions().device(device.device));
  device_.target = at::empty_like(host_[0].target, at::TensorOptions().device(device.device));
}

void InputFeed::Fill(int64_t step) {
  const int slot = static_cast<int>(step % 2);
  copied_.Wait(slot);
  NvtxRange range("data");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = FirstSampleIndex(step, rank_, world_, batch_);
  if (images_) {
    FillImages(seed_, first, image_spec_, host_[slot]);
  } else {
    FillTokens(seed_, first, token_spec_, host_[slot]);
  }
  data_seconds_.push_back(base::Seconds(t0, std::chrono::steady_clock::now()));
  metrics_.OnPhase(telemetry::Phase::kData, data_seconds_.back());
}

void InputFeed::CopyToDevice(int64_t step) {
  const int slot = static_cast<int>(step % 2);
  device_.input.copy_(host_[slot].input, /*non_blocking=*/true);
  device_.target.copy_(host_[slot].target, /*non_blocking=*/true);
  copied_.Record(slot);
}

}  // namespace ringpilot::trainer
