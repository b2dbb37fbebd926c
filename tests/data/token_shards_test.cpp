// data/token_shards.h: the shard format round trip, the errors for damaged files, and BERT
// packing across document boundaries.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/token_shards.h"
#include "tests/test_util.h"

namespace ringpilot::data {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

TokenVocab SmallVocab(int64_t size = 1000) { return {size, 2, 3, 4, 0}; }

std::string Write(const std::string& prefix, const std::vector<std::vector<int64_t>>& docs,
                  const TokenVocab& vocab = SmallVocab()) {
  TokenShardWriter w(prefix, vocab);
  for (const auto& d : docs) w.AddDocument(d);
  w.Finish();
  return prefix;
}

// The DataError message of opening `prefix`, or "" when it opens.
std::string OpenError(const std::string& prefix) {
  try {
    TokenShard shard(prefix);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

void Patch(const std::string& path, int64_t at, const void* bytes, size_t n) {
  std::string s = ReadFile(path);
  std::memcpy(s.data() + at, bytes, n);
  WriteFile(path, s);
}

TEST(TokenShards, RoundTripKeepsDocumentsAndVocabulary) {
  TempDir dir;
  const std::string p = dir.path() + "/train";
  Write(p, {{10, 11, 12}, {}, {999}, {13, 14}});
  const TokenShard shard(p);
  const TokenShardInfo& info = shard.info();
  EXPECT_EQ(info.width, 2);
  EXPECT_EQ(info.vocab.size, 1000);
  EXPECT_EQ(info.vocab.cls, 2);
  EXPECT_EQ(info.vocab.sep, 3);
  EXPECT_EQ(info.vocab.mask, 4);
  EXPECT_EQ(info.vocab.pad, 0);
  EXPECT_EQ(info.documents, 3);  // the empty one is skipped
  EXPECT_EQ(info.tokens, 6);
  EXPECT_EQ(shard.DocumentStart(0), 0);
  EXPECT_EQ(shard.DocumentStart(1), 3);
  EXPECT_EQ(shard.DocumentStart(2), 4);
  EXPECT_EQ(shard.DocumentStart(3), 6);
  const std::vector<int64_t> want = {10, 11, 12, 999, 13, 14};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(shard.Token(i), want[i]);
  EXPECT_EQ(FileBytes(TokenFilePath(p)), kTokenHeaderBytes + 6 * 2);
  EXPECT_EQ(FileBytes(IndexFilePath(p)), kIndexHeaderBytes + 4 * 8);
  // No temporary files left beside the shard.
  EXPECT_EQ(::access((TokenFilePath(p) + ".tmp-" + std::to_string(::getpid())).c_str(), F_OK), -1);
}

TEST(TokenShards, LargeVocabulariesUseFourByteIds) {
  TempDir dir;
  EXPECT_EQ(TokenWidthFor(65536), 2);
  EXPECT_EQ(TokenWidthFor(65537), 4);
  const std::string p = Write(dir.path() + "/big", {{70000, 5, 65536}}, {100000, 1, 2, 3, 0});
  const TokenShard shard(p);
  EXPECT_EQ(shard.info().width, 4);
  EXPECT_EQ(shard.Token(0), 70000);
  EXPECT_EQ(shard.Token(2), 65536);
}

TEST(TokenShards, WriterRejectsIdsOutsideTheVocabulary) {
  TempDir dir;
  TokenShardWriter w(dir.path() + "/x", SmallVocab());
  EXPECT_THROW(w.AddDocument({1, 1000}), DataError);
  EXPECT_THROW(TokenShardWriter(dir.path() + "/y", {100, 2, 3, 100, 0}), DataError);
}

TEST(TokenShards, AnUnfinishedWriterKeepsTheOldShard) {
  TempDir dir;
  const std::string p = Write(dir.path() + "/s", {{5, 6, 7}});
  {
    TokenShardWriter w(p, SmallVocab());
    w.AddDocument({8, 9});
  }  // destroyed without Finish: e.g. tokenising failed half way
  const TokenShard shard(p);
  EXPECT_EQ(shard.info().tokens, 3);
  EXPECT_EQ(::access((TokenFilePath(p) + ".tmp-" + std::to_string(::getpid())).c_str(), F_OK), -1);
}

TEST(TokenShards, DamagedFilesAreOneLineErrorsNamingTheFile) {
  TempDir dir;
  const std::string p = Write(dir.path() + "/s", {{10, 11, 12}, {13, 14}});
  const std::string tokens = TokenFilePath(p), index = IndexFilePath(p);
  const std::string good_tokens = ReadFile(tokens), good_index = ReadFile(index);
  auto restore = [&] {
    WriteFile(tokens, good_tokens);
    WriteFile(index, good_index);
  };
  auto expect = [&](const std::string& file, const std::string& words) {
    const std::string e = OpenError(p);
    EXPECT_EQ(e.rfind(file + ":", 0), 0u) << e;
    EXPECT_NE(e.find(words), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    restore();
  };
  ASSERT_EQ(OpenError(p), "");

  // Missing index.
  ::unlink(index.c_str());
  expect(index, "no such file");
  // Truncated token file: one id short.
  WriteFile(tokens, good_tokens.substr(0, good_tokens.size() - 2));
  expect(tokens, "truncated");
  // Shorter than the header.
  WriteFile(tokens, good_tokens.substr(0, 10));
  expect(tokens, "header");
  // Wrong magic.
  Patch(tokens, 0, "NOTTOKEN", 8);
  expect(tokens, "not a token file");
  // Unknown version.
  const uint32_t v2 = 2;
  Patch(tokens, 8, &v2, 4);
  expect(tokens, "version 2");
  // A width that is not the vocabulary's (uint32 header on a 1000-word vocabulary).
  const uint32_t four = 4;
  Patch(tokens, 12, &four, 4);
  expect(tokens, "4 bytes");
  // Ids written as uint32 while the header says 2 bytes: the size does not match.
  {
    std::string wide = good_tokens.substr(0, kTokenHeaderBytes);
    for (int id : {10, 11, 12, 13, 14}) wide.append(reinterpret_cast<const char*>(&id), 4);
    WriteFile(tokens, wide);
    expect(tokens, "another id width");
  }
  // A special id outside the vocabulary.
  const uint32_t big = 5000;
  Patch(tokens, 28, &big, 4);
  expect(tokens, "[MASK] id 5000");
  // An id outside the vocabulary.
  const uint16_t bad_id = 1000;
  Patch(tokens, kTokenHeaderBytes + 2, &bad_id, 2);
  expect(tokens, "id 1000 of token 1");
  // Index of another shard: its counts differ.
  const uint64_t three = 3;
  Patch(index, 16, &three, 8);
  expect(index, "different shards");
  // Truncated index.
  WriteFile(index, good_index.substr(0, good_index.size() - 8));
  expect(index, "truncated");
  // Offsets that run backwards / an empty document / not ending at the token count.
  const uint64_t back = 0;
  Patch(index, kIndexHeaderBytes + 8, &back, 8);
  expect(index, "document 0 is empty or runs backwards");
  const uint64_t short_end = 4;
  Patch(index, kIndexHeaderBytes + 16, &short_end, 8);
  expect(index, "end at token 4");
  // Header-only checks are the same through ReadTokenShardInfo.
  WriteFile(tokens, good_tokens.substr(0, good_tokens.size() - 1));
  EXPECT_THROW(ReadTokenShardInfo(p), DataError);
  restore();
  EXPECT_EQ(ReadTokenShardInfo(p).tokens, 5);
}

TEST(PackedSequences, CrossDocumentBoundariesBehindOneCls) {
  TempDir dir;
  // Stream: 10 11 12 [SEP] 13 [SEP] 14 15 16 17 [SEP] = 11 ids; seq_len 5 takes 4 per
  // sequence: 2 whole sequences, a tail of 3 left out.
  const std::string p = Write(dir.path() + "/s", {{10, 11, 12}, {13}, {14, 15, 16, 17}});
  const TokenShard shard(p);
  const PackedSequences packed(shard, 5);
  ASSERT_EQ(packed.size(), 2);
  EXPECT_EQ(PackedSequenceCount(shard.info(), 5), 2);
  int64_t row[5];
  packed.Fill(0, row);
  EXPECT_EQ(std::vector<int64_t>(row, row + 5), (std::vector<int64_t>{2, 10, 11, 12, 3}));
  packed.Fill(1, row);
  EXPECT_EQ(std::vector<int64_t>(row, row + 5), (std::vector<int64_t>{2, 13, 3, 14, 15}));
  // seq_len 3: 5 sequences of 2 stream ids.
  const PackedSequences pairs(shard, 3);
  ASSERT_EQ(pairs.size(), 5);
  const std::vector<std::vector<int64_t>> want = {
      {2, 10, 11}, {2, 12, 3}, {2, 13, 3}, {2, 14, 15}, {2, 16, 17}};
  for (int i = 0; i < 5; ++i) {
    pairs.Fill(i, row);
    EXPECT_EQ(std::vector<int64_t>(row, row + 3), want[i]) << i;
  }
}

TEST(PackedSequences, EveryTokenAppearsOnceInOrder) {
  TempDir dir;
  std::vector<std::vector<int64_t>> docs;
  std::vector<int64_t> stream;
  int64_t next = 10;
  for (int d = 0; d < 50; ++d) {
    std::vector<int64_t> doc;
    for (int k = 0; k < 1 + (d * 7) % 13; ++k) doc.push_back(next++ % 990 + 10);
    docs.push_back(doc);
    stream.insert(stream.end(), doc.begin(), doc.end());
    stream.push_back(3);
  }
  const std::string p = Write(dir.path() + "/s", docs);
  const TokenShard shard(p);
  const PackedSequences packed(shard, 16);
  EXPECT_EQ(packed.size(), static_cast<int64_t>(stream.size()) / 15);
  std::vector<int64_t> row(16), seen;
  for (int64_t i = 0; i < packed.size(); ++i) {
    packed.Fill(i, row.data());
    EXPECT_EQ(row[0], 2);
    seen.insert(seen.end(), row.begin() + 1, row.end());
  }
  EXPECT_EQ(seen, std::vector<int64_t>(stream.begin(), stream.begin() + seen.size()));
}

TEST(PackedSequences, AShardTooSmallForOneSequenceIsAnError) {
  TempDir dir;
  const std::string p = Write(dir.path() + "/s", {{10, 11}});
  const TokenShard shard(p);
  try {
    PackedSequences packed(shard, 128);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(TokenFilePath(p) + ":", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace ringpilot::data
