#include "data/sampler.h"

#include <stdexcept>
#include <string>

namespace ringpilot::data {
namespace {

// splitmix64: a fixed, platform-independent generator, so a permutation is the same on
// every machine and library version (std::shuffle's distribution is not specified).
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
uint64_t Below(uint64_t n, uint64_t& state) {
  for (;;) {
    const unsigned __int128 m = static_cast<unsigned __int128>(SplitMix64(state)) * n;
    const uint64_t low = static_cast<uint64_t>(m);
    if (low >= n || low >= (0 - n) % n) return static_cast<uint64_t>(m >> 64);
  }
}

}  // namespace

int64_t FullStepsPerEpoch(int64_t dataset_size, int world, int batch_per_rank) {
  const int64_t steps = world > 0 && batch_per_rank > 0
                            ? dataset_size / (static_cast<int64_t>(world) * batch_per_rank)
                            : 0;
  if (steps < 1) {
    throw std::invalid_argument("dataset of " + std::to_string(dataset_size) +
                                " samples is smaller than one global batch (" +
                                std::to_string(world) + " ranks x " +
                                std::to_string(batch_per_rank) + ")");
  }
  return steps;
}

EpochSampler::EpochSampler(int64_t dataset_size, int world, int batch_per_rank, uint64_t seed)
    : size_(dataset_size),
      batch_(batch_per_rank),
      global_batch_(static_cast<int64_t>(world) * batch_per_rank),
      seed_(seed),
      steps_per_epoch_(FullStepsPerEpoch(dataset_size, world, batch_per_rank)) {}

std::vector<int64_t> EpochSampler::Permutation(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[i] = i;
  uint64_t state = seed_ ^ (0xD1B54A32D192ED03ULL * static_cast<uint64_t>(epoch + 1));
  for (int64_t i = size_ - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(Below(static_cast<uint64_t>(i + 1), state));
    std::swap(order[i], order[j]);
  }
  return order;
}

void EpochSampler::Resume(int64_t step, SamplePosition position) {
  if (step < 0 || position.epoch < 0 || position.offset < 0) {
    throw std::invalid_argument("sampler: negative step or position");
  }
  if (position.offset + global_batch_ > size_) position = {position.epoch + 1, 0};
  start_step_ = step;
  start_ = position;
}

SamplePosition EpochSampler::PositionOf(int64_t step) const {
  if (step < start_step_) {
    throw std::invalid_argument("sampler: step " + std::to_string(step) +
                                " is before the resumed step " + std::to_string(start_step_));
  }
  const int64_t k = step - start_step_;
  const int64_t left_in_first = (size_ - start_.offset) / global_batch_;
  if (k < left_in_first) return {start_.epoch, start_.offset + k * global_batch_};
  const int64_t after = k - left_in_first;
  return {start_.epoch + 1 + after / steps_per_epoch_, (after % steps_per_epoch_) * global_batch_};
}

SamplePosition EpochSampler::Batch(int64_t step, int rank, std::vector<int64_t>* indices) {
  const SamplePosition at = PositionOf(step);
  if (at.epoch != cached_epoch_) {
    order_ = Permutation(at.epoch);
    cached_epoch_ = at.epoch;
  }
  const int64_t first = at.offset + static_cast<int64_t>(rank) * batch_;
  indices->assign(order_.begin() + first, order_.begin() + first + batch_);
  return at;
}

}  // namespace ringpilot::data
