// data.kind cifar: CIFAR-10/100 batch files in memory, sampled per epoch and rank
// (data/sampler.h), with the usual augmentation (4-pixel padded random crop, horizontal
// flip) drawn from (seed, epoch, sample), so a resumed run sees the same pixels.
#include <string>
#include <vector>

#include "data/cifar.h"
#include "data/sampler.h"
#include "trainer/input/datasets.h"

namespace ringpilot::trainer::input {
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

// The count first: it checks every file's size and record count with one-line errors
// before the records are read.
DataCount CountCifar(const InputOptions& options) {
  const std::vector<std::string> files =
      data::CifarFiles(options.train, options.cifar, /*train=*/true);
  return {data::CountCifarRecords(files, options.cifar), static_cast<int64_t>(files.size())};
}

class CifarDataset : public Dataset {
 public:
  CifarDataset(const InputOptions& options, int rank, int world)
      : options_(options),
        count_(CountCifar(options)),
        steps_per_epoch_(StepsPerEpochOf(options, world, count_.samples)),
        set_(data::ReadCifar(data::CifarFiles(options.train, options.cifar, /*train=*/true),
                             options.cifar)),
        sampler_(set_.size(), world, options.batch_per_rank, options.seed),
        rank_(rank) {}

  DataCount count() const override { return count_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  std::optional<models::TokenSpec> token_spec() const override { return std::nullopt; }
  std::unique_ptr<ValidationSet> LoadValidationSet(const models::ImageSpec&, bool) const override {
    if (options_.val.empty()) return nullptr;
    return LoadCifarValidationSet(options_.val, options_.cifar);
  }

  void Start(int64_t, const models::ImageSpec&, const c10::Device&, telemetry::RankLog&) override {}
  void Fill(int64_t batch, Batch& host) override {
    const int64_t epoch = sampler_.Batch(batch, rank_, &indices_).epoch;
    uint8_t* pixels = host.input.data_ptr<uint8_t>();
    int64_t* labels = host.target.data_ptr<int64_t>();
    for (size_t i = 0; i < indices_.size(); ++i) {
      AugmentCifar(set_.image(indices_[i]), pixels + i * data::kCifarImageBytes, options_.seed,
                   epoch, indices_[i]);
      labels[i] = set_.labels[indices_[i]];
    }
  }
  void Resume(int64_t batch, data::SamplePosition position) override {
    sampler_.Resume(batch, position);
  }
  data::SamplePosition PositionOf(int64_t batch) const override {
    return sampler_.PositionOf(batch);
  }

 private:
  const InputOptions options_;
  const DataCount count_;
  const int64_t steps_per_epoch_;
  const data::CifarSet set_;
  data::EpochSampler sampler_;
  const int rank_;
  std::vector<int64_t> indices_;  // the batch's samples, reused
};

}  // namespace

std::unique_ptr<Dataset> OpenCifarDataset(const InputOptions& options, int rank, int world) {
  return std::make_unique<CifarDataset>(options, rank, world);
}

}  // namespace ringpilot::trainer::input
