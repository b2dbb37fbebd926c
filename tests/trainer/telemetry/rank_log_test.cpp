// RankLog when its file cannot be opened or written: one line naming the path and errno,
// then every line on stderr; the rank goes on.
#include "trainer/telemetry/rank_log.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace ringpilot::trainer::telemetry {
namespace {

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(RankLog, WritesTimedLinesToItsFile) {
  char dir[] = "/tmp/rank_log_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/rank-1.log";
  {
    RankLog log(path, 1, /*echo_stdout=*/false);
    testing::internal::CaptureStderr();
    log.Info("step 1/2");
    log.Fatal("bad\nthing");
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err, "ringpilot-trainer: rank 1: bad; thing\n");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(" INFO step 1/2\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find(" FATAL bad; thing\n"), std::string::npos) << text.str();
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST(RankLog, AFullDiskIsSaidOnceAndTheLinesGoToStderr) {
  // /dev/full: opening works, every write fails with ENOSPC.
  RankLog log("/dev/full", 3, /*echo_stdout=*/false);
  testing::internal::CaptureStderr();
  log.Info("step 10/20");
  log.Info("step 20/20");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(CountOf(err, "cannot write /dev/full: No space left on device"), 1) << err;
  EXPECT_EQ(CountOf(err, " INFO ringpilot: rank 3: step 20/20\n"), 1) << err;
  EXPECT_NE(err.find("rank 3: cannot write"), std::string::npos) << err;
}

TEST(RankLog, AnUnopenableFileIsSaidWithErrno) {
  testing::internal::CaptureStderr();
  RankLog log("/nonexistent-dir/rank-0.log", 0, /*echo_stdout=*/false);
  log.Detail("placement: cores 0-3");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot open /nonexistent-dir/rank-0.log: No such file or directory"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(" INFO ringpilot: placement: cores 0-3\n"), std::string::npos) << err;
}

}  // namespace
}  // namespace ringpilot::trainer::telemetry
