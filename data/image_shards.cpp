// data.kind image_shards: WebDataset-style tar shards, indexed once, read with pread.
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "data/cifar.h"
#include "data/image_source.h"

namespace ringpilot::data {
namespace {

constexpr int64_t kBlock = 512;
constexpr int64_t kMaxLabelBytes = 64;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// Reads exactly `size` bytes at `offset`; false on a short read or an error.
bool ReadAt(int fd, int64_t offset, void* out, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(out) + done, size - done,
                              static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A tar numeric field: octal text, or base-256 when the top bit of its first byte is set.
int64_t ParseNumber(const char* field, size_t len) {
  const auto* u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {
    int64_t v = u[0] & 0x7F;
    for (size_t i = 1; i < len; ++i) v = (v << 8) | u[i];
    return v;
  }
  size_t i = 0;
  while (i < len && field[i] == ' ') ++i;
  int64_t v = 0;
  for (; i < len && field[i] != ' ' && field[i] != '\0'; ++i) {
    if (field[i] < '0' || field[i] > '7') return -1;
    v = v * 8 + (field[i] - '0');
  }
  return v;
}

std::string Field(const char* p, size_t len) { return std::string(p, strnlen(p, len)); }

// The label text of a .cls member: a decimal integer, surrounding white space allowed.
int32_t ParseLabel(const std::string& text) {
  size_t i = 0, end = text.size();
  while (i < end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  while (end > i && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  if (i == end || end - i > 9) return -1;
  int32_t v = 0;
  for (; i < end; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

// pax extended header records: "LEN key=value\n" ...
void ParsePax(const std::string& data, std::string* path, int64_t* size) {
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t space = data.find(' ', pos);
    if (space == std::string::npos) return;
    const int64_t len = std::atoll(data.c_str() + pos);
    if (len <= 0 || pos + static_cast<size_t>(len) > data.size()) return;
    const std::string record = data.substr(space + 1, pos + len - space - 2);  // drop '\n'
    const size_t eq = record.find('=');
    if (eq != std::string::npos) {
      const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
      if (key == "path") *path = value;
      if (key == "size") *size = std::atoll(value.c_str());
    }
    pos += static_cast<size_t>(len);
  }
}

class ImageShards : public ImageSource {
 public:
  explicit ImageShards(const std::vector<std::string>& shards) : paths_(shards) {
    if (shards.empty()) throw DataError("image_shards: no shard files given");
    // A constructor that throws runs no destructor: the shards opened so far are closed
    // here (each rejected shard set used to leak its descriptors; found by
    // tests/fuzz/tar_shards_fuzzer, which ran out of them).
    try {
      for (size_t i = 0; i < shards.size(); ++i) Index(static_cast<int>(i));
      if (samples_.empty()) {
        throw DataError(shards.front() + (shards.size() > 1 ? " (and the other shards)" : "") +
                        ": no .jpg/.jpeg/.png members (not WebDataset image shards)");
      }
      for (const Sample& s : samples_) num_classes_ = std::max(num_classes_, s.label + 1);
      if (num_classes_ == 0) throw DataError(shards.front() + ": no member has a .cls label");
    } catch (...) {
      CloseAll();
      throw;
    }
  }
  ~ImageShards() override { CloseAll(); }

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int num_classes() const override { return num_classes_; }
  int32_t label(int64_t index) const override { return samples_[index].label; }
  std::string Describe(int64_t index) const override {
    const Sample& s = samples_[index];
    return paths_[s.shard] + ":" + std::string(names_.data() + s.name, s.name_size);
  }
  bool ReadInto(int64_t index, ByteSink& sink, std::string* error) const override {
    const Sample& s = samples_[index];
    uint8_t* bytes = sink.Room(static_cast<size_t>(s.size));
    if (bytes == nullptr) {
      *error = "no memory for " + std::to_string(s.size) + " bytes";
      return false;
    }
    if (!ReadAt(fds_[s.shard], s.offset, bytes, static_cast<size_t>(s.size))) {
      *error = std::string("cannot read the member: ") +
               (errno ? std::strerror(errno) : "the shard shrank");
      return false;
    }
    return true;
  }
  std::string Summary() const override {
    std::string line = std::to_string(paths_.size()) + " shard(s) from " + paths_.front() + ": " +
                       std::to_string(size()) + " images, " + std::to_string(num_classes_) +
                       " classes";
    if (unlabelled_ > 0) line += ", " + std::to_string(unlabelled_) + " without a .cls label";
    if (orphans_ > 0) line += ", " + std::to_string(orphans_) + " keys without an image skipped";
    return line;
  }

 private:
  struct Sample {
    int64_t offset = 0;
    int64_t size = 0;
    size_t name = 0;  // member name in names_
    uint32_t name_size = 0;
    int shard = 0;
    int32_t label = -1;
  };
  struct Key {
    int64_t sample = -1;     // index into samples_ once the key has an image
    int32_t label = -1;      // from its .cls member
    bool has_label = false;  // a .cls member was seen
  };

  void CloseAll() {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  }

  [[noreturn]] void Fail(int shard, const std::string& what) const {
    throw DataError(paths_[shard] + ": " + what);
  }

  void Index(int shard) {
    const std::string& path = paths_[shard];
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Fail(shard, std::string("cannot open: ") + std::strerror(errno));
    fds_.push_back(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) Fail(shard, "not a regular file");
    const int64_t file_size = st.st_size;
    std::unordered_map<std::string, Key> keys;
    std::string long_name, pax_path;
    int64_t pax_size = -1;
    char block[kBlock];
    int64_t off = 0;
    for (;;) {
      if (off + kBlock > file_size || !ReadAt(fd, off, block, kBlock)) {
        if (off == 0) Fail(shard, "not a tar file (shorter than one header)");
        Fail(shard,
             "truncated tar (no end-of-archive blocks after offset " + std::to_string(off) + ")");
      }
      if (std::all_of(block, block + kBlock, [](char c) { return c == 0; })) break;
      int64_t sum = 0;
      for (int i = 0; i < kBlock; ++i) {
        sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block[i]);
      }
      if (ParseNumber(block + 148, 8) != sum) {
        Fail(shard, "not a tar file (bad header checksum at offset " + std::to_string(off) + ")");
      }
      int64_t size = pax_size >= 0 ? pax_size : ParseNumber(block + 124, 12);
      if (size < 0) Fail(shard, "bad member size at offset " + std::to_string(off));
      const int64_t data = off + kBlock;
      if (data + size > file_size) {
        Fail(shard, "truncated tar (member at offset " + std::to_string(off) + " needs " +
                        std::to_string(size) + " bytes)");
      }
      const char type = block[156];
      if (type == 'L' || type == 'x') {  // GNU long name, pax extended header
        std::string text(static_cast<size_t>(size), '\0');
        if (!ReadAt(fd, data, text.data(), text.size())) Fail(shard, "cannot read a header");
        if (type == 'L') {
          long_name = text.substr(0, strnlen(text.c_str(), text.size()));
        } else {
          ParsePax(text, &pax_path, &pax_size);
        }
      } else {
        if (type == '0' || type == '\0' || type == '7') {
          std::string name = Field(block, 100);
          if (std::memcmp(block + 257, "ustar", 5) == 0 && block[345] != '\0') {
            name = Field(block + 345, 155) + "/" + name;
          }
          if (!pax_path.empty()) name = pax_path;
          if (!long_name.empty()) name = long_name;
          AddMember(shard, fd, name, data, size, &keys);
        }
        long_name.clear();
        pax_path.clear();
        pax_size = -1;
      }
      off = data + (size + kBlock - 1) / kBlock * kBlock;
    }
    for (const auto& [key, k] : keys) {
      if (k.sample < 0) ++orphans_;
    }
  }

  void AddMember(int shard, int fd, const std::string& name, int64_t data, int64_t size,
                 std::unordered_map<std::string, Key>* keys) {
    const size_t slash = name.rfind('/');
    const size_t base = slash == std::string::npos ? 0 : slash + 1;
    const size_t dot = name.find('.', base);
    if (dot == std::string::npos || dot == base) return;
    const std::string ext = Lower(name.substr(dot + 1));
    Key& key = (*keys)[name.substr(0, dot)];
    if (ext == "cls") {
      std::string text(static_cast<size_t>(std::min(size, kMaxLabelBytes)), '\0');
      key.has_label = true;
      key.label = size <= kMaxLabelBytes && ReadAt(fd, data, text.data(), text.size())
                      ? ParseLabel(text)
                      : -1;
      if (key.sample >= 0) SetLabel(key);
    } else if ((ext == "jpg" || ext == "jpeg" || ext == "png") && key.sample < 0) {
      Sample s;
      s.offset = data;
      s.size = size;
      s.name = names_.size();
      s.name_size = static_cast<uint32_t>(name.size());
      s.shard = shard;
      names_.insert(names_.end(), name.begin(), name.end());
      key.sample = static_cast<int64_t>(samples_.size());
      samples_.push_back(s);
      ++unlabelled_;
      if (key.has_label) SetLabel(key);
    }
  }

  void SetLabel(const Key& key) {
    Sample& s = samples_[key.sample];
    if (s.label < 0 && key.label >= 0) --unlabelled_;
    s.label = key.label;
  }

  const std::vector<std::string> paths_;
  std::vector<int> fds_;
  std::vector<Sample> samples_;
  std::vector<char> names_;
  int num_classes_ = 0;
  int64_t unlabelled_ = 0;
  int64_t orphans_ = 0;
};

}  // namespace

std::unique_ptr<ImageSource> OpenImageShards(const std::vector<std::string>& shards) {
  return std::make_unique<ImageShards>(shards);
}

std::vector<std::string> ExpandShardList(const std::string& spec) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    const size_t first = item.find_first_not_of(" \t");
    item = first == std::string::npos
               ? ""
               : item.substr(first, item.find_last_not_of(" \t") - first + 1);
    pos = comma + 1;
    if (item.empty()) continue;
    if (item.find_first_of("*?[") == std::string::npos) {
      out.push_back(item);
      continue;
    }
    glob_t g;
    std::memset(&g, 0, sizeof(g));
    const int rc = ::glob(item.c_str(), 0, nullptr, &g);
    if (rc != 0) {
      globfree(&g);
      throw DataError(item + ": no shard file matches");
    }
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matches.begin(), matches.end());
    out.insert(out.end(), matches.begin(), matches.end());
  }
  if (out.empty()) throw DataError("'" + spec + "': no shard files listed");
  return out;
}

}  // namespace ringpilot::data
