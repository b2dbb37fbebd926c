#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>

#include "base/files.h"

namespace ringpilot::base {
namespace {

TEST(Files, MakeListRemoveRename) {
  const std::string root = ::testing::TempDir() + "/file_util_test";
  RemoveTree(root);
  MakeDirs(root + "/a/b/c");
  EXPECT_TRUE(IsDirectory(root + "/a/b/c"));
  MakeDirs(root + "/a/b/c");  // idempotent
  std::ofstream(root + "/a/b/f.txt") << "hello";
  EXPECT_EQ(FileSize(root + "/a/b/f.txt"), 5);
  EXPECT_EQ(FileSize(root + "/nope"), -1);
  EXPECT_EQ(ListDir(root + "/a/b"), (std::vector<std::string>{"c", "f.txt"}));
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

TEST(Files, MakeDirsOverAFileFails) {
  const std::string root = ::testing::TempDir() + "/file_util_file";
  RemoveTree(root);
  std::ofstream(root) << "x";
  EXPECT_THROW(MakeDirs(root + "/sub"), std::runtime_error);
  RemoveTree(root);
}

TEST(Files, AtomicWriteReplacesWholeFileAndFailsCleanly) {
  const std::string root = ::testing::TempDir() + "/files_atomic";
  RemoveTree(root);
  MakeDirs(root);
  WriteFileAtomically(root + "/f", "first");
  WriteFileAtomically(root + "/f", "second, longer");
  EXPECT_EQ(ReadFile(root + "/f"), "second, longer");
  EXPECT_EQ(ListDir(root), (std::vector<std::string>{"f"}));  // no temp file left
  try {
    WriteFileAtomically(root + "/missing/dir/f", "x");
    ADD_FAILURE() << "no exception";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(root + "/missing/dir/f"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ReadFile(root + "/nope"), FileError);
  EXPECT_EQ(DirName(root + "/f"), root);
  EXPECT_EQ(DirName("f"), ".");
  EXPECT_EQ(DirName("/a/b/c"), "/a/b");
  EXPECT_EQ(DirName("/f"), "/");
  RemoveTree(root);
}

}  // namespace
}  // namespace ringpilot::base
