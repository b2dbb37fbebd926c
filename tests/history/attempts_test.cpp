#include "history/attempts.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace ringpilot::history {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::WriteFile;

void Put(const std::string& path, const json& j) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  WriteFile(path, j.dump(2));
}

json Progress(int attempt, int64_t resumed_from, int64_t last, const char* outcome,
              double started = 1000) {
  AttemptProgress p;
  p.attempt = attempt;
  p.resumed_from_step = resumed_from;
  p.last_step = last;
  p.outcome = outcome;
  p.timed_steps = last - resumed_from;
  p.timed_seconds = 2.0;
  p.started_unix = started;
  return AttemptProgressJson(p);
}

// failure.json of a trainer attempt: rank 1 crashed before its step `crash` (1-based).
json Failure(int attempts, int64_t crash) {
  return {{"attempts", attempts},
          {"first_failing_rank", 1},
          {"fatal_message", "fault injection: crashing at step " + std::to_string(crash)},
          {"ranks",
           {{"0", {{"step", crash - 1}, {"phase", "step"}}},
            {"1", {{"step", crash - 1}, {"phase", "step"}}}}}};
}

TEST(AttemptProgressJson, FirstAndLastStep) {
  const json j = Progress(2, 20, 35, kRunning);
  EXPECT_EQ(j["attempt"], 2);
  EXPECT_EQ(j["first_step"], 21);
  EXPECT_EQ(j["last_step"], 35);
  EXPECT_EQ(j["steps_trained"], 15);
  EXPECT_EQ(j["outcome"], "running");
  EXPECT_DOUBLE_EQ(j["steps_per_second"].get<double>(), 7.5);
  const json none = Progress(1, 0, 0, kRunning);
  EXPECT_EQ(none["steps_trained"], 0);
  EXPECT_TRUE(none["steps_per_second"].is_null());
}

// The user's case: a crash at step 21 after a checkpoint at step 20 (attempt 1's record
// says 20, its heartbeats say 20 done), then attempt 2 from 20 to 40.
TEST(ReadAttempts, CrashThenResume) {
  TempDir dir;
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 0, 20, kRunning));
  Put(AttemptFailurePath(dir.path(), 1), Failure(1, 21));
  Put(AttemptSummaryPath(dir.path(), 2), Progress(2, 20, 40, kCompleted));
  const std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].attempt, 1);
  EXPECT_EQ(a[0].outcome, kFailed);
  EXPECT_EQ(*a[0].first_step, 1);
  EXPECT_EQ(a[0].last_step, 20);
  EXPECT_EQ(a[0].failure, "rank 1: fault injection: crashing at step 21");
  EXPECT_EQ(a[1].outcome, kCompleted);
  EXPECT_EQ(a[1].StepsTrained(), 20);
  const StepCoverage c = CoverageOf(a);
  EXPECT_EQ(c.steps_trained, 40);
  EXPECT_EQ(c.redone, 0);
  EXPECT_EQ(*c.first_step, 1);
  EXPECT_EQ(*c.last_step, 40);
}

// Steps done after the last checkpoint are known from the heartbeats, and re-done.
TEST(ReadAttempts, StepsAfterTheCheckpointAreRedone) {
  TempDir dir;
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 0, 10, kRunning));
  Put(AttemptFailurePath(dir.path(), 1), Failure(1, 15));
  Put(AttemptSummaryPath(dir.path(), 2), Progress(2, 10, 20, kCompleted));
  const std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].last_step, 14);
  const StepCoverage c = CoverageOf(a);
  EXPECT_EQ(c.steps_trained, 24);
  EXPECT_EQ(c.distinct, 20);
  EXPECT_EQ(c.redone, 4);
}

// An attempt that died before writing its record: only the launcher's report.
TEST(ReadAttempts, FailureWithoutSummary) {
  TempDir dir;
  Put(AttemptFailurePath(dir.path(), 1), {{"attempts", 1}, {"first_failing_rank", -1}});
  const std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].outcome, kFailed);
  EXPECT_FALSE(a[0].first_step.has_value());
  EXPECT_EQ(a[0].StepsTrained(), 0);
  EXPECT_EQ(AttemptRowJson(a[0])["first_step"], nullptr);
}

// The job's final failure is the root failure.json: it marks the last attempt failed,
// unless it is older than that attempt (an earlier run of the directory).
TEST(ReadAttempts, FinalFailure) {
  TempDir dir;
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 0, 5, kRunning, /*started=*/1000));
  Put(dir.path() + "/failure.json", Failure(1, 7));
  std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].outcome, kFailed);
  EXPECT_EQ(a[0].last_step, 6);
  // Started after the failure.json was written: it is live.
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 0, 5, kRunning, /*started=*/4e9));
  a = ReadAttempts(dir.path());
  EXPECT_EQ(a[0].outcome, kRunning);
  EXPECT_EQ(a[0].last_step, 5);
}

TEST(ReadAttempts, IgnoresJunk) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/attempts/x");
  std::filesystem::create_directories(dir.path() + "/attempts/3");
  WriteFile(AttemptSummaryPath(dir.path(), 3), "{not json");
  EXPECT_TRUE(ReadAttempts(dir.path()).empty());
  EXPECT_TRUE(ReadAttempts(dir.path() + "/missing").empty());
}

TEST(CombinedSummary, KeepsTheLastAttemptsKeysAndAddsTheRun) {
  TempDir dir;
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 0, 20, kRunning));
  Put(AttemptFailurePath(dir.path(), 1), Failure(1, 21));
  json last = Progress(2, 20, 40, kCompleted);
  last["steps"] = 40;
  last["final_loss"] = 0.5;
  last["resumed_from_step"] = 20;
  last["samples_per_second"] = 100.0;
  Put(AttemptSummaryPath(dir.path(), 2), last);
  const json c = CombinedSummary(last, ReadAttempts(dir.path()));
  EXPECT_EQ(c["steps"], 40);
  EXPECT_EQ(c["final_loss"], 0.5);
  EXPECT_EQ(c["resumed_from_step"], 20);
  EXPECT_EQ(c["samples_per_second"], 100.0);
  EXPECT_EQ(c["steps_trained"], 40);
  EXPECT_EQ(c["steps_redone"], 0);
  EXPECT_EQ(c["first_step"], 1);
  EXPECT_EQ(c["last_step"], 40);
  EXPECT_EQ(c["failed_attempts"], json::array({1}));
  ASSERT_EQ(c["attempts"].size(), 2u);
  EXPECT_EQ(c["attempts"][0]["outcome"], "failed");
  EXPECT_EQ(c["attempts"][0]["last_step"], 20);
  EXPECT_EQ(c["attempts"][1]["outcome"], "completed");
  EXPECT_EQ(c["attempts"][1]["first_step"], 21);
  EXPECT_FALSE(c.contains("outcome"));  // an attempt's, not the run's
  EXPECT_FALSE(c.contains("steps_per_second"));
}

}  // namespace
}  // namespace ringpilot::history
