// SHA-256 (FIPS 180-4), for checkpoint checksums and the final-weights fingerprint.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringpilot::trainer::checkpoint {

/// Incremental SHA-256. Not thread-safe.
class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  /// Finishes and returns the lowercase hex digest; the object is spent afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// Digest of a whole file; throws std::runtime_error naming the file if unreadable.
std::string Sha256File(const std::string& path);

/// Digests of the consecutive `chunk_bytes` pieces of a file (the last may be shorter; an
/// empty file has none), hashed by up to `threads` threads at once: SHA-256 itself is
/// sequential, so a multi-GB checkpoint is only fast to check in pieces. Throws
/// std::runtime_error naming the file if unreadable.
std::vector<std::string> Sha256FileChunks(const std::string& path, size_t chunk_bytes, int threads);

}  // namespace ringpilot::trainer::checkpoint
