#include "data/cifar.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/files.h"

namespace ringpilot::data {
namespace {

int LabelBytes(CifarVariant v) { return v == CifarVariant::kCifar10 ? 1 : 2; }
int Classes(CifarVariant v) { return v == CifarVariant::kCifar10 ? 10 : 100; }

// Records in `file`, checked against its size.
int64_t RecordsIn(const std::string& file, CifarVariant variant) {
  const int64_t record = LabelBytes(variant) + kCifarImageBytes;
  const int64_t bytes = base::FileSize(file);
  if (bytes < 0) throw DataError(file + ": cannot read: " + std::strerror(ENOENT));
  if (bytes == 0) throw DataError(file + ": empty file, not a CIFAR batch");
  if (bytes % record != 0) {
    throw DataError(file + ": " + std::to_string(bytes) + " bytes is not a whole number of " +
                    std::to_string(record) + "-byte CIFAR-" + std::to_string(Classes(variant)) +
                    " records (truncated, or another format)");
  }
  return bytes / record;
}

}  // namespace

std::vector<std::string> CifarFiles(const std::string& path, CifarVariant variant, bool train) {
  if (!base::Exists(path)) throw DataError(path + ": no such file or folder");
  if (!base::IsDirectory(path)) return {path};
  std::vector<std::string> files;
  for (const std::string& name : base::ListDir(path)) {
    const bool wanted = variant == CifarVariant::kCifar10
                            ? (train ? name.rfind("data_batch_", 0) == 0 && name.size() > 15 &&
                                           name.compare(name.size() - 4, 4, ".bin") == 0
                                     : name == "test_batch.bin")
                            : name == (train ? "train.bin" : "test.bin");
    if (wanted) files.push_back(path + "/" + name);
  }
  if (files.empty()) {
    const char* expected = variant == CifarVariant::kCifar10
                               ? (train ? "data_batch_*.bin" : "test_batch.bin")
                               : (train ? "train.bin" : "test.bin");
    throw DataError(path + ": no CIFAR-" + std::to_string(Classes(variant)) + " " + expected +
                    " in this folder");
  }
  return files;  // ListDir is sorted: data_batch_1 ... data_batch_5
}

int64_t CountCifarRecords(const std::vector<std::string>& files, CifarVariant variant) {
  int64_t n = 0;
  for (const std::string& file : files) n += RecordsIn(file, variant);
  return n;
}

CifarSet ReadCifar(const std::vector<std::string>& files, CifarVariant variant) {
  CifarSet set;
  set.num_classes = Classes(variant);
  const int label_bytes = LabelBytes(variant);
  const int64_t record = label_bytes + kCifarImageBytes;
  for (const std::string& file : files) {
    const int64_t n = RecordsIn(file, variant);
    std::ifstream in(file, std::ios::binary);
    if (!in) throw DataError(file + ": cannot open: " + std::strerror(errno));
    const size_t first = set.labels.size();
    set.labels.resize(first + n);
    set.pixels.resize((first + n) * kCifarImageBytes);
    std::vector<char> buf(static_cast<size_t>(record));
    for (int64_t i = 0; i < n; ++i) {
      if (!in.read(buf.data(), record)) {
        throw DataError(file + ": read failed at record " + std::to_string(i));
      }
      const int label = static_cast<uint8_t>(buf[label_bytes - 1]);  // CIFAR-100: the fine one
      if (label >= set.num_classes) {
        throw DataError(file + ": record " + std::to_string(i) + " has label " +
                        std::to_string(label) + ", not below " + std::to_string(set.num_classes));
      }
      set.labels[first + i] = label;
      std::memcpy(set.pixels.data() + (first + i) * kCifarImageBytes, buf.data() + label_bytes,
                  kCifarImageBytes);
    }
  }
  return set;
}

}  // namespace ringpilot::data
