// trainer/input/dataset_factory.h TokenSpecFor: the run's vocabulary and special ids come from the
// shard header (tokens) or synthetic data's constants, model.vocab_size follows them, and
// a smaller vocab_size or a data.val shard of another vocabulary is a one-line error naming
// the file.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "base/files.h"
#include "data/token_shards.h"
#include "trainer/input/dataset_factory.h"
#include "trainer/input/synthetic_data.h"

namespace ringpilot::trainer::input {
namespace {

// A fresh folder, removed at scope exit (base::RemoveTree: LibTorch shadows
// std::filesystem, which tests/test_util.h's TempDir uses).
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = "/tmp/ringpilot-token-spec-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~ScratchDir() { base::RemoveTree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Shard(const std::string& prefix, const data::TokenVocab& vocab) {
  data::TokenShardWriter w(prefix, vocab);
  w.AddDocument({7, 8, 9});
  w.Finish();
  return prefix;
}

InputOptions TokensInput(const std::string& train, const std::string& val = "") {
  InputOptions options;
  options.model_input = models::InputKind::kTokens;
  options.seq_len = 64;
  options.kind = config::DataKind::kTokens;
  options.train = train;
  options.val = val;
  return options;
}

std::string ErrorOf(const InputOptions& options) {
  try {
    TokenSpecFor(options);
  } catch (const data::DataError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenSpecFor, SyntheticUsesBertsIdsAndVocabSize) {
  InputOptions options;  // synthetic
  options.model_input = models::InputKind::kTokens;
  options.seq_len = 32;
  options.vocab_size = 0;  // model.vocab_size 0: BERT's vocabulary
  models::TokenSpec s = TokenSpecFor(options);
  EXPECT_EQ(s.vocab, config::kSyntheticVocabSize);
  EXPECT_EQ(s.cls, kSyntheticCls);
  EXPECT_EQ(s.sep, kSyntheticSep);
  EXPECT_EQ(s.mask, kSyntheticMask);
  EXPECT_EQ(s.seq_len, 32);
  options.vocab_size = 2048;
  EXPECT_EQ(TokenSpecFor(options).vocab, 2048);
}

TEST(TokenSpecFor, TokensFollowTheShardHeader) {
  ScratchDir dir;
  const std::string train = Shard(dir.path() + "/train", {1200, 5, 6, 7, 0});
  InputOptions options = TokensInput(train, Shard(dir.path() + "/val", {1200, 5, 6, 7, 0}));
  models::TokenSpec s = TokenSpecFor(options);
  EXPECT_EQ(s.vocab, 1200);
  EXPECT_EQ(s.cls, 5);
  EXPECT_EQ(s.sep, 6);
  EXPECT_EQ(s.mask, 7);
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.seq_len, 64);
  options.vocab_size = 1280;  // more rows than ids: allowed
  EXPECT_EQ(TokenSpecFor(options).vocab, 1280);

  options.vocab_size = 1000;
  const std::string small = ErrorOf(options);
  EXPECT_EQ(small.rfind(data::TokenFilePath(train) + ": model.vocab_size 1000 is smaller", 0), 0u)
      << small;

  const std::string other = Shard(dir.path() + "/other", {1200, 5, 6, 8, 0});
  const std::string mismatch = ErrorOf(TokensInput(train, other));
  EXPECT_EQ(mismatch.rfind(data::TokenFilePath(other) + ": another vocabulary", 0), 0u) << mismatch;
  EXPECT_EQ(mismatch.find('\n'), std::string::npos);

  const std::string missing = ErrorOf(TokensInput(dir.path() + "/nothing"));
  EXPECT_NE(missing.find("nothing.tokens: no such file"), std::string::npos) << missing;
}

}  // namespace
}  // namespace ringpilot::trainer::input
