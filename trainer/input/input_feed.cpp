#include "trainer/input/input_feed.h"

#include <chrono>
#include <string>

#include "base/time.h"
#include "trainer/telemetry/nvtx_range.h"

namespace ringpilot::trainer::input {

InputFeed::~InputFeed() {
  const ImagePipeline* pipeline = dataset_.pipeline();
  if (!pipeline) return;
  const std::string report = pipeline->TimeReport();
  if (!report.empty()) log_.Info("input: " + report);
}

InputFeed::InputFeed(const InputOptions& options, Dataset& dataset, const models::Model& model,
                     const c10::Device& device, int threads, int64_t batches,
                     telemetry::TrainingMetrics& metrics, telemetry::RankLog& log)
    : dataset_(dataset),
      images_(model.input_kind() == models::InputKind::kImages),
      metrics_(metrics),
      log_(log),
      copied_(device.is_cuda()) {
  models::ImageSpec image = model.image_spec();
  image.workers = threads;
  dataset_.Start(batches, image, device, log_);
  const int batch = options.batch_per_rank;
  const int seq_len = images_ ? 0 : dataset_.token_spec()->seq_len;
  const std::vector<int64_t> input_shape =
      images_ ? std::vector<int64_t>{batch, 3, image.height, image.width}
              : std::vector<int64_t>{batch, seq_len};
  const std::vector<int64_t> target_shape =
      images_ ? std::vector<int64_t>{batch} : std::vector<int64_t>{batch, seq_len};
  const at::ScalarType input_dtype = images_ ? at::kByte : at::kLong;
  const bool keys = dataset_.masked_on_device();
  if (!dataset_.pipeline()) {  // an image pipeline has host buffers of its own
    const auto pin = at::TensorOptions().pinned_memory(device.is_cuda());
    for (Batch& h : host_) {
      h.input = at::empty(input_shape, pin.dtype(input_dtype));
      if (keys) {
        h.keys = at::empty({batch}, pin.dtype(at::kLong));  // masked on the device
      } else {
        h.target = at::empty(target_shape, pin.dtype(at::kLong));
      }
    }
  }
  const auto on_device = at::TensorOptions().device(device);
  device_.input = at::empty(input_shape, on_device.dtype(input_dtype));
  if (keys) {
    device_.keys = at::empty({batch}, on_device.dtype(at::kLong));
  } else {
    device_.target = at::empty(target_shape, on_device.dtype(at::kLong));
  }
}

void InputFeed::Fill(int64_t batch) {
  if (ImagePipeline* pipeline = dataset_.pipeline()) {
    const double wait = pipeline->Fill(batch);
    data_seconds_.push_back(wait);
    metrics_.OnPhase(telemetry::Phase::kData, wait);
    const ImageInputCounts c = pipeline->counts();
    metrics_.OnImageInput(c.decoded - reported_.decoded, c.bad_samples - reported_.bad_samples,
                          c.ready_batches);
    reported_ = c;
    for (const std::string& w : pipeline->TakeWarnings()) log_.Warn(w);
    return;
  }
  const int slot = static_cast<int>(batch % 2);
  copied_.Wait(slot);
  telemetry::NvtxRange range("data");
  const auto t0 = std::chrono::steady_clock::now();
  dataset_.Fill(batch, host_[slot]);
  data_seconds_.push_back(base::Seconds(t0, std::chrono::steady_clock::now()));
  metrics_.OnPhase(telemetry::Phase::kData, data_seconds_.back());
}

void InputFeed::CopyToDevice(int64_t batch) {
  if (ImagePipeline* pipeline = dataset_.pipeline()) {
    pipeline->CopyToDevice(batch, device_);
    return;
  }
  const int slot = static_cast<int>(batch % 2);
  device_.input.copy_(host_[slot].input, /*non_blocking=*/true);
  if (device_.target.defined()) device_.target.copy_(host_[slot].target, /*non_blocking=*/true);
  if (device_.keys.defined()) device_.keys.copy_(host_[slot].keys, /*non_blocking=*/true);
  copied_.Record(slot);
}

}  // namespace ringpilot::trainer::input
