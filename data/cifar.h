// CIFAR-10 and CIFAR-100 in their binary batch format
// (https://www.cs.toronto.edu/~kriz/cifar.html): fixed-size records of the label byte(s)
// and 3072 pixel bytes (1024 red, 1024 green, 1024 blue; 32x32, row-major), which is the
// layout a model's uint8 NCHW input wants.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringpilot::data {

/// A dataset file or folder that cannot be used. One line naming the file and what is
/// wrong with it.
class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& line) : std::runtime_error(line) {}
};

enum class CifarVariant {
  kCifar10,   ///< records of 1 label byte (0..9) + 3072 pixel bytes
  kCifar100,  ///< records of 1 coarse label byte + 1 fine label byte (0..99) + 3072 pixel bytes
};

inline constexpr int kCifarSide = 32;
inline constexpr int kCifarImageBytes = 3 * kCifarSide * kCifarSide;

/// Images and labels in memory (CIFAR-10's training set is 150 MB).
struct CifarSet {
  std::vector<uint8_t> pixels;  ///< size() x 3 x 32 x 32
  std::vector<int32_t> labels;  ///< CIFAR-100: the fine label
  int num_classes = 0;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  const uint8_t* image(int64_t i) const { return pixels.data() + i * kCifarImageBytes; }
};

/// The batch files a job's `data.train` / `data.val` names: a file, or a folder holding
/// the distribution's files (CIFAR-10: data_batch_1.bin ... data_batch_5.bin for training,
/// test_batch.bin for validation; CIFAR-100: train.bin, test.bin). Throws DataError when
/// the path does not exist or a folder holds none of them.
std::vector<std::string> CifarFiles(const std::string& path, CifarVariant variant, bool train);

/// Records in `files`, from their sizes alone (what a job needs to know before it reads
/// them, e.g. train.epochs). Throws DataError as ReadCifar does for a missing, empty or
/// truncated file.
int64_t CountCifarRecords(const std::vector<std::string>& files, CifarVariant variant);

/// Reads `files` in order into one set. Throws DataError naming the file for one that is
/// missing, unreadable, empty, not a whole number of records (truncated), or holds a label
/// out of range.
CifarSet ReadCifar(const std::vector<std::string>& files, CifarVariant variant);

}  // namespace ringpilot::data
