// SHA-256 of a checkpoint-sized file (bench/results/*-cpu-hash.md): the trainer's
// trainer/checkpoint/sha256.cpp (OpenSSL libcrypto, EVP_sha256) against LegacySha256, a verbatim
// copy of the hand-written implementation it replaced (trainer/checkpoint/sha256.cpp at 0ba4bee),
// kept here only for this comparison. Both read the file the same way; the digests must match.
//   whole file   Sha256File (one thread, 64 KiB reads), as a manifest without chunks checks
//   chunks       Sha256FileChunks (64 MiB chunks, pread, 1..N threads), as checkpoint.cpp
//                writes and verifies manifests
// The default size is a BERT-base + AdamW checkpoint: 110M parameters x 3 fp32 tensors
// (weights, exp_avg, exp_avg_sq) = 1.32e9 bytes. The file is made once with pseudo-random
// bytes and read once before timing, so every pass reads from the page cache.
// Built with the project (target ringpilot-bench-checkpoint-hash), never run by the tests.
//
// Usage: ringpilot-bench-checkpoint-hash [--file PATH] [--bytes N] [--repeat R] [--threads T]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/opensslv.h>

#include "trainer/checkpoint/sha256.h"

namespace {

// --- the hand-written SHA-256 that trainer/checkpoint/sha256.cpp had until libcrypto replaced it
// --------- (verbatim, renamed; FIPS 180-4)

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class LegacySha256 {
 public:
  LegacySha256()
      : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
           0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

  void Update(const void* data, size_t size) {
    auto* p = static_cast<const uint8_t*>(data);
    total_ += size;
    if (buf_len_) {
      size_t take = std::min(size, 64 - buf_len_);
      std::memcpy(buf_.data() + buf_len_, p, take);
      buf_len_ += take;
      p += take;
      size -= take;
      if (buf_len_ == 64) {
        Block(buf_.data());
        buf_len_ = 0;
      }
    }
    while (size >= 64) {
      Block(p);
      p += 64;
      size -= 64;
    }
    if (size) {
      std::memcpy(buf_.data(), p, size);
      buf_len_ = size;
    }
  }

  std::string HexDigest() {
    const uint64_t bits = total_ * 8;
    const uint8_t pad = 0x80;
    Update(&pad, 1);
    const uint8_t zero = 0;
    while (buf_len_ != 56) Update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(bits >> (56 - 8 * i));
    Update(len, 8);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (uint32_t v : h_) {
      for (int s = 28; s >= 0; s -= 4) out.push_back(kHex[(v >> s) & 0xf]);
    }
    return out;
  }

 private:
  void Block(const uint8_t* p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t(p[4 * i]) << 24) | (uint32_t(p[4 * i + 1]) << 16) |
             (uint32_t(p[4 * i + 2]) << 8) | uint32_t(p[4 * i + 3]);
    }
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + kK[i] + w[i];
      uint32_t s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// The old Sha256File and Sha256FileChunks, on LegacySha256 (same reads as the trainer's).
std::string LegacySha256File(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot open for checksum");
  LegacySha256 sha;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) sha.Update(buf, n);
  const bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) throw std::runtime_error(path + ": read error during checksum");
  return sha.HexDigest();
}

std::vector<std::string> LegacySha256FileChunks(const std::string& path, size_t chunk_bytes,
                                                int threads) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open for checksum");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat for checksum");
  }
  const auto size = static_cast<size_t>(st.st_size);
  const size_t chunks = (size + chunk_bytes - 1) / chunk_bytes;
  std::vector<std::string> digests(chunks);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    std::vector<char> buf(1 << 20);
    for (size_t c = next++; c < chunks && !failed; c = next++) {
      LegacySha256 sha;
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

// --- the file ------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::int64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

// `bytes` pseudo-random bytes (xorshift64*), unless the file already has that size.
void MakeFile(const std::string& path, std::int64_t bytes) {
  if (FileSize(path) == bytes) return;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot create");
  std::vector<std::uint64_t> block(1 << 17);  // 1 MiB
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (std::int64_t left = bytes; left > 0;) {
    for (std::uint64_t& w : block) {
      x ^= x >> 12;
      x ^= x << 25;
      x ^= x >> 27;
      w = x * 0x2545F4914F6CDD1Dull;
    }
    const auto n = static_cast<std::size_t>(
        std::min<std::int64_t>(left, static_cast<std::int64_t>(block.size() * 8)));
    if (std::fwrite(block.data(), 1, n, f) != n) throw std::runtime_error(path + ": write failed");
    left -= static_cast<std::int64_t>(n);
  }
  if (std::fclose(f) != 0) throw std::runtime_error(path + ": write failed");
}

// Reads the file through the same 64 KiB fread loop as Sha256File, hashing nothing: the
// page-cache share of a whole-file pass.
double ReadOnly(const std::string& path) {
  const auto t0 = Clock::now();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open");
  char buf[1 << 16];
  std::size_t total = 0;
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    total += n + static_cast<unsigned char>(buf[0]);
  std::fclose(f);
  const double s = Seconds(t0, Clock::now());
  if (total == 0) std::abort();
  return s;
}

template <class Fn>
auto Timed(Fn&& fn, double* seconds) {
  const auto t0 = Clock::now();
  auto result = fn();
  *seconds = Seconds(t0, Clock::now());
  return result;
}

void Row(const char* what, const std::vector<double>& seconds, std::int64_t bytes) {
  const double best = *std::min_element(seconds.begin(), seconds.end());
  std::printf("%-42s best %7.3f s  %6.3f GB/s   runs:", what, best,
              static_cast<double>(bytes) / best / 1e9);
  for (const double s : seconds) std::printf(" %.3f", s);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "/tmp/ringpilot-bench-checkpoint.bin";
  std::int64_t bytes = std::int64_t{110'000'000} * 3 * 4;  // 1.32e9
  int repeat = 3;
  int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--file") {
      path = argv[i + 1];
    } else if (flag == "--bytes") {
      bytes = std::atoll(argv[i + 1]);
    } else if (flag == "--repeat") {
      repeat = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--threads") {
      max_threads = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: %s [--file PATH] [--bytes N] [--repeat R] [--threads T]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    MakeFile(path, bytes);
    std::printf("file %s, %lld bytes; OpenSSL %s (built against %s); %d hardware threads\n",
                path.c_str(), static_cast<long long>(bytes), OpenSSL_version(OPENSSL_VERSION),
                OPENSSL_VERSION_TEXT, static_cast<int>(std::thread::hardware_concurrency()));
    ReadOnly(path);  // into the page cache

    std::vector<double> read_s, legacy_s, evp_s;
    std::string legacy_digest, evp_digest;
    double s = 0;
    for (int r = 0; r < repeat; ++r) {
      read_s.push_back(ReadOnly(path));
      legacy_digest = Timed([&] { return LegacySha256File(path); }, &s);
      legacy_s.push_back(s);
      evp_digest = Timed([&] { return ringpilot::trainer::checkpoint::Sha256File(path); }, &s);
      evp_s.push_back(s);
    }
    std::printf("\nwhole file (Sha256File, one thread)\n");
    Row("read only (64 KiB fread, no hash)", read_s, bytes);
    Row("hand-written (LegacySha256)", legacy_s, bytes);
    Row("libcrypto EVP_sha256 (trainer/checkpoint/sha256.cpp)", evp_s, bytes);
    std::printf("speed-up (best/best): %.2fx\n",
                *std::min_element(legacy_s.begin(), legacy_s.end()) /
                    *std::min_element(evp_s.begin(), evp_s.end()));
    std::printf("digest hand-written %s\ndigest libcrypto    %s\n%s\n", legacy_digest.c_str(),
                evp_digest.c_str(), legacy_digest == evp_digest ? "digests match" : "MISMATCH");
    bool match = legacy_digest == evp_digest;

    const std::size_t chunk = std::size_t{64} << 20;  // checkpoint.cpp kChecksumChunkBytes
    for (int threads = 1; threads <= max_threads; threads *= 2) {
      std::vector<double> legacy_c, evp_c;
      std::vector<std::string> legacy_chunks, evp_chunks;
      for (int r = 0; r < repeat; ++r) {
        legacy_chunks = Timed([&] { return LegacySha256FileChunks(path, chunk, threads); }, &s);
        legacy_c.push_back(s);
        evp_chunks = Timed(
            [&] { return ringpilot::trainer::checkpoint::Sha256FileChunks(path, chunk, threads); },
            &s);
        evp_c.push_back(s);
      }
      std::printf("\n64 MiB chunks (Sha256FileChunks), %d thread%s, %zu chunks\n", threads,
                  threads == 1 ? "" : "s", evp_chunks.size());
      Row("hand-written (LegacySha256)", legacy_c, bytes);
      Row("libcrypto EVP_sha256 (trainer/checkpoint/sha256.cpp)", evp_c, bytes);
      std::printf("speed-up (best/best): %.2fx; %s\n",
                  *std::min_element(legacy_c.begin(), legacy_c.end()) /
                      *std::min_element(evp_c.begin(), evp_c.end()),
                  legacy_chunks == evp_chunks ? "all chunk digests match" : "MISMATCH");
      match = match && legacy_chunks == evp_chunks;
    }
    return match ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
