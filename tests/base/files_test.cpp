#include "base/files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

namespace ringpilot::trainer {
namespace {

TEST(FileUtil, MakeListRemoveRename) {
  const std::string root = testing::TempDir() + "/file_util_test";
  RemoveTree(root);
  MakeDirs(root + "/a/b/c");
  EXPECT_TRUE(IsDirectory(root + "/a/b/c"));
  MakeDirs(root + "/a/b/c");  // idempotent
  std::ofstream(root + "/a/b/f.txt") << "hello";
  EXPECT_EQ(FileSize(root + "/a/b/f.txt"), 5);
  EXPECT_EQ(FileSize(root + "/nope"), -1);
  auto names = ListDir(root + "/a/b");
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"c", "f.txt"}));
  EXPECT_TRUE(ListDir(root + "/missing").empty());
  Rename(root + "/a/b/f.txt", root + "/a/g.txt");
  EXPECT_TRUE(Exists(root + "/a/g.txt"));
  FsyncPath(root + "/a/g.txt");
  FsyncPath(root + "/a");
  EXPECT_THROW(Rename(root + "/none", root + "/x"), std::runtime_error);
  RemoveTree(root);
  EXPECT_FALSE(Exists(root));
  RemoveTree(root);  // missing is fine
}

TEST(FileUtil, MakeDirsOverAFileFails) {
  const std::string root = testing::TempDir() + "/file_util_file";
  RemoveTree(root);
  std::ofstream(root) << "x";
  EXPECT_THROW(MakeDirs(root + "/sub"), std::runtime_error);
  RemoveTree(root);
}

}  // namespace
}  // namespace ringpilot::trainer
