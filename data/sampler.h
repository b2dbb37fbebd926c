// Which samples each rank trains on, step by step (PyTorch's DistributedSampler with
// drop_last): every epoch is a seeded permutation of the dataset, consumed in global
// batches of world x batch_per_rank samples; rank r takes the r-th slice of each. The tail
// of an epoch too small for a global batch is skipped, so every step is full on every rank
// and ranks stay disjoint.
//
// The position of a run is (epoch, offset): the samples of the epoch's permutation already
// consumed. Checkpoints record it (Position), and a resumed run continues the same
// permutation from there, so with the same world size and batch it sees exactly the samples
// an unbroken run sees. With another world size or batch it still skips nothing and repeats
// nothing of the epoch in progress; only the grouping into steps differs.
#pragma once

#include <cstdint>
#include <vector>

namespace ringpilot::data {

struct SamplePosition {
  int64_t epoch = 0;
  int64_t offset = 0;  ///< samples of the epoch's permutation already consumed
};

/// Full global batches (world x batch_per_rank) in one epoch of `dataset_size` samples.
/// Throws std::invalid_argument when not even one fits.
int64_t FullStepsPerEpoch(int64_t dataset_size, int world, int batch_per_rank);

/// Not thread-safe (it caches the current epoch's permutation).
class EpochSampler {
 public:
  /// Throws std::invalid_argument when one global batch does not fit in the dataset.
  EpochSampler(int64_t dataset_size, int world, int batch_per_rank, uint64_t seed);

  /// Full global batches in a whole epoch.
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

  /// Declares that global step `step` starts at `position` (a checkpoint's); steps before
  /// it cannot be asked for afterwards. Default: step 0 at epoch 0, offset 0. An offset
  /// with no full global batch left in its epoch moves to the next epoch.
  void Resume(int64_t step, SamplePosition position);

  /// Where step `step` (>= the resumed step) starts.
  SamplePosition PositionOf(int64_t step) const;

  /// Dataset indices of rank `rank`'s batch at global step `step`, in order. Returns the
  /// step's position (PositionOf(step)).
  SamplePosition Batch(int64_t step, int rank, std::vector<int64_t>* indices);

  /// The permutation of `epoch` (the same on every rank, machine and run).
  std::vector<int64_t> Permutation(int64_t epoch) const;

 private:
  const int64_t size_;
  const int batch_;
  const int64_t global_batch_;
  const uint64_t seed_;
  const int64_t steps_per_epoch_;
  int64_t start_step_ = 0;
  SamplePosition start_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace ringpilot::data
