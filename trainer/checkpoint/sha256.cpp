#include "trainer/checkpoint/sha256.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <openssl/evp.h>

namespace ringpilot::trainer::checkpoint {

namespace {
[[noreturn]] void Fail(const char* what) {
  throw std::runtime_error(std::string("sha256: ") + what + " failed");
}
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) Fail("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    Fail("EVP_DigestInit_ex");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256::Sha256(Sha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_);
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

void Sha256::Update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(ctx_, data, size) != 1) Fail("EVP_DigestUpdate");
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx_, digest, &length) != 1) Fail("EVP_DigestFinal_ex");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string Sha256File(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot open for checksum");
  Sha256 sha;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) sha.Update(buf, n);
  const bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) throw std::runtime_error(path + ": read error during checksum");
  return sha.HexDigest();
}

std::vector<std::string> Sha256FileChunks(const std::string& path, size_t chunk_bytes,
                                          int threads) {
  if (chunk_bytes == 0) throw std::invalid_argument("Sha256FileChunks: chunk_bytes is 0");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open for checksum");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat for checksum");
  }
  const auto size = static_cast<size_t>(st.st_size);
  // Not (size + chunk_bytes - 1) / chunk_bytes: a huge chunk_bytes (a manifest's) would
  // wrap around to no piece at all, and an empty digest list would match.
  const size_t chunks = size / chunk_bytes + (size % chunk_bytes != 0 ? 1 : 0);
  std::vector<std::string> digests(chunks);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    std::vector<char> buf(1 << 20);
    for (size_t c = next++; c < chunks && !failed; c = next++) {
      Sha256 sha;
      size_t off = c * chunk_bytes;
      const size_t end = std::min(size, off + chunk_bytes);
      while (off < end) {
        const ssize_t n =
            ::pread(fd, buf.data(), std::min(buf.size(), end - off), static_cast<off_t>(off));
        if (n <= 0) {
          failed = true;
          return;
        }
        sha.Update(buf.data(), static_cast<size_t>(n));
        off += static_cast<size_t>(n);
      }
      digests[c] = sha.HexDigest();
    }
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(chunks)));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  ::close(fd);
  if (failed) throw std::runtime_error(path + ": read error during checksum");
  return digests;
}

}  // namespace ringpilot::trainer::checkpoint
