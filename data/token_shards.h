// Pre-tokenised text for masked-LM training (data.kind tokens): a shard is a pair of files
// at a prefix P, memory-mapped by every rank:
//
//   P.tokens  64-byte header (magic "RPTOKENS", version, id width, vocabulary size, the
//             [CLS] [SEP] [MASK] [PAD] ids, token and document counts), then every token id
//             of every document, little-endian, 2 bytes each for vocabularies up to 65536
//             ids, else 4
//   P.index   32-byte header (magic "RPTOKIDX", version, document and token counts), then
//             documents + 1 little-endian uint64 offsets: document d is tokens
//             [offset[d], offset[d+1]) of P.tokens
//
// The two headers repeat the counts so that a truncated file, a file of the wrong id width
// or an index of another token file is detected from the sizes alone. docs/data.md has the
// byte layout. Sequences for BERT are packed across document boundaries (PackedSequences).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/cifar.h"  // DataError

namespace ringpilot::data {

/// The vocabulary a shard was tokenised with: its size and BERT's special ids in it.
struct TokenVocab {
  int64_t size = 0;
  int64_t cls = 0;   ///< [CLS]: first token of every packed sequence
  int64_t sep = 0;   ///< [SEP]: after every document
  int64_t mask = 0;  ///< [MASK]: what most masked positions read
  int64_t pad = 0;   ///< [PAD]: recorded for other tools; packing never pads
};

/// What the headers of a shard say.
struct TokenShardInfo {
  std::string prefix;
  int width = 0;  ///< bytes per token id: 2 or 4
  TokenVocab vocab;
  int64_t tokens = 0;
  int64_t documents = 0;
};

inline constexpr int kTokenFileVersion = 1;
inline constexpr int64_t kTokenHeaderBytes = 64;
inline constexpr int64_t kIndexHeaderBytes = 32;

/// P.tokens and P.index of prefix P.
std::string TokenFilePath(const std::string& prefix);
std::string IndexFilePath(const std::string& prefix);
/// P.tokenizer.json: the Hugging Face tokenizer the shard was tokenised with (written by
/// `ringpilot data tokenize`, copied beside the weights by `ringpilot export`); optional.
std::string TokenizerFilePath(const std::string& prefix);

/// Bytes per id for a vocabulary of `vocab_size` ids: 2 up to 65536, else 4.
int TokenWidthFor(int64_t vocab_size);

/// Reads and cross-checks both headers and the files' sizes (not the ids): what a job
/// needs before it maps the data (vocabulary, sequence count). Throws DataError naming the
/// file: missing, shorter than its header, wrong magic or version, a width that is not the
/// vocabulary's, special ids outside the vocabulary, a size that is not the header's counts
/// (truncated or written with another width), counts that differ between the two files.
TokenShardInfo ReadTokenShardInfo(const std::string& prefix);

/// A shard mapped read-only into memory and checked in full at construction: the headers
/// (as ReadTokenShardInfo), the index (starts at 0, every document non-empty, ends at the
/// token count) and every id (below the vocabulary size). Throws DataError naming the file
/// and what is wrong. Immutable after construction: thread-safe to read.
class TokenShard {
 public:
  explicit TokenShard(const std::string& prefix);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const TokenShardInfo& info() const { return info_; }
  /// Id of token `i` (0 <= i < info().tokens).
  int64_t Token(int64_t i) const {
    return info_.width == 2 ? static_cast<const uint16_t*>(tokens_)[i]
                            : static_cast<const uint32_t*>(tokens_)[i];
  }
  /// First token of document `d`; DocumentStart(documents) is the token count.
  int64_t DocumentStart(int64_t d) const { return static_cast<int64_t>(offsets_[d]); }

 private:
  TokenShardInfo info_;
  void* token_map_ = nullptr;
  int64_t token_map_bytes_ = 0;
  void* index_map_ = nullptr;
  int64_t index_map_bytes_ = 0;
  const void* tokens_ = nullptr;
  const uint64_t* offsets_ = nullptr;
};

/// Writes a shard: documents go to temporary files beside P.tokens and P.index, which
/// Finish renames over them once both are complete and synced, so an existing shard at P
/// stays whole until then and a failed write leaves it as it was (the destructor removes
/// the temporary files of an unfinished writer). Not thread-safe.
class TokenShardWriter {
 public:
  /// Throws DataError for a vocabulary whose special ids are outside it, and base::FileError
  /// when the temporary file cannot be created.
  TokenShardWriter(const std::string& prefix, const TokenVocab& vocab);
  ~TokenShardWriter();
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  /// Appends one document; an empty one is skipped (packing needs non-empty documents).
  /// Throws DataError for an id outside the vocabulary.
  void AddDocument(const std::vector<int64_t>& ids);
  /// Tokens added so far.
  int64_t tokens() const { return info_.tokens; }
  /// Writes the headers and the index, syncs, renames both files into place. Throws
  /// base::FileError when writing fails (the previous shard at the prefix is kept).
  TokenShardInfo Finish();

 private:
  TokenShardInfo info_;
  std::string token_tmp_;
  std::string index_tmp_;
  int fd_ = -1;
  std::vector<uint64_t> offsets_;
  std::vector<char> buffer_;
  void Flush();
};

/// BERT pretraining sequences packed from a shard: the documents are read as one stream
/// `doc0 [SEP] doc1 [SEP] doc2 [SEP] ...`, cut into consecutive pieces of seq_len - 1 ids,
/// each behind a [CLS]: sequence i is [CLS] + stream[i (L-1), (i+1)(L-1)). Sequences cross
/// document boundaries (RoBERTa's FULL-SENTENCES packing), none is padded, and the stream's
/// tail too short for a whole sequence is not used. Immutable: thread-safe.
class PackedSequences {
 public:
  /// Holds `shard` (which must outlive it). Throws DataError naming the token file when the
  /// shard is too small for one sequence, std::invalid_argument for seq_len < 2.
  PackedSequences(const TokenShard& shard, int seq_len);

  /// Sequences of the shard: (tokens + documents) / (seq_len - 1).
  int64_t size() const { return size_; }
  int seq_len() const { return seq_len_; }
  /// Writes sequence `i`'s seq_len ids to `out`.
  void Fill(int64_t i, int64_t* out) const;

 private:
  const TokenShard& shard_;
  const int seq_len_;
  int64_t size_ = 0;
};

/// Sequences of seq_len ids packed from a shard of `info` (PackedSequences::size without
/// mapping the shard).
int64_t PackedSequenceCount(const TokenShardInfo& info, int seq_len);

}  // namespace ringpilot::data
