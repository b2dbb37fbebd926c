#include <string>

#include <gtest/gtest.h>

#include "base/files.h"
#include "launcher/run_dir.h"
#include "tests/test_util.h"

namespace ringpilot::launcher {
namespace {

using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

TEST(RunDir, DefaultNameUsesLocalTimestamp) {
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 2;
  t.tm_mday = 7;
  t.tm_hour = 9;
  t.tm_min = 5;
  t.tm_sec = 3;
  t.tm_isdst = -1;
  const std::time_t when = std::mktime(&t);
  EXPECT_EQ(DefaultRunDirName("quickstart", when), "runs/quickstart-20250307-090503");
  EXPECT_EQ(DefaultRunDirName("a.b", when, "/x"), "/x/a.b-20250307-090503");
}

TEST(RunDir, UniqueRunDirSkipsExistingOnes) {
  TempDir tmp;
  const std::string base = tmp.path() + "/job-1";
  EXPECT_EQ(UniqueRunDir(base), base);
  ::mkdir(base.c_str(), 0755);
  EXPECT_EQ(UniqueRunDir(base), base + "-2");
  ::mkdir((base + "-2").c_str(), 0755);
  EXPECT_EQ(UniqueRunDir(base), base + "-3");
}

TEST(RunDir, ClaimNewRunDirCreatesAFreshDirectory) {
  TempDir tmp;
  const std::string base = tmp.path() + "/runs/job-1";
  EXPECT_EQ(ClaimNewRunDir(base), base);
  EXPECT_TRUE(Exists(base));
  EXPECT_EQ(ClaimNewRunDir(base), base + "-2");
  EXPECT_EQ(ClaimNewRunDir(base), base + "-3");
  WriteFile(tmp.path() + "/blocker", "x");
  EXPECT_THROW(ClaimNewRunDir(tmp.path() + "/blocker/job"), base::FileError);
}

TEST(RunDir, LayoutPaths) {
  const RunDirLayout l("/r");
  EXPECT_EQ(l.logs, "/r/logs");
  EXPECT_EQ(l.checkpoints, "/r/checkpoints");
  EXPECT_EQ(l.trace, "/r/trace");
  EXPECT_EQ(l.job_yaml, "/r/job.yaml");
  EXPECT_EQ(l.launcher_log, "/r/logs/launcher.log");
  EXPECT_EQ(l.failure_json, "/r/failure.json");
  EXPECT_EQ(l.hostfile, "/r/hostfile");
  EXPECT_EQ(l.RankLog(3), "/r/logs/rank-3.log");
}

TEST(RunDir, PrepareCreatesTreeAndWritesConfig) {
  TempDir tmp;
  const RunDirLayout l(tmp.path() + "/runs/deep/job");
  const PreparedRunDir p = PrepareRunDir(l, "name: a\n");
  EXPECT_FALSE(p.resumed);
  EXPECT_FALSE(p.config_changed);
  for (const std::string& d : {l.logs, l.checkpoints, l.trace}) EXPECT_TRUE(Exists(d)) << d;
  EXPECT_EQ(ReadFile(l.job_yaml), "name: a\n");
  EXPECT_FALSE(Exists(l.job_yaml + ".prev"));
}

TEST(RunDir, ResumeKeepsPreviousConfigAndNeverLosesFiles) {
  TempDir tmp;
  const RunDirLayout l(tmp.path() + "/job");
  PrepareRunDir(l, "v1\n");
  WriteFile(l.RankLog(0), "rank zero log\n");
  WriteFile(l.launcher_log, "old launcher lines\n");

  PreparedRunDir p = PrepareRunDir(l, "v1\n");  // same config: untouched
  EXPECT_TRUE(p.resumed);
  EXPECT_FALSE(p.config_changed);
  EXPECT_FALSE(Exists(l.job_yaml + ".prev"));

  p = PrepareRunDir(l, "v2\n");
  EXPECT_TRUE(p.config_changed);
  EXPECT_EQ(ReadFile(l.job_yaml), "v2\n");
  EXPECT_EQ(ReadFile(l.job_yaml + ".prev"), "v1\n");

  PrepareRunDir(l, "v3\n");
  EXPECT_EQ(ReadFile(l.job_yaml), "v3\n");
  EXPECT_EQ(ReadFile(l.job_yaml + ".prev"), "v2\n");
  EXPECT_EQ(ReadFile(l.job_yaml + ".prev.1"), "v1\n");

  EXPECT_EQ(ReadFile(l.RankLog(0)), "rank zero log\n");
  EXPECT_EQ(ReadFile(l.launcher_log), "old launcher lines\n");
}

// A second `ringpilot run` of a directory numbers its attempts from 1 again: the first
// run's attempts/ is kept whole.
TEST(RunDir, KeepPreviousAttemptsMovesTheWholeHistory) {
  TempDir tmp;
  const RunDirLayout l(tmp.path() + "/job");
  PrepareRunDir(l, "v1\n");
  EXPECT_FALSE(KeepPreviousAttempts(l));
  base::MakeDirs(l.root + "/attempts/1");
  WriteFile(l.root + "/attempts/1/summary.json", "first\n");
  EXPECT_TRUE(KeepPreviousAttempts(l));
  EXPECT_FALSE(Exists(l.root + "/attempts"));
  EXPECT_EQ(ReadFile(l.root + "/attempts.prev/1/summary.json"), "first\n");
  base::MakeDirs(l.root + "/attempts/1");
  WriteFile(l.root + "/attempts/1/summary.json", "second\n");
  EXPECT_TRUE(KeepPreviousAttempts(l));
  EXPECT_EQ(ReadFile(l.root + "/attempts.prev/1/summary.json"), "second\n");
  EXPECT_EQ(ReadFile(l.root + "/attempts.prev.1/1/summary.json"), "first\n");
  base::MakeDirs(l.root + "/attempts/1");
  WriteFile(l.root + "/attempts/1/summary.json", "third\n");
  EXPECT_TRUE(KeepPreviousAttempts(l));
  EXPECT_EQ(ReadFile(l.root + "/attempts.prev.2/1/summary.json"), "second\n");
  EXPECT_EQ(ReadFile(l.root + "/attempts.prev/1/summary.json"), "third\n");
  // The oldest deleted: the next older one still goes after the highest number, so the
  // numbers keep the runs' order (history::ReadAttempts reads them by number).
  base::RemoveTree(l.root + "/attempts.prev.1");
  base::MakeDirs(l.root + "/attempts/1");
  WriteFile(l.root + "/attempts/1/summary.json", "fourth\n");
  EXPECT_TRUE(KeepPreviousAttempts(l));
  EXPECT_FALSE(Exists(l.root + "/attempts.prev.1"));
  EXPECT_EQ(ReadFile(l.root + "/attempts.prev.3/1/summary.json"), "third\n");
  EXPECT_EQ(ReadFile(l.root + "/attempts.prev/1/summary.json"), "fourth\n");
}

TEST(RunDir, WriteFileAtomicallyReplacesWithoutLeftovers) {
  TempDir tmp;
  const std::string path = tmp.path() + "/f.json";
  base::WriteFileAtomically(path, "one");
  base::WriteFileAtomically(path, "two");
  EXPECT_EQ(ReadFile(path), "two");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 1);  // no temp file left behind
}

TEST(RunDir, ErrorsNameThePath) {
  TempDir tmp;
  WriteFile(tmp.path() + "/file", "x");
  try {
    PrepareRunDir(RunDirLayout(tmp.path() + "/file"), "y");
    ADD_FAILURE() << "no error";
  } catch (const base::FileError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.path() + "/file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(base::WriteFileAtomically(tmp.path() + "/missing/dir/f", "x"), base::FileError);
  EXPECT_EQ(ReadFile(tmp.path() + "/file"), "x");
}

TEST(RunDir, LatestCheckpointOfTheTrainerAndOfPrograms) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/checkpoints";
  EXPECT_EQ(LatestCheckpoint(dir).step, -1);  // no directory
  base::MakeDirs(dir + "/step-00000040");
  base::MakeDirs(dir + "/.tmp-step-00000090-123");
  base::MakeDirs(dir + "/corrupt-step-00000080-1");
  EXPECT_EQ(LatestCheckpoint(dir).step, 40);
  EXPECT_EQ(LatestCheckpoint(dir).path, dir + "/step-00000040");
  testing::WriteFile(dir + "/step-00000600.pt", "x");
  testing::WriteFile(dir + "/step-00000700.pt.tmp", "x");  // being written
  testing::WriteFile(dir + "/step-x.pt", "x");
  EXPECT_EQ(LatestCheckpoint(dir).step, 600);
  EXPECT_EQ(LatestCheckpoint(dir).path, dir + "/step-00000600.pt");
  testing::WriteFile(dir + "/step-1200", "x");
  EXPECT_EQ(LatestCheckpoint(dir).step, 1200);
  EXPECT_EQ(ResumeCommand("/r/x"), "ringpilot run /r/x/job.yaml --run-dir /r/x");
}

}  // namespace
}  // namespace ringpilot::launcher
