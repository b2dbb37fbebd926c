// Crash-safe checkpoints: `checkpoints/step-<8 digits>/` holding `state.pt` (a LibTorch
// archive of model, optimizer and per-rank RNG state) and `manifest.json` (step, world
// size, per-file size and SHA-256). Written to a temporary directory, fsynced, then
// renamed, so a reader sees a whole checkpoint or none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "trainer/checkpoint/manifest.h"

namespace ringpilot::trainer::checkpoint {

/// A named tensor: model parameters and buffers, optimizer state, RNG states.
struct NamedTensor {
  std::string name;
  at::Tensor tensor;
  bool optional = false;  ///< Load leaves it as it is when the checkpoint lacks it
};

/// A valid checkpoint that does not fit the job (a tensor it lacks or of another shape:
/// another model or optimizer). Every attempt would fail the same way.
class CheckpointMismatchError : public CheckpointError {
 public:
  explicit CheckpointMismatchError(const std::string& what) : CheckpointError(what) {}
};

class CheckpointStore {
 public:
  /// `dir` is RUN_DIR/checkpoints; `keep` the number of newest checkpoints kept.
  CheckpointStore(std::string dir, int keep);

  /// Writes step `step` atomically and prunes old ones. Tensors are copied to the CPU.
  /// Throws CheckpointError; a failed write leaves earlier checkpoints untouched.
  CheckpointInfo Save(int64_t step, int world_size, const std::string& job,
                      const std::vector<NamedTensor>& tensors) const;

  /// Newest checkpoint whose manifest and checksums verify. Newer corrupt ones are
  /// renamed to `corrupt-step-<8 digits>-<unix time>` (kept; Tidy keeps the newest `keep`
  /// of them) and reported through `warnings`. nullopt when there is none.
  std::optional<CheckpointInfo> FindNewestValid(std::vector<std::string>* warnings) const;

  /// Loads `info` into `tensors` (matched by name, shapes must agree; copied to each
  /// tensor's device and dtype). Throws CheckpointMismatchError naming the file and tensor
  /// for a tensor that is missing or of another shape, CheckpointError for an unreadable
  /// file; an optional tensor the checkpoint lacks is left as it is and its name returned.
  std::vector<std::string> Load(const CheckpointInfo& info,
                                const std::vector<NamedTensor>& tensors) const;

  /// Housekeeping at the start of an attempt (rank 0, before it saves anything): removes the
  /// `.tmp-step-*` directories last changed before `attempt_start_unix` (saves an earlier
  /// attempt never finished: a full disk, a crash), and keeps the newest `keep`
  /// `corrupt-step-*` directories (by the time in their names), removing the older ones.
  /// Returns one line for the log per directory removed or kept. Never throws: a directory
  /// that cannot be removed is named in its line.
  std::vector<std::string> Tidy(double attempt_start_unix) const;

  /// Paths of the step-* directories, oldest first (verified or not; read-only).
  std::vector<std::string> StepPaths() const;

  /// Verifies one checkpoint directory; returns its info or throws CheckpointError
  /// (VerifyCheckpointDir, trainer/checkpoint/manifest.h).
  static CheckpointInfo Verify(const std::string& path) { return VerifyCheckpointDir(path); }

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int keep_;
};

}  // namespace ringpilot::trainer::checkpoint
