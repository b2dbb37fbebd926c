#include "history/attempts.h"

#include <sys/stat.h>

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

// The root failure.json of a run that failed for good, written at `when` (mtime).
void PutFinalFailure(const std::string& path, const json& j, double when) {
  Put(path, j);
  const timespec times[2] = {{static_cast<time_t>(when), 0}, {static_cast<time_t>(when), 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

// RUN_DIR/attempts.prev[.N]/N/summary.json of an earlier run.
std::string PrevSummary(const std::string& run_dir, const std::string& prev, int attempt) {
  return run_dir + "/attempts" + prev + "/" + std::to_string(attempt) + "/summary.json";
}

TEST(PrevPaths, OldestFirstByNumberThenPrev) {
  TempDir dir;
  const std::string f = dir.path() + "/failure.json";
  EXPECT_TRUE(PrevPaths(f).empty());
  EXPECT_EQ(NextOlderPath(f), f + ".prev.1");
  for (const char* name : {".prev", ".prev.10", ".prev.2", ".prev.x", ".prev.", ".prevx"}) {
    WriteFile(f + name, "{}");
  }
  EXPECT_EQ(PrevPaths(f), (std::vector<std::string>{f + ".prev.2", f + ".prev.10", f + ".prev"}));
  EXPECT_EQ(NextOlderPath(f), f + ".prev.11");  // past the highest, not the first gap
  EXPECT_EQ(PrevPath(f), f + ".prev");
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
  EXPECT_EQ(c["runs"], 1);
  EXPECT_EQ(c["attempts"][1]["run"], 1);
}

// The common flow: preempted (SIGUSR1: checkpoint at step 12, exit), then the same
// directory run again to step 20 (a Slurm requeue). Both runs number their attempts from 1.
TEST(ReadAttempts, PreemptedRunThenCompletedRerun) {
  TempDir dir;
  Put(PrevSummary(dir.path(), ".prev", 1), Progress(1, 0, 12, kPreempted, 1000));
  json last = Progress(1, 12, 20, kCompleted, 2000);
  last["steps"] = 20;
  last["restarts"] = 0;
  Put(AttemptSummaryPath(dir.path(), 1), last);
  const std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].run, 1);
  EXPECT_EQ(a[0].attempt, 1);
  EXPECT_EQ(a[0].dir, "attempts.prev/1");
  EXPECT_EQ(a[0].outcome, kPreempted);
  EXPECT_EQ(a[1].run, 2);
  EXPECT_EQ(a[1].attempt, 1);
  EXPECT_EQ(a[1].dir, "attempts/1");
  EXPECT_EQ(RunsOf(a), 2);
  const json c = CombinedSummary(last, a);
  EXPECT_EQ(c["runs"], 2);
  EXPECT_EQ(c["first_step"], 1);
  EXPECT_EQ(c["last_step"], 20);
  EXPECT_EQ(c["steps_trained"], 20);
  EXPECT_EQ(c["steps_redone"], 0);
  EXPECT_EQ(c["failed_attempts"], json::array());
  EXPECT_EQ(c["restarts"], 0);  // this run's
  ASSERT_EQ(c["attempts"].size(), 2u);
  EXPECT_EQ(c["attempts"][0]["run"], 1);
  EXPECT_EQ(c["attempts"][0]["outcome"], "preempted");
  EXPECT_EQ(c["attempts"][1]["run"], 2);
  EXPECT_EQ(c["attempts"][1]["first_step"], 13);
}

// Three runs: attempts.prev.1 (the oldest), attempts.prev, attempts. A run killed with its
// launcher left its attempt "running": it is over, since later ones came.
TEST(ReadAttempts, RunsInTheOrderOfTheirDirectories) {
  TempDir dir;
  Put(PrevSummary(dir.path(), ".prev.1", 1), Progress(1, 0, 5, kRunning, 1000));
  Put(PrevSummary(dir.path(), ".prev", 1), Progress(1, 5, 10, kPreempted, 2000));
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 10, 15, kRunning, 3000));
  const std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].run, 1);
  EXPECT_EQ(a[0].outcome, kInterrupted);
  EXPECT_EQ(a[1].run, 2);
  EXPECT_EQ(*a[1].first_step, 6);
  EXPECT_EQ(a[2].run, 3);
  EXPECT_EQ(a[2].outcome, kRunning);  // live, or killed: nothing says which
  const StepCoverage c = CoverageOf(a);
  EXPECT_EQ(*c.first_step, 1);
  EXPECT_EQ(*c.last_step, 15);
  EXPECT_EQ(c.steps_trained, 15);
}

// The first run failed for good at step 13 (max_restarts 0): its failure.json stays at the
// root when the directory is run again, and still marks that run's last attempt.
TEST(ReadAttempts, FailedFirstRunThenRerun) {
  TempDir dir;
  Put(PrevSummary(dir.path(), ".prev", 1), Progress(1, 0, 10, kRunning, 1000));
  PutFinalFailure(dir.path() + "/failure.json", Failure(1, 13), 1500);
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 10, 14, kRunning, 2000));
  std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].outcome, kFailed);
  EXPECT_EQ(a[0].last_step, 12);  // the heartbeats: in step 13
  EXPECT_EQ(a[0].failure, "rank 1: fault injection: crashing at step 13");
  EXPECT_EQ(a[1].outcome, kRunning);  // the rerun is not the one that failed
  EXPECT_EQ(a[1].last_step, 14);
  // The rerun finishes: its summary covers both runs; failed_attempts is the rerun's.
  json last = Progress(1, 10, 20, kCompleted, 2000);
  Put(AttemptSummaryPath(dir.path(), 1), last);
  a = ReadAttempts(dir.path());
  const json c = CombinedSummary(last, a);
  EXPECT_EQ(c["runs"], 2);
  EXPECT_EQ(c["first_step"], 1);
  EXPECT_EQ(c["last_step"], 20);
  EXPECT_EQ(c["steps_trained"], 22);
  EXPECT_EQ(c["steps_redone"], 2);
  EXPECT_EQ(c["failed_attempts"], json::array());
  EXPECT_EQ(c["attempts"][0]["outcome"], "failed");
  EXPECT_EQ(c["attempts"][0]["run"], 1);
}

// Both runs failed for good: the second's failure set the first's aside as
// failure.json.prev (mtime kept); each marks its own run's last attempt.
TEST(ReadAttempts, TwoFailedRuns) {
  TempDir dir;
  Put(PrevSummary(dir.path(), ".prev", 1), Progress(1, 0, 10, kRunning, 1000));
  PutFinalFailure(dir.path() + "/failure.json.prev", Failure(1, 13), 1500);
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 10, 15, kRunning, 2000));
  Put(AttemptFailurePath(dir.path(), 1), Failure(1, 17));
  Put(AttemptSummaryPath(dir.path(), 2), Progress(2, 15, 15, kRunning, 2500));
  PutFinalFailure(dir.path() + "/failure.json", Failure(2, 16), 2600);
  const std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].outcome, kFailed);
  EXPECT_EQ(a[0].last_step, 12);
  EXPECT_EQ(a[1].outcome, kFailed);
  EXPECT_EQ(a[1].last_step, 16);
  EXPECT_EQ(a[2].outcome, kFailed);
  EXPECT_EQ(a[2].last_step, 15);
  json last = Progress(2, 15, 15, kRunning, 2500);
  EXPECT_EQ(CombinedSummary(last, a)["failed_attempts"], json::array({1, 2}));
}

// A final failure written after a later attempt began is not the earlier run's, and one
// naming another attempt number is not this attempt's.
TEST(ReadAttempts, FinalFailureBelongsToTheAttemptBeforeIt) {
  TempDir dir;
  Put(PrevSummary(dir.path(), ".prev", 1), Progress(1, 0, 10, kRunning, 1000));
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 10, 12, kRunning, 2000));
  PutFinalFailure(dir.path() + "/failure.json", Failure(1, 13), 2500);
  std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].outcome, kInterrupted);
  EXPECT_EQ(a[1].outcome, kFailed);
  PutFinalFailure(dir.path() + "/failure.json", Failure(3, 13), 1500);
  a = ReadAttempts(dir.path());
  EXPECT_EQ(a[0].outcome, kInterrupted);
  EXPECT_EQ(a[1].outcome, kRunning);
}

// Directories of older versions: a first run that kept no attempts/ is not counted; an
// earlier run's attempts directory without a readable record still is a run.
TEST(ReadAttempts, OlderDirectoriesWithoutRecords) {
  TempDir dir;
  WriteFile(dir.path() + "/summary.json.prev", R"({"steps": 10})");
  Put(AttemptSummaryPath(dir.path(), 1), Progress(1, 10, 20, kCompleted, 2000));
  std::vector<AttemptRecord> a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].run, 1);
  EXPECT_EQ(RunsOf(a), 1);
  std::filesystem::create_directories(dir.path() + "/attempts.prev/1");
  WriteFile(dir.path() + "/attempts.prev/1/summary.json", "{not json");
  a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].run, 2);
  EXPECT_EQ(CombinedSummary(json::object(), a)["runs"], 2);
  // Only earlier runs' records, none of this run yet (it has just begun).
  std::filesystem::remove_all(dir.path() + "/attempts");
  Put(PrevSummary(dir.path(), ".prev.1", 1), Progress(1, 0, 10, kCompleted, 1000));
  a = ReadAttempts(dir.path());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].run, 1);
  EXPECT_EQ(a[0].dir, "attempts.prev.1/1");
  EXPECT_TRUE(ReadAttempts(dir.path() + "/summary.json.prev").empty());  // not a directory
}

}  // namespace
}  // namespace ringpilot::history
