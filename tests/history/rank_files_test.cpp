// How readers find a run directory's per-rank files (history/rank_files.h): logs/rank-N.*
// and NCCL's debug logs, logs/nccl-rank-N.log, whose name the trainer gives NCCL.
#include "history/rank_files.h"

#include <string>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace ringpilot::history {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(RankFiles, RankFilesByRankAndSuffix) {
  TempDir dir;
  WriteFile(dir.path() + "/rank-0.log", "");
  WriteFile(dir.path() + "/rank-12.log", "");
  WriteFile(dir.path() + "/rank-1.heartbeat", "");
  WriteFile(dir.path() + "/rank-.log", "");
  WriteFile(dir.path() + "/rank-1x.log", "");
  WriteFile(dir.path() + "/rank-1234567890.log", "");  // 10 digits: not a rank
  WriteFile(dir.path() + "/nccl-rank-3.log", "");
  const std::map<int, std::string> logs = RankFiles(dir.path(), ".log");
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs.at(0), dir.path() + "/rank-0.log");
  EXPECT_EQ(logs.at(12), dir.path() + "/rank-12.log");
  EXPECT_TRUE(RankFiles(dir.path() + "/missing", ".log").empty());
}

TEST(RankFiles, NcclDebugLogs) {
  TempDir dir;
  EXPECT_EQ(NcclDebugLogPath(dir.path(), 3), dir.path() + "/nccl-rank-3.log");
  WriteFile(NcclDebugLogPath(dir.path(), 3), "");
  WriteFile(NcclDebugLogPath(dir.path(), 0), "");
  WriteFile(dir.path() + "/rank-1.log", "");
  WriteFile(dir.path() + "/nccl-rank-2.txt", "");
  const std::map<int, std::string> files = NcclDebugLogFiles(dir.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.at(0), NcclDebugLogPath(dir.path(), 0));
  EXPECT_EQ(files.at(3), NcclDebugLogPath(dir.path(), 3));
}

}  // namespace
}  // namespace ringpilot::history
