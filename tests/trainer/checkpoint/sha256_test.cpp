#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trainer/checkpoint/sha256.h"

namespace ringpilot::trainer::checkpoint {
namespace {

std::string Digest(const std::string& s) {
  Sha256 h;
  h.Update(s.data(), s.size());
  return h.HexDigest();
}

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(Digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.Update(chunk.data(), chunk.size());
  EXPECT_EQ(million.HexDigest(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 7));
  Sha256 h;
  for (size_t off = 0; off < data.size(); off += 63) {
    h.Update(data.data() + off, std::min<size_t>(63, data.size() - off));
  }
  EXPECT_EQ(h.HexDigest(), Digest(data));
}

TEST(Sha256, FileAndMissingFile) {
  const std::string path = testing::TempDir() + "/sha_test.bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fputs("abc", f);
  std::fclose(f);
  EXPECT_EQ(Sha256File(path), Digest("abc"));
  EXPECT_THROW(Sha256File(path + ".missing"), std::runtime_error);
}

TEST(Sha256, FileChunksMatchDigestsOfThePieces) {
  const std::string path = ::testing::TempDir() + "/sha256_chunks.bin";
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>(i * 7 + 3);
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
  }
  for (int threads : {1, 3, 8}) {
    const auto chunks = Sha256FileChunks(path, 300, threads);
    ASSERT_EQ(chunks.size(), 4u);  // 300, 300, 300, 100
    for (size_t c = 0; c < chunks.size(); ++c) {
      EXPECT_EQ(chunks[c], Digest(data.substr(c * 300, 300))) << "chunk " << c;
    }
  }
  EXPECT_EQ(Sha256FileChunks(path, 1000, 2), std::vector<std::string>{Digest(data)});
  EXPECT_THROW(Sha256FileChunks(path + ".missing", 300, 2), std::runtime_error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ringpilot::trainer::checkpoint
