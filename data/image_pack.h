// `ringpilot data pack`: an image folder (data.kind image_folder's layout) written as
// WebDataset tar shards (data.kind image_shards), optionally resized and re-encoded as JPEG
// the way FFCV prepares ImageNet (short side capped, quality Q).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ringpilot::data {

struct PackOptions {
  int64_t shard_samples = 0;  ///< > 0: samples per shard
  int64_t shard_bytes = 0;    ///< > 0: a shard is closed before it would pass this size
  int max_side = 0;           ///< > 0: shorter side at most this (resized), re-encoded as JPEG
  int quality = 0;            ///< JPEG quality of the re-encode, 1-100
  int threads = 1;            ///< images processed in parallel, >= 1
};

struct PackResult {
  std::vector<std::string> shards;  ///< written, in order
  int64_t samples = 0;
  int64_t skipped = 0;  ///< files that were not loadable images
  int64_t resized = 0;
};

/// Reads `folder` (OpenImageFolder: class index = sorted folder name), writes
/// OUT_DIR/shard-NNNNNN.tar with members KEY.jpg|.jpeg|.png and KEY.cls (the class index as
/// decimal text), KEY = the sample's 9-digit index in the folder, in folder order, plus
/// OUT_DIR/classes.txt (the class folder names, one a line, in index order). Each file is
/// written beside its final name and renamed into place when complete. Without max_side
/// the image bytes are copied (only files that are not JPEG or PNG are skipped); with it
/// every image is decoded, shrunk when its short side is above max_side (stb_image_resize)
/// and encoded as JPEG. `warn` gets one line per skipped file. Exactly one of shard_samples
/// and shard_bytes must be > 0. Throws DataError for a bad folder or an unwritable output.
PackResult PackImageFolder(const std::string& folder, const std::string& out_dir,
                           const PackOptions& options,
                           const std::function<void(const std::string&)>& warn);

}  // namespace ringpilot::data
