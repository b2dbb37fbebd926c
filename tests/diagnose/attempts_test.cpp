// `ringpilot diagnose` over a job's attempts (RUN_DIR/attempts/N/): run directories made
// here as a live, an interrupted, a failed and a completed run would leave them.
#include <sys/stat.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "diagnose/command.h"
#include "diagnose/diagnose.h"
#include "history/attempts.h"
#include "history/launcher_record.h"
#include "history/run_summary.h"
#include "tests/test_util.h"

namespace ringpilot::diagnose {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::WriteFile;

void Put(const std::string& path, const json& j) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  WriteFile(path, j.dump(1));
}

// RUN_DIR/launcher.json as the launcher writes it, in `state` at `attempt`.
void PutLauncher(const std::string& run_dir, history::RunState state, int attempt) {
  history::LauncherRecord r;
  r.pid = 1;
  r.state = state;
  r.attempt = attempt;
  r.max_attempts = 3;
  history::WriteLauncherRecord(history::LauncherRecordPath(run_dir), r);
}

json Progress(int attempt, int64_t resumed_from, int64_t last, const char* outcome) {
  history::AttemptProgress p;
  p.attempt = attempt;
  p.resumed_from_step = resumed_from;
  p.last_step = last;
  p.outcome = outcome;
  p.timed_steps = last - resumed_from;
  p.timed_seconds = 1.0;
  p.started_unix = 1000 + attempt;
  return history::AttemptProgressJson(p);
}

// RUN_DIR/summary.json as the trainer writes it when `last_attempt` (its progress)
// finished: the fields readers use, then the view over every attempt. Returns the file.
json PutRunSummary(const std::string& run_dir, int world_size, int64_t steps,
                   const json& last_attempt) {
  history::RunSummary read_fields;
  read_fields.world_size = world_size;
  read_fields.steps = steps;
  json last = history::RunSummaryJson(read_fields);
  last.update(last_attempt);
  history::WriteRunSummary(run_dir, last);
  return json::parse(testing::ReadFile(history::RunSummaryPath(run_dir)));
}

json Stats(int rank, int steps, double mean) {
  return {{"rank", rank},
          {"world_size", 2},
          {"steps", steps},
          {"step_seconds", {{"p50", mean}, {"p99", mean}, {"mean", mean}}}};
}

// Attempt 1 trained steps 1-14 (checkpoint at 10), rank 1 crashed at 15; attempt 2
// resumed from 10. `last` is attempt 2's outcome and last step.
void MakeRun(const std::string& dir, const char* last_outcome, int64_t last_step) {
  Put(history::AttemptSummaryPath(dir, 1), Progress(1, 0, 10, history::kRunning));
  Put(history::AttemptFailurePath(dir, 1),
      {{"attempts", 1},
       {"first_failing_rank", 1},
       {"fatal_message", "fault injection: crashing at step 15"},
       {"ranks",
        {{"0", {{"step", 14}, {"phase", "step"}}}, {"1", {{"step", 14}, {"phase", "step"}}}}}});
  for (int r = 0; r < 2; ++r) {
    Put(history::AttemptRankStatsPath(dir, 1, r), Stats(r, 9, 0.1));
    Put(history::AttemptRankStatsPath(dir, 2, r), Stats(r, static_cast<int>(last_step) - 11, 0.2));
  }
  Put(history::AttemptSummaryPath(dir, 2), Progress(2, 10, last_step, last_outcome));
}

json DiagnoseJson(const std::string& dir, std::string* text = nullptr) {
  DiagnoseArgs args;
  args.run_dir = dir;
  args.infiniband_dir = "/nonexistent";
  std::ostringstream out, err;
  EXPECT_EQ(RunDiagnose(args, out, err), 0) << err.str();
  if (text) *text = out.str();
  args.json = true;
  std::ostringstream jout, jerr;
  EXPECT_EQ(RunDiagnose(args, jout, jerr), 0) << jerr.str();
  return json::parse(jout.str());
}

TEST(DiagnoseAttempts, CompletedRunCoversEveryAttempt) {
  TempDir dir;
  MakeRun(dir.path(), history::kCompleted, 20);
  const json last = json::parse(testing::ReadFile(history::AttemptSummaryPath(dir.path(), 2)));
  PutRunSummary(dir.path(), 2, 20, last);
  Put(dir.path() + "/logs/rank-0.stats.json", Stats(0, 9, 0.2));
  Put(dir.path() + "/logs/rank-1.stats.json", Stats(1, 9, 0.2));
  std::string text;
  const json j = DiagnoseJson(dir.path(), &text);
  const json& a = j["attempts"];
  EXPECT_EQ(a["count"], 2);
  EXPECT_EQ(a["state"], "finished");
  EXPECT_EQ(a["failed"], json::array({1}));
  EXPECT_EQ(a["steps_trained"], 24);  // 1-14, then 11-20
  EXPECT_EQ(a["steps_redone"], 4);
  EXPECT_EQ(a["last_step"], 20);
  ASSERT_EQ(a["ranks"].size(), 2u);
  EXPECT_EQ(a["ranks"][1]["steps"], 18.0);  // 9 timed steps in each attempt
  EXPECT_EQ(a["ranks"][1]["steps_by_attempt"]["1"], 9.0);
  EXPECT_EQ(a["ranks_from_attempt"], 0);
  EXPECT_NE(
      text.find("attempts: 2 (finished; failed: 1); steps trained 24 (steps 1-20, 4 re-done)"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("attempt 1: failed, steps 1-14, 10.00 steps/s -- rank 1: fault injection"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 1: 18 steps"), std::string::npos) << text;
}

// No summary.json, no launcher.json: attempt 2 is running (or was killed without a word).
TEST(DiagnoseAttempts, LiveOrInterruptedRun) {
  TempDir dir;
  MakeRun(dir.path(), history::kRunning, 16);
  std::string text;
  const json j = DiagnoseJson(dir.path(), &text);
  EXPECT_EQ(j["attempts"]["state"], "live or interrupted");
  EXPECT_EQ(j["attempts"]["last_step"], 16);
  EXPECT_EQ(j["attempts"]["ranks_from_attempt"], 2);  // the per-rank tables: attempt 2's
  EXPECT_NE(text.find("summary.json (the run has not finished: see attempts)"), std::string::npos)
      << text;
  // launcher.json tells a live run from a dead one.
  PutLauncher(dir.path(), history::RunState::kRunning, 2);
  EXPECT_EQ(DiagnoseJson(dir.path())["attempts"]["state"], "running");
  EXPECT_EQ(DiagnoseJson(dir.path())["attempts"]["list"][1]["outcome"], "running");
  // Stopped (SIGINT): the attempt that was running ended with the job.
  PutLauncher(dir.path(), history::RunState::kStopped, 2);
  const json stopped = DiagnoseJson(dir.path(), &text);
  EXPECT_EQ(stopped["attempts"]["state"], "stopped");
  EXPECT_EQ(stopped["attempts"]["list"][1]["outcome"], "interrupted");
  EXPECT_NE(text.find("attempt 2: interrupted, steps 11-16"), std::string::npos) << text;
}

// The job failed for good in attempt 2: the root failure.json names it.
TEST(DiagnoseAttempts, FailedRun) {
  TempDir dir;
  MakeRun(dir.path(), history::kRunning, 12);
  Put(dir.path() + "/failure.json",
      {{"attempts", 2}, {"first_failing_rank", 0}, {"fatal_message", "out of memory"}});
  std::string text;
  const json j = DiagnoseJson(dir.path(), &text);
  EXPECT_EQ(j["attempts"]["state"], "failed");
  EXPECT_EQ(j["attempts"]["failed"], json::array({1, 2}));
  EXPECT_NE(text.find("attempt 2: failed, steps 11-12"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0: out of memory"), std::string::npos) << text;
}

// An attempt that died before its first record: the launcher's report alone.
TEST(DiagnoseAttempts, AttemptsWithoutStatistics) {
  TempDir dir;
  Put(history::AttemptFailurePath(dir.path(), 1), {{"attempts", 1}, {"first_failing_rank", -1}});
  std::string text;
  const json j = DiagnoseJson(dir.path(), &text);
  EXPECT_EQ(j["attempts"]["count"], 1);
  EXPECT_EQ(j["attempts"]["state"], "failed");
  EXPECT_NE(text.find("attempt 1: failed, steps unknown"), std::string::npos) << text;
}

// The directory run twice: the first run failed for good at step 13 (max_restarts 0; its
// failure.json stays at the root), the second resumed from step 10 and finished. Both
// runs number their attempts from 1; the report tells them apart.
TEST(DiagnoseAttempts, EveryRunOfTheDirectory) {
  TempDir dir;
  const std::string prev = dir.path() + "/attempts.prev/1";
  json first = Progress(1, 0, 10, history::kRunning);
  first["started_unix"] = 1000;
  Put(prev + "/summary.json", first);
  Put(prev + "/rank-0.stats.json", Stats(0, 9, 0.1));
  const std::string failure = dir.path() + "/failure.json";
  Put(failure, {{"attempts", 1},
                {"first_failing_rank", 1},
                {"fatal_message", "fault injection: crashing at step 13"},
                {"ranks", {{"0", {{"step", 12}, {"phase", "step"}}}}}});
  const timespec written[2] = {{1500, 0}, {1500, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, failure.c_str(), written, 0), 0);
  json last = Progress(1, 10, 20, history::kCompleted);
  last["started_unix"] = 2000;
  Put(history::AttemptSummaryPath(dir.path(), 1), last);
  Put(history::AttemptRankStatsPath(dir.path(), 1, 0), Stats(0, 9, 0.2));
  const json summary = PutRunSummary(dir.path(), 1, 20, last);
  EXPECT_EQ(summary["runs"], 2);
  EXPECT_EQ(summary["first_step"], 1);
  std::string text;
  const json j = DiagnoseJson(dir.path(), &text);
  const json& a = j["attempts"];
  EXPECT_EQ(a["count"], 2);
  EXPECT_EQ(a["runs"], 2);
  EXPECT_EQ(a["failed"], json::array());  // the last run's, as summary.json's failed_attempts
  EXPECT_EQ(a["failed_total"], 1);
  EXPECT_EQ(a["steps_trained"], 22);  // 1-12, then 11-20
  EXPECT_EQ(a["steps_redone"], 2);
  EXPECT_EQ(a["first_step"], 1);
  EXPECT_EQ(a["list"][0]["run"], 1);
  EXPECT_EQ(a["list"][0]["outcome"], "failed");
  EXPECT_EQ(a["list"][1]["run"], 2);
  EXPECT_EQ(a["ranks"][0]["steps_by_attempt"]["1.1"], 9.0);
  EXPECT_EQ(a["ranks"][0]["steps_by_attempt"]["2.1"], 9.0);
  EXPECT_NE(text.find("attempts: 2 in 2 runs (finished; failed: run 1 attempt 1); steps trained "
                      "22 (steps 1-20, 2 re-done)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  run 1 attempt 1: failed, steps 1-12"), std::string::npos) << text;
  EXPECT_NE(text.find("  run 2 attempt 1: completed, steps 11-20"), std::string::npos) << text;
  EXPECT_NE(text.find("by run.attempt 1.1: 9, 2.1: 9"), std::string::npos) << text;
  EXPECT_NE(text.find("1 of 2 attempts failed over 2 runs"), std::string::npos) << text;
}

// A run that has not finished reads its per-rank tables from its last attempt's records,
// which name their own directory; a first run that left no record of its start is a run.
TEST(DiagnoseAttempts, UnfinishedRerun) {
  TempDir dir;
  Put(dir.path() + "/attempts.prev/1/failure.json", {{"attempts", 1}, {"first_failing_rank", -1}});
  Put(history::AttemptSummaryPath(dir.path(), 1), Progress(1, 0, 4, history::kRunning));
  Put(history::AttemptRankStatsPath(dir.path(), 1, 0), Stats(0, 3, 0.2));
  std::string text;
  const json j = DiagnoseJson(dir.path(), &text);
  EXPECT_EQ(j["attempts"]["ranks_from_run"], 2);
  EXPECT_EQ(j["attempts"]["ranks_from_attempt"], 1);
  EXPECT_NE(text.find("run 1 attempt 1: failed, steps unknown (no attempts.prev/1/summary.json)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("per-rank statistics are run 2 attempt 1's as of its last checkpoint "
                      "(attempts/1/rank-<N>.stats.json)"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ringpilot::diagnose
