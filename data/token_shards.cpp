#include "data/token_shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "base/files.h"

namespace ringpilot::data {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token shards are little-endian and read in place");

constexpr char kTokenMagic[8] = {'R', 'P', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr char kIndexMagic[8] = {'R', 'P', 'T', 'O', 'K', 'I', 'D', 'X'};

// Byte offsets of the header fields (docs/data.md).
struct TokenHeaderAt {
  static constexpr int kVersion = 8, kWidth = 12, kVocab = 16, kCls = 20, kSep = 24, kMask = 28,
                       kPad = 32, kTokens = 40, kDocuments = 48;
};
struct IndexHeaderAt {
  static constexpr int kVersion = 8, kDocuments = 16, kTokens = 24;
};

template <class T>
T Get(const char* header, int at) {
  T v;
  std::memcpy(&v, header + at, sizeof(T));
  return v;
}
template <class T>
void Put(char* header, int at, T v) {
  std::memcpy(header + at, &v, sizeof(T));
}

std::string Str(int64_t v) { return std::to_string(v); }

// The first `n` bytes of `path`, or fewer when the file is shorter.
std::string ReadPrefix(const std::string& path, int64_t n) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
  std::string out(static_cast<size_t>(n), '\0');
  int64_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, out.data() + got, static_cast<size_t>(n - got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      throw DataError(path + ": cannot read: " + std::strerror(err));
    }
    if (r == 0) break;
    got += r;
  }
  ::close(fd);
  out.resize(static_cast<size_t>(got));
  return out;
}

int64_t SizeOf(const std::string& path, const std::string& prefix) {
  const int64_t bytes = base::FileSize(path);
  if (bytes < 0) {
    throw DataError(path + ": no such file (a token shard is " + TokenFilePath(prefix) + " and " +
                    IndexFilePath(prefix) + ")");
  }
  return bytes;
}

std::string CheckedHeader(const std::string& path, int64_t file_bytes, int64_t header_bytes,
                          const char (&magic)[8], const char* what) {
  if (file_bytes < header_bytes) {
    throw DataError(path + ": " + Str(file_bytes) + " bytes, shorter than the " +
                    Str(header_bytes) + "-byte header of a " + what + " (truncated?)");
  }
  std::string header = ReadPrefix(path, header_bytes);
  if (static_cast<int64_t>(header.size()) < header_bytes) {
    throw DataError(path + ": shorter than its header (truncated while reading?)");
  }
  if (std::memcmp(header.data(), magic, sizeof(magic)) != 0) {
    throw DataError(path + ": not a " + what + " (no '" + std::string(magic, sizeof(magic)) +
                    "' magic)");
  }
  const uint32_t version = Get<uint32_t>(header.data(), 8);
  if (version != kTokenFileVersion) {
    throw DataError(path + ": " + what + " version " + Str(version) + ", this build reads " +
                    Str(kTokenFileVersion));
  }
  return header;
}

void CheckVocab(const TokenVocab& v, const std::string& where) {
  if (v.size < 1 || v.size > (int64_t{1} << 32)) {
    throw DataError(where + ": vocabulary size " + Str(v.size) + " is not in 1..2^32");
  }
  const std::pair<const char*, int64_t> ids[] = {
      {"[CLS]", v.cls}, {"[SEP]", v.sep}, {"[MASK]", v.mask}, {"[PAD]", v.pad}};
  for (const auto& [name, id] : ids) {
    if (id < 0 || id >= v.size) {
      throw DataError(where + ": " + name + " id " + Str(id) + " is outside the vocabulary of " +
                      Str(v.size));
    }
  }
}

// mmap of a whole file, read-only.
void* MapFile(const std::string& path, int64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
  void* p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw DataError(path + ": cannot map: " + std::strerror(err));
  return p;
}

void WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) base::ThrowFileError(path, "write", errno);
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

std::string TokenFilePath(const std::string& prefix) { return prefix + ".tokens"; }
std::string IndexFilePath(const std::string& prefix) { return prefix + ".index"; }
std::string TokenizerFilePath(const std::string& prefix) { return prefix + ".tokenizer.json"; }

int TokenWidthFor(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

TokenShardInfo ReadTokenShardInfo(const std::string& prefix) {
  const std::string token_path = TokenFilePath(prefix);
  const std::string index_path = IndexFilePath(prefix);
  const int64_t token_bytes = SizeOf(token_path, prefix);
  const int64_t index_bytes = SizeOf(index_path, prefix);
  const std::string th =
      CheckedHeader(token_path, token_bytes, kTokenHeaderBytes, kTokenMagic, "token file");
  TokenShardInfo info;
  info.prefix = prefix;
  info.width = static_cast<int>(Get<uint32_t>(th.data(), TokenHeaderAt::kWidth));
  info.vocab.size = Get<uint32_t>(th.data(), TokenHeaderAt::kVocab);
  if (info.vocab.size == 0) info.vocab.size = int64_t{1} << 32;  // 2^32 ids wrap to 0
  info.vocab.cls = Get<uint32_t>(th.data(), TokenHeaderAt::kCls);
  info.vocab.sep = Get<uint32_t>(th.data(), TokenHeaderAt::kSep);
  info.vocab.mask = Get<uint32_t>(th.data(), TokenHeaderAt::kMask);
  info.vocab.pad = Get<uint32_t>(th.data(), TokenHeaderAt::kPad);
  const uint64_t tokens = Get<uint64_t>(th.data(), TokenHeaderAt::kTokens);
  const uint64_t documents = Get<uint64_t>(th.data(), TokenHeaderAt::kDocuments);
  CheckVocab(info.vocab, token_path);
  if (info.width != TokenWidthFor(info.vocab.size)) {
    throw DataError(token_path + ": ids of " + Str(info.width) + " bytes, but a vocabulary of " +
                    Str(info.vocab.size) + " takes " + Str(TokenWidthFor(info.vocab.size)) +
                    "-byte ids");
  }
  const uint64_t max_tokens = static_cast<uint64_t>(token_bytes) / info.width;
  if (tokens > max_tokens ||
      static_cast<uint64_t>(token_bytes - kTokenHeaderBytes) != tokens * info.width) {
    throw DataError(token_path + ": " + Str(token_bytes) + " bytes, but the header's " +
                    std::to_string(tokens) + " tokens of " + Str(info.width) + " bytes take " +
                    std::to_string(kTokenHeaderBytes + tokens * info.width) +
                    " (truncated, or written with another id width)");
  }
  info.tokens = static_cast<int64_t>(tokens);
  const std::string ih =
      CheckedHeader(index_path, index_bytes, kIndexHeaderBytes, kIndexMagic, "token index");
  const uint64_t index_documents = Get<uint64_t>(ih.data(), IndexHeaderAt::kDocuments);
  const uint64_t index_tokens = Get<uint64_t>(ih.data(), IndexHeaderAt::kTokens);
  if (index_documents != documents || index_tokens != tokens) {
    throw DataError(index_path + ": indexes " + std::to_string(index_documents) + " documents of " +
                    std::to_string(index_tokens) + " tokens, but " + token_path + " holds " +
                    std::to_string(documents) + " documents of " + std::to_string(tokens) +
                    " tokens (files of different shards?)");
  }
  if (documents > static_cast<uint64_t>(index_bytes) / 8 ||
      static_cast<uint64_t>(index_bytes - kIndexHeaderBytes) != (documents + 1) * 8) {
    throw DataError(index_path + ": " + Str(index_bytes) + " bytes, but " +
                    std::to_string(documents) + " documents take " +
                    std::to_string(kIndexHeaderBytes + (documents + 1) * 8) + " (truncated?)");
  }
  info.documents = static_cast<int64_t>(documents);
  return info;
}

TokenShard::TokenShard(const std::string& prefix) : info_(ReadTokenShardInfo(prefix)) {
  const std::string token_path = TokenFilePath(prefix);
  const std::string index_path = IndexFilePath(prefix);
  token_map_bytes_ = kTokenHeaderBytes + info_.tokens * info_.width;
  index_map_bytes_ = kIndexHeaderBytes + (info_.documents + 1) * 8;
  token_map_ = MapFile(token_path, token_map_bytes_);
  try {
    index_map_ = MapFile(index_path, index_map_bytes_);
  } catch (...) {
    ::munmap(token_map_, static_cast<size_t>(token_map_bytes_));
    throw;
  }
  tokens_ = static_cast<const char*>(token_map_) + kTokenHeaderBytes;
  offsets_ =
      reinterpret_cast<const uint64_t*>(static_cast<const char*>(index_map_) + kIndexHeaderBytes);
  try {
    if (offsets_[0] != 0) {
      throw DataError(index_path + ": document 0 starts at token " + std::to_string(offsets_[0]) +
                      ", not 0");
    }
    for (int64_t d = 0; d < info_.documents; ++d) {
      if (offsets_[d + 1] <= offsets_[d]) {
        throw DataError(index_path + ": document " + Str(d) + " is empty or runs backwards (" +
                        std::to_string(offsets_[d]) + " to " + std::to_string(offsets_[d + 1]) +
                        ")");
      }
    }
    if (offsets_[info_.documents] != static_cast<uint64_t>(info_.tokens)) {
      throw DataError(index_path + ": documents end at token " +
                      std::to_string(offsets_[info_.documents]) + ", but " + token_path +
                      " holds " + Str(info_.tokens));
    }
    for (int64_t i = 0; i < info_.tokens; ++i) {
      if (Token(i) >= info_.vocab.size) {
        throw DataError(token_path + ": id " + Str(Token(i)) + " of token " + Str(i) +
                        " is outside the vocabulary of " + Str(info_.vocab.size));
      }
    }
  } catch (...) {
    ::munmap(token_map_, static_cast<size_t>(token_map_bytes_));
    ::munmap(index_map_, static_cast<size_t>(index_map_bytes_));
    throw;
  }
}

TokenShard::~TokenShard() {
  ::munmap(token_map_, static_cast<size_t>(token_map_bytes_));
  ::munmap(index_map_, static_cast<size_t>(index_map_bytes_));
}

TokenShardWriter::TokenShardWriter(const std::string& prefix, const TokenVocab& vocab) {
  CheckVocab(vocab, TokenFilePath(prefix));
  info_.prefix = prefix;
  info_.vocab = vocab;
  info_.width = TokenWidthFor(vocab.size);
  const std::string tag = ".tmp-" + std::to_string(::getpid());
  token_tmp_ = TokenFilePath(prefix) + tag;
  index_tmp_ = IndexFilePath(prefix) + tag;
  fd_ = ::open(token_tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) base::ThrowFileError(token_tmp_, "create", errno);
  buffer_.assign(static_cast<size_t>(kTokenHeaderBytes), '\0');  // header written by Finish
  offsets_.push_back(0);
}

TokenShardWriter::~TokenShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(token_tmp_.c_str());
    ::unlink(index_tmp_.c_str());
  }
}

void TokenShardWriter::AddDocument(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  for (const int64_t id : ids) {
    if (id < 0 || id >= info_.vocab.size) {
      throw DataError(TokenFilePath(info_.prefix) + ": id " + Str(id) +
                      " is outside the vocabulary of " + Str(info_.vocab.size));
    }
    if (info_.width == 2) {
      const uint16_t v = static_cast<uint16_t>(id);
      buffer_.insert(buffer_.end(), reinterpret_cast<const char*>(&v),
                     reinterpret_cast<const char*>(&v) + 2);
    } else {
      const uint32_t v = static_cast<uint32_t>(id);
      buffer_.insert(buffer_.end(), reinterpret_cast<const char*>(&v),
                     reinterpret_cast<const char*>(&v) + 4);
    }
  }
  info_.tokens += static_cast<int64_t>(ids.size());
  ++info_.documents;
  offsets_.push_back(static_cast<uint64_t>(info_.tokens));
  if (buffer_.size() >= (size_t{1} << 22)) Flush();
}

void TokenShardWriter::Flush() {
  WriteAll(fd_, buffer_.data(), buffer_.size(), token_tmp_);
  buffer_.clear();
}

TokenShardInfo TokenShardWriter::Finish() {
  if (fd_ < 0) throw std::logic_error("TokenShardWriter::Finish called twice");
  Flush();
  char th[kTokenHeaderBytes] = {};
  std::memcpy(th, kTokenMagic, sizeof(kTokenMagic));
  Put<uint32_t>(th, TokenHeaderAt::kVersion, kTokenFileVersion);
  Put<uint32_t>(th, TokenHeaderAt::kWidth, static_cast<uint32_t>(info_.width));
  Put<uint32_t>(th, TokenHeaderAt::kVocab, static_cast<uint32_t>(info_.vocab.size));
  Put<uint32_t>(th, TokenHeaderAt::kCls, static_cast<uint32_t>(info_.vocab.cls));
  Put<uint32_t>(th, TokenHeaderAt::kSep, static_cast<uint32_t>(info_.vocab.sep));
  Put<uint32_t>(th, TokenHeaderAt::kMask, static_cast<uint32_t>(info_.vocab.mask));
  Put<uint32_t>(th, TokenHeaderAt::kPad, static_cast<uint32_t>(info_.vocab.pad));
  Put<uint64_t>(th, TokenHeaderAt::kTokens, static_cast<uint64_t>(info_.tokens));
  Put<uint64_t>(th, TokenHeaderAt::kDocuments, static_cast<uint64_t>(info_.documents));
  if (::pwrite(fd_, th, sizeof(th), 0) != static_cast<ssize_t>(sizeof(th))) {
    base::ThrowFileError(token_tmp_, "write", errno);
  }
  if (::fsync(fd_) != 0) base::ThrowFileError(token_tmp_, "fsync", errno);

  const int ifd = ::open(index_tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (ifd < 0) base::ThrowFileError(index_tmp_, "create", errno);
  char ih[kIndexHeaderBytes] = {};
  std::memcpy(ih, kIndexMagic, sizeof(kIndexMagic));
  Put<uint32_t>(ih, IndexHeaderAt::kVersion, kTokenFileVersion);
  Put<uint64_t>(ih, IndexHeaderAt::kDocuments, static_cast<uint64_t>(info_.documents));
  Put<uint64_t>(ih, IndexHeaderAt::kTokens, static_cast<uint64_t>(info_.tokens));
  try {
    WriteAll(ifd, ih, sizeof(ih), index_tmp_);
    WriteAll(ifd, reinterpret_cast<const char*>(offsets_.data()), offsets_.size() * 8, index_tmp_);
    if (::fsync(ifd) != 0) base::ThrowFileError(index_tmp_, "fsync", errno);
  } catch (...) {
    ::close(ifd);
    throw;
  }
  ::close(ifd);
  base::Rename(token_tmp_, TokenFilePath(info_.prefix));
  base::Rename(index_tmp_, IndexFilePath(info_.prefix));
  base::FsyncPath(base::DirName(info_.prefix));
  ::close(fd_);
  fd_ = -1;
  return info_;
}

int64_t PackedSequenceCount(const TokenShardInfo& info, int seq_len) {
  if (seq_len < 2) throw std::invalid_argument("packed sequences need seq_len >= 2");
  return (info.tokens + info.documents) / (seq_len - 1);
}

PackedSequences::PackedSequences(const TokenShard& shard, int seq_len)
    : shard_(shard), seq_len_(seq_len), size_(PackedSequenceCount(shard.info(), seq_len)) {
  if (size_ < 1) {
    throw DataError(TokenFilePath(shard.info().prefix) + ": " + Str(shard.info().tokens) +
                    " tokens in " + Str(shard.info().documents) +
                    " documents are too few for one sequence of " + Str(seq_len) + " tokens");
  }
}

void PackedSequences::Fill(int64_t i, int64_t* out) const {
  const TokenShardInfo& info = shard_.info();
  // Stream position p: document d starts there at DocumentStart(d) + d (one [SEP] after
  // each earlier document). Find the document holding the first position, then walk.
  int64_t p = i * (seq_len_ - 1);
  int64_t lo = 0, hi = info.documents - 1;
  while (lo < hi) {  // last d with DocumentStart(d) + d <= p
    const int64_t mid = (lo + hi + 1) / 2;
    if (shard_.DocumentStart(mid) + mid <= p) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  int64_t d = lo;
  int64_t in_doc = p - (shard_.DocumentStart(d) + d);
  out[0] = info.vocab.cls;
  for (int k = 1; k < seq_len_; ++k) {
    const int64_t length = shard_.DocumentStart(d + 1) - shard_.DocumentStart(d);
    if (in_doc < length) {
      out[k] = shard_.Token(shard_.DocumentStart(d) + in_doc);
      ++in_doc;
    } else {
      out[k] = info.vocab.sep;
      ++d;
      in_doc = 0;
    }
  }
}

}  // namespace ringpilot::data
