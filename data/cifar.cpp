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

// The records a file of the distribution holds, by its name: CIFAR-10's data_batch_N.bin
// and test_batch.bin 10,000 each; CIFAR-100's train.bin 50,000 and test.bin 10,000. 0 for
// any other name (a subset or a file of one's own).
int64_t DistributionRecords(const std::string& file, CifarVariant variant) {
  const std::size_t slash = file.rfind('/');
  const std::string name = slash == std::string::npos ? file : file.substr(slash + 1);
  if (variant == CifarVariant::kCifar100) {
    return name == "train.bin" ? 50000 : name == "test.bin" ? 10000 : 0;
  }
  if (name == "test_batch.bin") return 10000;
  const std::string prefix = "data_batch_", suffix = ".bin";
  if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.find_first_not_of("0123456789") == std::string::npos) return 10000;
  }
  return 0;
}

// Records in `file`, checked against its size (and a distribution file's against its count).
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
  const int64_t records = bytes / record;
  // A batch cut on a record boundary is a whole number of records: only its name tells
  // (5,000 records of data_batch_1.bin trained silently, and train.epochs halved the steps).
  if (const int64_t expected = DistributionRecords(file, variant);
      expected > 0 && records != expected) {
    throw DataError(file + ": " + std::to_string(records) + " records, but CIFAR-" +
                    std::to_string(Classes(variant)) + "'s " + file.substr(file.rfind('/') + 1) +
                    " holds " + std::to_string(expected) +
                    " (cut short? a file of other records must not have a distribution name)");
  }
  return records;
}

}  // namespace

std::vector<std::string> CifarFiles(const std::string& path, CifarVariant variant, bool train) {
  if (!base::Exists(path)) throw DataError(path + ": no such file or folder");
  if (!base::IsDirectory(path)) return {path};
  std::vector<std::string> files;
  for (const std::string& name : base::ListDir(path)) {
    const std::string prefix = train ? "data_batch_" : "test_batch";
    const bool cifar10 = name.rfind(prefix, 0) == 0 && name.size() >= prefix.size() + 4 &&
                         name.compare(name.size() - 4, 4, ".bin") == 0 &&
                         (train ? name.size() > 15 : name.size() == 14 || name[10] == '_');
    const bool wanted =
        variant == CifarVariant::kCifar10 ? cifar10 : name == (train ? "train.bin" : "test.bin");
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
