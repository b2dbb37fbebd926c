// data/cifar.h on real images: Fashion-MNIST written in the CIFAR-10 layout at test time
// (fixture data_cifar_fashion, tests/data/make_cifar_fashion.py), and every bad-file case.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/files.h"
#include "data/cifar.h"
#include "tests/test_util.h"

namespace ringpilot::data {
namespace {

std::string FashionDir() {
  const char* build = std::getenv("RINGPILOT_BUILD_DIR");
  return std::string(build ? build : "build") + "/tests/data/fashion-cifar";
}

TEST(Cifar, ReadsRealImagesFromAFolder) {
  const std::vector<std::string> train = CifarFiles(FashionDir(), CifarVariant::kCifar10, true);
  ASSERT_EQ(train.size(), 1u);
  EXPECT_EQ(base::DirName(train[0]), FashionDir());
  const CifarSet set = ReadCifar(train, CifarVariant::kCifar10);
  ASSERT_EQ(set.size(), 2000);
  EXPECT_EQ(set.num_classes, 10);
  std::set<int> classes(set.labels.begin(), set.labels.end());
  EXPECT_EQ(classes.size(), 10u);  // all ten garments among the first 2000
  // Real photos: the padding is black, the garments are not, and R = G = B (grey).
  const uint8_t* img = set.image(0);
  EXPECT_EQ(img[0], 0);
  int lit = 0;
  for (int i = 0; i < 1024; ++i) {
    lit += img[i] > 0;
    ASSERT_EQ(img[i], img[1024 + i]);
    ASSERT_EQ(img[i], img[2048 + i]);
  }
  EXPECT_GT(lit, 100);
  const CifarSet val =
      ReadCifar(CifarFiles(FashionDir(), CifarVariant::kCifar10, false), CifarVariant::kCifar10);
  EXPECT_EQ(val.size(), 500);
}

class CifarBadFiles : public ::testing::Test {
 protected:
  // A directory of its own: ctest runs this fixture's tests as parallel processes.
  void SetUp() override {
    dir_ = tmp_.path();
    good_ = base::ReadFile(FashionDir() + "/test_batch_fashion.bin");
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // One line naming `path`.
  void ExpectError(const std::vector<std::string>& files, CifarVariant v, const std::string& path,
                   const std::string& what) {
    try {
      ReadCifar(files, v);
      ADD_FAILURE() << "no error for " << path;
    } catch (const DataError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  testing::TempDir tmp_;
  std::string dir_, good_;
};

TEST_F(CifarBadFiles, TruncatedEmptyMissingAndBadLabels) {
  const std::string truncated = Write("truncated.bin", good_.substr(0, good_.size() - 100));
  ExpectError({truncated}, CifarVariant::kCifar10, truncated, "not a whole number");
  const std::string empty = Write("empty.bin", "");
  ExpectError({empty}, CifarVariant::kCifar10, empty, "empty");
  ExpectError({dir_ + "/none.bin"}, CifarVariant::kCifar10, dir_ + "/none.bin", "cannot read");
  std::string relabelled = good_;
  relabelled[3073 * 7] = 42;  // the 8th record's label
  const std::string bad_label = Write("label.bin", relabelled);
  ExpectError({bad_label}, CifarVariant::kCifar10, bad_label, "record 7 has label 42");
  // CIFAR-10 records read as CIFAR-100 (3074-byte records) do not divide the file.
  const std::string good = Write("good.bin", good_);
  ExpectError({good}, CifarVariant::kCifar100, good, "3074-byte CIFAR-100 records");
}

TEST_F(CifarBadFiles, Cifar100RecordsCarryTheFineLabelSecond) {
  // The same real images in CIFAR-100's layout: coarse label, fine label, pixels.
  std::string records;
  const int64_t n = static_cast<int64_t>(good_.size()) / 3073;
  for (int64_t i = 0; i < n; ++i) {
    const char fine = static_cast<char>(good_[i * 3073] * 10 + 7);  // 7..97
    records += static_cast<char>(fine / 5);
    records += fine;
    records += good_.substr(i * 3073 + 1, 3072);
  }
  // Not train.bin: that name is the distribution's, of 50,000 records.
  const std::string part = Write("train-part.bin", records);
  const CifarSet set = ReadCifar({part}, CifarVariant::kCifar100);
  ASSERT_EQ(set.size(), n);
  EXPECT_EQ(set.num_classes, 100);
  EXPECT_EQ(CountCifarRecords({part}, CifarVariant::kCifar100), n);
  const CifarSet ten =
      ReadCifar({FashionDir() + "/test_batch_fashion.bin"}, CifarVariant::kCifar10);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(set.labels[i], ten.labels[i] * 10 + 7);
    ASSERT_EQ(0, std::memcmp(set.image(i), ten.image(i), kCifarImageBytes));
  }
}

TEST_F(CifarBadFiles, FoldersWithoutBatchesAndMissingPaths) {
  EXPECT_THROW(CifarFiles(dir_, CifarVariant::kCifar10, true), DataError);
  EXPECT_THROW(CifarFiles(dir_ + "/missing", CifarVariant::kCifar10, true), DataError);
  Write("train.bin", good_);
  EXPECT_EQ(CifarFiles(dir_, CifarVariant::kCifar100, true),
            (std::vector<std::string>{dir_ + "/train.bin"}));
}

TEST_F(CifarBadFiles, DistributionNamesHoldTheDistributionsCount) {
  // data_batch_1.bin cut on a record boundary (500 of its 10,000 records) trained silently.
  const std::string cut = Write("data_batch_1.bin", good_);
  const std::string line =
      cut +
      ": 500 records, but CIFAR-10's data_batch_1.bin holds 10000 (cut short? a file of "
      "other records must not have a distribution name)";
  try {
    CountCifarRecords(CifarFiles(dir_, CifarVariant::kCifar10, true), CifarVariant::kCifar10);
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), line);
  }
  ExpectError({cut}, CifarVariant::kCifar10, cut, "500 records, but CIFAR-10's");
  const std::string test = Write("test_batch.bin", good_);
  ExpectError({test}, CifarVariant::kCifar10, test, "test_batch.bin holds 10000");
  const std::string train100 = Write("train.bin", good_.substr(0, 3074 * 3));
  ExpectError({train100}, CifarVariant::kCifar100, train100,
              "3 records, but CIFAR-100's train.bin holds 50000");
  const std::string test100 = Write("test.bin", good_.substr(0, 3074 * 3));
  ExpectError({test100}, CifarVariant::kCifar100, test100, "test.bin holds 10000");
  // A whole distribution file passes: 10,000 records of data_batch_2.bin.
  std::string whole;
  while (whole.size() < good_.size() * 20) whole += good_;
  const std::string full = Write("data_batch_2.bin", whole.substr(0, 3073 * 10000));
  EXPECT_EQ(CountCifarRecords({full}, CifarVariant::kCifar10), 10000);
  // Other names are not the distribution's: any whole number of records.
  const std::string subset = Write("data_batch_fashion.bin", good_);
  EXPECT_EQ(CountCifarRecords({subset}, CifarVariant::kCifar10), 500);
}

TEST_F(CifarBadFiles, FoldersListSubsetsBesideTheDistributionsNames) {
  Write("data_batch_fashion.bin", good_);
  Write("test_batch_fashion.bin", good_);
  Write("test_batchx.bin", good_);
  EXPECT_EQ(CifarFiles(dir_, CifarVariant::kCifar10, true),
            (std::vector<std::string>{dir_ + "/data_batch_fashion.bin"}));
  EXPECT_EQ(CifarFiles(dir_, CifarVariant::kCifar10, false),
            (std::vector<std::string>{dir_ + "/test_batch_fashion.bin"}));
}

}  // namespace
}  // namespace ringpilot::data
