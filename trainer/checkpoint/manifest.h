// The manifest of a checkpoint: `manifest.json` in every `checkpoints/step-<8 digits>/`,
// naming the format, the step, the world size, the job, and each file's size and SHA-256
// (per 64 MiB piece). How it is written and how a checkpoint directory is verified against
// it. Torch-free (nlohmann JSON, OpenSSL SHA-256): the fuzz build (tests/fuzz) compiles it
// without LibTorch.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringpilot::trainer::checkpoint {

/// The manifest's "format" value.
inline constexpr const char kCheckpointFormat[] = "ringpilot-checkpoint-v1";
/// Files of a checkpoint directory.
inline constexpr const char kManifestFile[] = "manifest.json";
inline constexpr const char kStateFile[] = "state.pt";

/// Raised for an unreadable or corrupt checkpoint; the message names the file.
class CheckpointError : public std::runtime_error {
 public:
  explicit CheckpointError(const std::string& what) : std::runtime_error(what) {}
};

struct CheckpointInfo {
  int64_t step = 0;
  int world_size = 0;
  std::string path;
};

/// The manifest text of a checkpoint in `dir` holding `files` (names in `dir`, already
/// written and synced): sizes and SHA-256 digests are taken from the files now. Throws
/// CheckpointError naming a file that cannot be read.
std::string ManifestJson(const std::string& dir, const std::vector<std::string>& files,
                         int64_t step, int world_size, const std::string& job);

/// Verifies the checkpoint directory `path` against its manifest: every listed file exists
/// with the recorded size and digests. Returns its info; throws CheckpointError naming the
/// file and the problem for anything else (no manifest, not JSON, not this format, a
/// missing, truncated or corrupt file). Never throws another exception type for bad input.
CheckpointInfo VerifyCheckpointDir(const std::string& path);

}  // namespace ringpilot::trainer::checkpoint
