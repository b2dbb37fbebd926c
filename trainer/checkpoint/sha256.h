// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto, for checkpoint checksums and the
// final-weights fingerprint.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX; <openssl/evp.h> stays out of this header

namespace ringpilot::trainer::checkpoint {

/// Incremental SHA-256 (OpenSSL libcrypto, EVP_sha256). Not thread-safe; movable, not
/// copyable. Throws std::runtime_error if libcrypto fails (out of memory).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  /// Finishes and returns the lowercase hex digest; the object is spent afterwards.
  std::string HexDigest();

 private:
  evp_md_ctx_st* ctx_ = nullptr;  // EVP_MD_CTX
};

/// Digest of a whole file; throws std::runtime_error naming the file if unreadable.
std::string Sha256File(const std::string& path);

/// Digests of the consecutive `chunk_bytes` pieces of a file (the last may be shorter; an
/// empty file has none), hashed by up to `threads` threads at once: SHA-256 itself is
/// sequential, so a multi-GB checkpoint is only fast to check in pieces. Throws
/// std::runtime_error naming the file if unreadable.
std::vector<std::string> Sha256FileChunks(const std::string& path, size_t chunk_bytes, int threads);

}  // namespace ringpilot::trainer::checkpoint
