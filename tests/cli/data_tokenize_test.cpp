// `ringpilot data tokenize` end to end on real English text (the licence texts Debian
// installs in /usr/share/common-licenses), with a SentencePiece model that spm_train trains
// here: the shard holds exactly spm_encode's ids, documents split at blank lines, and the
// model's special pieces in its header; bad input is one line naming the file, and an
// existing shard is kept.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/token_shards.h"
#include "tests/test_util.h"

namespace ringpilot::cli {
namespace {

using testing::ProcessResult;
using testing::ReadFile;
using testing::RingpilotBinary;
using testing::RunProcess;
using testing::SplitLines;
using testing::TempDir;
using testing::WriteFile;

constexpr int kVocab = 1000;

// Regular files of /usr/share/common-licenses (GPL, LGPL, ... are links to versions).
std::vector<std::string> LicenceTexts() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses")) {
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Join(const std::vector<std::string>& v, char sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(1, sep)) + s;
  return out;
}

class DataTokenize : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    texts_ = LicenceTexts();
    ASSERT_GE(texts_.size(), 5u) << "needs /usr/share/common-licenses (base-files)";
    model_ = dir_->path() + "/spm.model";
    const ProcessResult r = RunProcess(
        {"spm_train", "--input=" + Join(texts_, ','), "--model_prefix=" + dir_->path() + "/spm",
         "--vocab_size=" + std::to_string(kVocab), "--model_type=unigram",
         "--control_symbols=[CLS],[SEP],[MASK],[PAD]", "--minloglevel=1"});
    ASSERT_EQ(r.exit_code, 0) << "spm_train (Debian sentencepiece): " << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }

  static ProcessResult Tokenize(const std::string& model, const std::string& out,
                                const std::vector<std::string>& texts) {
    std::vector<std::string> argv = {RingpilotBinary(), "data", "tokenize", "--model", model,
                                     "--out",           out};
    argv.insert(argv.end(), texts.begin(), texts.end());
    return RunProcess(argv);
  }

  static TempDir* dir_;
  static std::vector<std::string> texts_;
  static std::string model_;
};
TempDir* DataTokenize::dir_ = nullptr;
std::vector<std::string> DataTokenize::texts_;
std::string DataTokenize::model_;

TEST_F(DataTokenize, ShardHoldsSpmEncodeIdsPerBlankLineDocument) {
  const std::string prefix = dir_->path() + "/licences";
  const std::vector<std::string> texts(texts_.begin(), texts_.begin() + 3);
  const ProcessResult r = Tokenize(model_, prefix, texts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("vocabulary 1000 (2-byte ids"), std::string::npos) << r.out;
  // The Hugging Face tokenizer beside the shard (tests/integration/examples.sh checks that it
  // encodes as SentencePiece does): the model's pieces, [MASK] among the special tokens.
  EXPECT_NE(r.out.find("; tokenizer " + data::TokenizerFilePath(prefix)), std::string::npos)
      << r.out << r.err;
  const std::string tokenizer = ReadFile(data::TokenizerFilePath(prefix));
  EXPECT_NE(tokenizer.find("\"Unigram\""), std::string::npos);
  EXPECT_NE(tokenizer.find("\"content\": \"[MASK]\""), std::string::npos);

  // What spm_encode makes of the same lines, and where the blank lines cut documents.
  std::vector<int64_t> want;
  std::vector<int64_t> doc_starts;
  for (const std::string& text : texts) {
    const ProcessResult enc = RunProcess(
        {"sh", "-c", "spm_encode --model=\"$0\" --output_format=id < \"$1\"", model_, text});
    ASSERT_EQ(enc.exit_code, 0) << enc.err;
    bool in_doc = false;
    std::istringstream lines(enc.out);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream ids(line);
      int64_t id;
      bool any = false;
      while (ids >> id) {
        if (!in_doc) doc_starts.push_back(static_cast<int64_t>(want.size()));
        in_doc = any = true;
        want.push_back(id);
      }
      if (!any) in_doc = false;  // a blank line ends the document
    }
  }
  const data::TokenShard shard(prefix);
  const data::TokenShardInfo& info = shard.info();
  ASSERT_EQ(info.tokens, static_cast<int64_t>(want.size()));
  ASSERT_GT(info.tokens, 3000);
  for (int64_t i = 0; i < info.tokens; ++i) ASSERT_EQ(shard.Token(i), want[i]) << "token " << i;
  ASSERT_EQ(info.documents, static_cast<int64_t>(doc_starts.size()));
  for (int64_t d = 0; d < info.documents; ++d) EXPECT_EQ(shard.DocumentStart(d), doc_starts[d]);

  // The header's special ids are the model's pieces (spm_train's .vocab: line n = piece n).
  const std::vector<std::string> vocab = SplitLines(ReadFile(dir_->path() + "/spm.vocab"));
  ASSERT_EQ(static_cast<int64_t>(vocab.size()), info.vocab.size);
  auto piece = [&](int64_t id) { return vocab[id].substr(0, vocab[id].find('\t')); };
  EXPECT_EQ(piece(info.vocab.cls), "[CLS]");
  EXPECT_EQ(piece(info.vocab.sep), "[SEP]");
  EXPECT_EQ(piece(info.vocab.mask), "[MASK]");
  EXPECT_EQ(piece(info.vocab.pad), "[PAD]");
  EXPECT_EQ(info.width, 2);
  // Control symbols never come out of text: no special id inside the documents.
  const std::set<int64_t> special = {info.vocab.cls, info.vocab.sep, info.vocab.mask,
                                     info.vocab.pad};
  for (int64_t i = 0; i < info.tokens; ++i) ASSERT_EQ(special.count(shard.Token(i)), 0u) << i;
}

TEST_F(DataTokenize, BadInputIsOneLineAndKeepsTheOldShard) {
  const std::string prefix = dir_->path() + "/kept";
  ASSERT_EQ(Tokenize(model_, prefix, {texts_[0]}).exit_code, 0);
  const std::string before = ReadFile(data::TokenFilePath(prefix));

  auto expect_error = [&](const ProcessResult& r, const std::string& words) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
    EXPECT_EQ(ReadFile(data::TokenFilePath(prefix)), before);
  };
  // A text file that is not there, after one that is.
  expect_error(Tokenize(model_, prefix, {texts_[1], dir_->path() + "/missing.txt"}),
               dir_->path() + "/missing.txt: cannot read");
  // Not a SentencePiece model.
  expect_error(Tokenize(texts_[0], prefix, {texts_[1]}), texts_[0] + ": not a SentencePiece");
  // A model without BERT's special pieces.
  const ProcessResult plain =
      RunProcess({"spm_train", "--input=" + texts_[0], "--model_prefix=" + dir_->path() + "/plain",
                  "--vocab_size=300", "--minloglevel=1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  expect_error(Tokenize(dir_->path() + "/plain.model", prefix, {texts_[1]}),
               dir_->path() + "/plain.model: no [CLS] piece; train the model with spm_train");
  // Only blank lines.
  WriteFile(dir_->path() + "/blank.txt", "\n  \n\n");
  expect_error(Tokenize(model_, prefix, {dir_->path() + "/blank.txt"}), "no text to tokenise");
  // No temporary files left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir_->path())) {
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace ringpilot::cli
