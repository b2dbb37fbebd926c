#include "trainer/checkpoint/manifest.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <climits>
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
  // Every field is checked for its type before it is read: nlohmann's accessors throw their
  // own type_error otherwise, which resume would not take for a corrupt checkpoint.
  const auto bad = [&manifest_path](const std::string& why) {
    return CheckpointError(manifest_path + ": " + why);
  };
  const auto format = m.is_object() ? m.find("format") : m.end();
  if (!m.is_object() || format == m.end() || !format->is_string() ||
      format->get<std::string>() != kCheckpointFormat) {
    throw bad(std::string("not a ") + kCheckpointFormat + " manifest");
  }
  const auto step = m.find("step");
  if (step == m.end() || !step->is_number_integer() ||
      (step->is_number_unsigned() ? step->get<uint64_t>() > INT64_MAX : step->get<int64_t>() < 0)) {
    throw bad("\"step\" is not a step number");
  }
  int world_size = 0;
  if (const auto ws = m.find("world_size"); ws != m.end()) {
    if (!ws->is_number_unsigned() || ws->get<uint64_t>() > INT_MAX) {
      throw bad("\"world_size\" is not a rank count");
    }
    world_size = static_cast<int>(ws->get<uint64_t>());
  }
  const auto files = m.find("files");
  if (files == m.end() || !files->is_object() || !files->contains(kStateFile)) {
    throw bad(std::string("\"files\" does not list ") + kStateFile);
  }
  for (const auto& [name, meta] : files->items()) {
    // A plain name in this directory: a manifest must not send the check elsewhere.
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
      throw bad("file name '" + name + "' is not a name in the checkpoint directory");
    }
    const std::string file = path + "/" + name;
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) throw CheckpointError(file + ": missing");
    if (!S_ISREG(st.st_mode)) throw CheckpointError(file + ": not a regular file");
    const auto bytes = meta.is_object() ? meta.find("bytes") : meta.end();
    if (bytes == meta.end() || !bytes->is_number_integer() ||
        static_cast<int64_t>(st.st_size) != bytes->get<int64_t>()) {
      throw CheckpointError(file + ": size differs from manifest (truncated?)");
    }
    // Checkpoints written before chunked checksums carry one whole-file "sha256".
    bool matches = false;
    try {
      if (const auto chunks = meta.find("sha256_chunks"); chunks != meta.end()) {
        const auto chunk_bytes = meta.find("sha256_chunk_bytes");
        matches = chunks->is_array() && chunk_bytes != meta.end() &&
                  chunk_bytes->is_number_unsigned() && chunk_bytes->get<uint64_t>() > 0 &&
                  nlohmann::json(Sha256FileChunks(file, chunk_bytes->get<uint64_t>(),
                                                  ChecksumThreads())) == *chunks;
      } else if (const auto whole = meta.find("sha256"); whole != meta.end()) {
        matches = whole->is_string() && Sha256File(file) == whole->get<std::string>();
      }
    } catch (const std::runtime_error& e) {  // unreadable while hashing
      throw CheckpointError(e.what());
    }
    if (!matches) throw CheckpointError(file + ": SHA-256 differs from manifest (corrupt)");
  }
  return {step->get<int64_t>(), world_size, path};
}

}  // namespace ringpilot::trainer::checkpoint
