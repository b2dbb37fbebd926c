#include "trainer/checkpoint/manifest.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "trainer/checkpoint/sha256.h"

namespace ringpilot::trainer::checkpoint {
namespace {

// SHA-256 is sequential: the state file (1.3 GB for BERT-base with AdamW) is hashed in
// 64 MiB pieces on several threads. On 2 cores that halves the hashing (a BERT-base
// checkpoint: 8 s -> 6 s, the rest is writing and fsync); a GPU host has 16-32 cores.
constexpr int64_t kChecksumChunkBytes = int64_t{64} << 20;

int ChecksumThreads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

}  // namespace

std::string ManifestJson(const std::string& dir, const std::vector<std::string>& files,
                         int64_t step, int world_size, const std::string& job) {
  nlohmann::json entries = nlohmann::json::object();
  for (const std::string& name : files) {
    const std::string path = dir + "/" + name;
    try {
      entries[name] = {
          {"bytes", base::FileSize(path)},
          {"sha256_chunk_bytes", kChecksumChunkBytes},
          {"sha256_chunks", Sha256FileChunks(path, kChecksumChunkBytes, ChecksumThreads())}};
    } catch (const std::runtime_error& e) {
      throw CheckpointError(e.what());
    }
  }
  const nlohmann::json manifest = {
      {"format", kCheckpointFormat},
      {"step", step},
      {"world_size", world_size},
      {"job", job},
      {"created_unix",
       std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"files", entries}};
  return manifest.dump(2) + "\n";
}

CheckpointInfo VerifyCheckpointDir(const std::string& path) {
  const std::string manifest_path = path + "/" + kManifestFile;
  std::ifstream in(manifest_path);
  if (!in) throw CheckpointError(manifest_path + ": missing or unreadable");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(manifest_path + ": not valid JSON: " + e.what());
  }
  if (!m.is_object() || m.value("format", "") != kCheckpointFormat || !m.contains("step") ||
      !m["step"].is_number_integer() || !m.contains("files") || !m["files"].is_object()) {
    throw CheckpointError(manifest_path + ": not a " + std::string(kCheckpointFormat) +
                          " manifest");
  }
  for (const auto& [name, meta] : m["files"].items()) {
    const std::string file = path + "/" + name;
    const int64_t size = base::FileSize(file);
    if (size < 0) throw CheckpointError(file + ": missing");
    if (!meta.is_object() || size != meta.value("bytes", int64_t{-1})) {
      throw CheckpointError(file + ": size differs from manifest (truncated?)");
    }
    // Checkpoints written before chunked checksums carry one whole-file "sha256".
    const bool matches =
        meta.contains("sha256_chunks")
            ? meta["sha256_chunks"].is_array() &&
                  meta.value("sha256_chunk_bytes", int64_t{0}) > 0 &&
                  nlohmann::json(Sha256FileChunks(
                      file, static_cast<size_t>(meta["sha256_chunk_bytes"].get<int64_t>()),
                      ChecksumThreads())) == meta["sha256_chunks"]
            : Sha256File(file) == meta.value("sha256", "");
    if (!matches) throw CheckpointError(file + ": SHA-256 differs from manifest (corrupt)");
  }
  return {m["step"].get<int64_t>(), m.value("world_size", 0), path};
}

}  // namespace ringpilot::trainer::checkpoint
