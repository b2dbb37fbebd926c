#include "trainer/input_feed.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "base/time.h"
#include "trainer/mlm_masking.h"

namespace ringpilot::trainer {
namespace {

constexpr int kCropPadding = 4;

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  return x ^ (x >> 33);
}

// The 4-pixel padded random crop and horizontal flip of CIFAR training, drawn from (seed,
// epoch, sample): the same pixels on every run and every rank count.
void AugmentCifar(const uint8_t* src, uint8_t* dst, uint64_t seed, int64_t epoch, int64_t sample) {
  const uint64_t r = Mix(seed ^ Mix(static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL ^
                                    static_cast<uint64_t>(sample)));
  const int span = 2 * kCropPadding + 1;
  const int dx = static_cast<int>(r % span) - kCropPadding;
  const int dy = static_cast<int>((r / span) % span) - kCropPadding;
  const bool flip = ((r >> 32) & 1) != 0;
  constexpr int kSide = data::kCifarSide;
  for (int c = 0; c < 3; ++c) {
    const uint8_t* in = src + c * kSide * kSide;
    uint8_t* out = dst + c * kSide * kSide;
    for (int y = 0; y < kSide; ++y) {
      const int sy = y + dy;
      for (int x = 0; x < kSide; ++x) {
        const int sx = (flip ? kSide - 1 - x : x) + dx;
        out[y * kSide + x] =
            sy >= 0 && sy < kSide && sx >= 0 && sx < kSide ? in[sy * kSide + sx] : 0;
      }
    }
  }
}

}  // namespace

data::CifarVariant CifarVariantFor(const config::ModelConfig& model) {
  return model.num_classes == 100 ? data::CifarVariant::kCifar100 : data::CifarVariant::kCifar10;
}

models::TokenSpec TokenSpecFor(const config::JobConfig& job) {
  if (job.data.kind != config::DataKind::kTokens) {
    const int vocab = job.model.vocab_size > 0 ? job.model.vocab_size : config::kSyntheticVocabSize;
    return SyntheticTokenSpec(vocab, job.model.seq_len);
  }
  const data::TokenShardInfo train = data::ReadTokenShardInfo(job.data.train);
  const data::TokenVocab& v = train.vocab;
  if (!job.data.val.empty()) {
    const data::TokenShardInfo val = data::ReadTokenShardInfo(job.data.val);
    const data::TokenVocab& w = val.vocab;
    if (w.size != v.size || w.cls != v.cls || w.sep != v.sep || w.mask != v.mask ||
        w.pad != v.pad) {
      throw data::DataError(data::TokenFilePath(job.data.val) +
                            ": another vocabulary than data.train's " +
                            data::TokenFilePath(job.data.train) + " (size or special ids differ)");
    }
  }
  if (job.model.vocab_size > 0 && job.model.vocab_size < v.size) {
    throw data::DataError(data::TokenFilePath(job.data.train) + ": model.vocab_size " +
                          std::to_string(job.model.vocab_size) +
                          " is smaller than the shard's vocabulary of " + std::to_string(v.size) +
                          " ids (leave it 0 to follow the shards)");
  }
  models::TokenSpec spec;
  spec.vocab = job.model.vocab_size > 0 ? job.model.vocab_size : v.size;
  spec.cls = v.cls;
  spec.sep = v.sep;
  spec.mask = v.mask;
  spec.pad = v.pad;
  spec.seq_len = job.model.seq_len;
  return spec;
}

std::unique_ptr<TokenValidationSet> LoadTokenValidationSet(const config::JobConfig& job) {
  if (job.data.kind != config::DataKind::kTokens || job.data.val.empty()) return nullptr;
  auto set = std::make_unique<TokenValidationSet>();
  set->shard = std::make_unique<data::TokenShard>(job.data.val);
  set->sequences = std::make_unique<data::PackedSequences>(*set->shard, job.model.seq_len);
  return set;
}

DataCount CountTrainData(const config::JobConfig& job, const data::ImageSource* images) {
  DataCount count;
  switch (job.data.kind) {
    case config::DataKind::kSynthetic:
      break;
    case config::DataKind::kCifar: {
      const data::CifarVariant variant = CifarVariantFor(job.model);
      const std::vector<std::string> files =
          data::CifarFiles(job.data.train, variant, /*train=*/true);
      count.samples = data::CountCifarRecords(files, variant);
      count.files = static_cast<int64_t>(files.size());
      break;
    }
    case config::DataKind::kImageFolder:
      count.samples = images ? images->size() : 0;
      count.files = count.samples;
      break;
    case config::DataKind::kImageShards:
      count.samples = images ? images->size() : 0;
      count.files = static_cast<int64_t>(data::ExpandShardList(job.data.train).size());
      break;
    case config::DataKind::kTokens:
      count.samples =
          data::PackedSequenceCount(data::ReadTokenShardInfo(job.data.train), job.model.seq_len);
      count.files = 1;
      break;
  }
  return count;
}

std::string DataCountLine(const DataCount& count) {
  return "data.train: " + std::to_string(count.samples) + " samples in " +
         std::to_string(count.files) + " file" + (count.files == 1 ? "" : "s");
}

int64_t StepsPerEpoch(const config::JobConfig& job, int world, const data::ImageSource* images) {
  int64_t samples = 0;
  if (images) {
    samples = images->size();
  } else if (job.data.kind == config::DataKind::kTokens) {
    samples =
        data::PackedSequenceCount(data::ReadTokenShardInfo(job.data.train), job.model.seq_len);
  } else {
    const data::CifarVariant variant = CifarVariantFor(job.model);
    samples =
        data::CountCifarRecords(data::CifarFiles(job.data.train, variant, /*train=*/true), variant);
  }
  try {
    return data::FullStepsPerEpoch(samples, world, job.data.batch_per_rank);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(job.data.train + ": " + e.what());
  }
}

InputFeed::~InputFeed() {
  if (!image_) return;
  const std::string report = image_->TimeReport();
  if (!report.empty()) log_.Info("input: " + report);
}

InputFeed::InputFeed(const config::JobConfig& job, const models::Model& model,
                     const RankPlace& place, const RankDevice& device,
                     telemetry::TrainingMetrics& metrics, telemetry::RankLog& log,
                     const data::ImageSource* images)
    : seed_(job.train.seed),
      rank_(place.rank),
      world_(place.world),
      batch_(job.data.batch_per_rank),
      images_(model.input_kind() == models::InputKind::kImages),
      image_spec_(model.image_spec()),
      token_spec_(images_ ? models::TokenSpec{} : TokenSpecFor(job)),
      metrics_(metrics),
      copied_(device.cuda),
      log_(log) {
  image_spec_.workers = device.threads;
  switch (job.data.kind) {
    case config::DataKind::kSynthetic:
      if (images_) PrepareImages(seed_, image_spec_);
      break;
    case config::DataKind::kCifar: {
      const data::CifarVariant variant = CifarVariantFor(job.model);
      cifar_ = std::make_unique<data::CifarSet>(
          data::ReadCifar(data::CifarFiles(job.data.train, variant, /*train=*/true), variant));
      sampler_ = std::make_unique<data::EpochSampler>(cifar_->size(), world_, batch_, seed_);
      break;
    }
    case config::DataKind::kImageFolder:
    case config::DataKind::kImageShards: {
      std::string decision;
      image_ = MakeImagePipeline(job, *images, image_spec_, place, device, &decision);
      log_.Info("input: " + decision);
      break;
    }
    case config::DataKind::kTokens:
      shard_ = std::make_unique<data::TokenShard>(job.data.train);
      sequences_ = std::make_unique<data::PackedSequences>(*shard_, token_spec_.seq_len);
      sampler_ = std::make_unique<data::EpochSampler>(sequences_->size(), world_, batch_, seed_);
      break;
  }
  const std::vector<int64_t> input_shape =
      images_ ? std::vector<int64_t>{batch_, 3, image_spec_.height, image_spec_.width}
              : std::vector<int64_t>{batch_, token_spec_.seq_len};
  const std::vector<int64_t> target_shape =
      images_ ? std::vector<int64_t>{batch_} : std::vector<int64_t>{batch_, token_spec_.seq_len};
  const at::ScalarType input_dtype = images_ ? at::kByte : at::kLong;
  if (!image_) {  // the image pipeline has host buffers of its own
    const auto pin = at::TensorOptions().pinned_memory(device.cuda);
    for (Batch& h : host_) {
      h.input = at::empty(input_shape, pin.dtype(input_dtype));
      if (sequences_) {
        h.keys = at::empty({batch_}, pin.dtype(at::kLong));  // masked on the device
      } else {
        h.target = at::empty(target_shape, pin.dtype(at::kLong));
      }
    }
  }
  const auto on_device = at::TensorOptions().device(device.device);
  device_.input = at::empty(input_shape, on_device.dtype(input_dtype));
  if (sequences_) {
    device_.keys = at::empty({batch_}, on_device.dtype(at::kLong));
  } else {
    device_.target = at::empty(target_shape, on_device.dtype(at::kLong));
  }
}

void InputFeed::Fill(int64_t step) {
  if (image_) {
    const double wait = image_->Fill(step);
    data_seconds_.push_back(wait);
    metrics_.OnPhase(telemetry::Phase::kData, wait);
    const ImageInputCounts c = image_->counts();
    metrics_.OnImageInput(c.decoded - reported_.decoded, c.bad_samples - reported_.bad_samples,
                          c.ready_batches);
    reported_ = c;
    for (const std::string& w : image_->TakeWarnings()) log_.Warn(w);
    return;
  }
  const int slot = static_cast<int>(step % 2);
  copied_.Wait(slot);
  NvtxRange range("data");
  const auto t0 = std::chrono::steady_clock::now();
  if (sequences_) {
    const int64_t epoch = sampler_->Batch(step, rank_, &indices_).epoch;
    int64_t* ids = host_[slot].input.data_ptr<int64_t>();
    int64_t* keys = host_[slot].keys.data_ptr<int64_t>();
    for (int i = 0; i < batch_; ++i) {
      sequences_->Fill(indices_[i], ids + static_cast<int64_t>(i) * token_spec_.seq_len);
      keys[i] = SequenceKey(seed_, epoch, indices_[i]);
    }
  } else if (sampler_) {
    const int64_t epoch = sampler_->Batch(step, rank_, &indices_).epoch;
    uint8_t* pixels = host_[slot].input.data_ptr<uint8_t>();
    int64_t* labels = host_[slot].target.data_ptr<int64_t>();
    for (int i = 0; i < batch_; ++i) {
      AugmentCifar(cifar_->image(indices_[i]), pixels + i * data::kCifarImageBytes, seed_, epoch,
                   indices_[i]);
      labels[i] = cifar_->labels[indices_[i]];
    }
  } else if (images_) {
    FillImages(seed_, FirstSampleIndex(step, rank_, world_, batch_), image_spec_, host_[slot]);
  } else {
    FillTokens(seed_, FirstSampleIndex(step, rank_, world_, batch_), token_spec_, host_[slot]);
  }
  data_seconds_.push_back(base::Seconds(t0, std::chrono::steady_clock::now()));
  metrics_.OnPhase(telemetry::Phase::kData, data_seconds_.back());
}

void InputFeed::Resume(int64_t step, data::SamplePosition position) {
  if (sampler_) sampler_->Resume(step, position);
  if (image_) image_->Resume(step, position);
}

data::SamplePosition InputFeed::PositionOf(int64_t step) const {
  if (image_) return image_->PositionOf(step);
  return sampler_ ? sampler_->PositionOf(step) : data::SamplePosition{};
}

std::vector<int64_t> InputFeed::bad_files() const {
  return image_ ? image_->bad_files() : std::vector<int64_t>{};
}

void InputFeed::CopyToDevice(int64_t step) {
  if (image_) {
    image_->CopyToDevice(step, device_);
    return;
  }
  const int slot = static_cast<int>(step % 2);
  device_.input.copy_(host_[slot].input, /*non_blocking=*/true);
  if (device_.target.defined()) device_.target.copy_(host_[slot].target, /*non_blocking=*/true);
  if (device_.keys.defined()) device_.keys.copy_(host_[slot].keys, /*non_blocking=*/true);
  copied_.Record(slot);
}

}  // namespace ringpilot::trainer
