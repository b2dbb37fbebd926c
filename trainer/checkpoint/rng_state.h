// Per-rank random-number state in checkpoints: the generators behind dropout masks and
// the synthetic data, so a resumed run draws what the uninterrupted run would have drawn.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "comm/communicator.h"
#include "trainer/checkpoint/store.h"

namespace ringpilot::trainer::checkpoint {

/// This rank's default CPU generator and, on CUDA runs, its default CUDA generator (a seed
/// and a Philox offset: dropout masks drawn on the GPU, CUDA-graph replays included), with
/// every rank's states in tables that rank 0's checkpoint holds. Not thread-safe: the
/// training loop's thread.
class RankRngState {
 public:
  static constexpr const char* kCpuEntry = "rng/cpu";
  static constexpr const char* kCudaEntry = "rng/cuda";

  /// Seeds this process's generators (CPU and CUDA) from (seed, rank), so every rank draws
  /// differently; `cuda`: the run trains on a CUDA device (its current one).
  RankRngState(uint64_t seed, int rank, int world, bool cuda);

  /// The tables as checkpoint entries: kCpuEntry, and on CUDA runs kCudaEntry, optional on
  /// load (checkpoints written before it have none).
  std::vector<NamedTensor> Entries() const;

  /// Copies every rank's current states into the tables; collective over `host`. Call
  /// before writing a checkpoint, outside CUDA-graph capture.
  void Gather(comm::Communicator& host);

  /// After rank 0 loaded a checkpoint into the tables: shares them and sets this rank's
  /// generators; collective over `host`. `cuda_loaded` is rank 0's word for whether the
  /// checkpoint had CUDA states; without them the CUDA generator keeps its fresh seed.
  void Restore(comm::Communicator& host, bool cuda_loaded);

  /// Instead of Restore, for a checkpoint written by another number of ranks (whose
  /// streams do not map onto this run's ranks): seeds this rank's generators from (seed,
  /// rank, step), so the resumed run neither repeats the streams of step 0 nor depends on
  /// the old world size. Local; every rank calls it.
  void Reseed(uint64_t seed, int64_t step);

  /// True for the entries Entries() returns (checkpoint names starting with "rng/").
  static bool IsEntry(const std::string& name);

 private:
  int rank_;
  bool cuda_;
  at::Tensor cpu_table_;   // [world, CPU state bytes] uint8
  at::Tensor cuda_table_;  // [world, CUDA state bytes] uint8, CUDA runs only
};

}  // namespace ringpilot::trainer::checkpoint
