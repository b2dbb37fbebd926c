// The launcher of launcher.json alive or not, and how a run directory stands (what
// `ringpilot status` prints). The record's format: tests/history/launcher_record_test.cpp.
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "base/environment.h"
#include "base/files.h"
#include "base/time.h"
#include "history/launcher_record.h"
#include "history/run_lock.h"
#include "launcher/run_dir.h"
#include "launcher/run_state.h"
#include "launcher/run_status.h"
#include "tests/test_util.h"

namespace ringpilot::launcher {
namespace {

using testing::TempDir;
using testing::WriteFile;

constexpr const char* kJob =
    "name: st\nworld: {nodes: 1, procs_per_node: 2, device: cpu}\n"
    "model: {name: resnet18-cifar}\ntrain: {steps: 40}\n";

struct RunDir {
  TempDir tmp;
  RunDirLayout layout{tmp.path() + "/run"};
  RunDir() { PrepareRunDir(layout, kJob); }
  void Record(RunState state, int pid, const std::string& host, const std::string& started) {
    LauncherRecord r;
    r.pid = pid;
    r.host = host;
    r.executable = base::SelfExecutablePath();
    r.started = started;
    r.updated = started;
    r.attempt = 2;
    r.max_attempts = 3;
    r.state = state;
    r.detail = state == RunState::kRunning ? "" : "how it ended";
    if (state != RunState::kRunning) r.exit_status = 75;
    history::WriteLauncherRecord(layout.launcher_json, r);
  }
  void Beat(int rank, double unix, int64_t step, const std::string& phase, const char* loss) {
    WriteFile(layout.logs + "/rank-" + std::to_string(rank) + ".heartbeat",
              "{\"rank\": " + std::to_string(rank) + ", \"step\": " + std::to_string(step) +
                  ", \"steps\": 40, \"phase\": \"" + phase +
                  "\", \"unix\": " + std::to_string(unix) + ", \"loss\": " + loss + "}\n");
  }
};

TEST(LauncherRecord, Liveness) {
  LauncherRecord r;
  r.pid = static_cast<int>(::getpid());
  r.host = base::HostName();
  r.executable = base::SelfExecutablePath();
  EXPECT_EQ(CheckLauncher(r), Liveness::kAlive);
  r.executable = "/some/other/program";  // the pid was reused by another program
  EXPECT_EQ(CheckLauncher(r), Liveness::kGone);
  r.host = "another-host-" + base::HostName();
  EXPECT_EQ(CheckLauncher(r), Liveness::kElsewhere);
  r.host = base::HostName();
  r.pid = 0;
  EXPECT_EQ(CheckLauncher(r), Liveness::kGone);
}

TEST(RunStatus, NotARunDirectory) {
  TempDir tmp;
  EXPECT_THROW(ReadRunStatus(tmp.path(), 0), std::runtime_error);
}

TEST(RunStatus, RunningFromTheRecordAndRankZerosHeartbeat) {
  RunDir d;
  const double now = base::UnixNow();
  d.Record(RunState::kRunning, static_cast<int>(::getpid()), base::HostName(),
           base::FormatLogTime(now - 60));
  d.Beat(0, now - 1, 12, "step", "2.5");
  d.Beat(1, now - 30, 12, "step", "null");   // stale: not heartbeating
  d.Beat(2, now - 3600, 3, "step", "null");  // before this run started: left out
  base::MakeDirs(d.layout.checkpoints + "/step-00000010");
  base::MakeDirs(d.layout.checkpoints + "/.tmp-step-00000020-1");  // unfinished: ignored
  const RunStatus s = ReadRunStatus(d.layout.root, now);
  EXPECT_EQ(s.state, "running");
  EXPECT_EQ(s.liveness, Liveness::kAlive);
  EXPECT_NE(s.detail.find("launcher pid " + std::to_string(::getpid())), std::string::npos);
  EXPECT_EQ(s.job_name, "st");
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.step, 12);
  EXPECT_EQ(s.steps_target, 40);
  ASSERT_TRUE(s.loss.has_value());
  EXPECT_EQ(*s.loss, 2.5);
  EXPECT_EQ(s.loss_source, "heartbeat");
  EXPECT_EQ(s.latest_checkpoint, 10);
  EXPECT_EQ(s.ranks_seen, 2);
  EXPECT_EQ(s.ranks_fresh, 1);
  EXPECT_TRUE(LauncherActive(s));
  const nlohmann::ordered_json j = RunStatusJson(s);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["launcher"]["attempt"], 2);
  EXPECT_EQ(j["launcher"]["liveness"], "alive");
  EXPECT_EQ(j["loss"], 2.5);
}

TEST(RunStatus, ARunningRecordWhoseLauncherIsGoneIsFailed) {
  RunDir d;
  d.Record(RunState::kRunning, 0, base::HostName(), base::LogTimeNow());
  const RunStatus s = ReadRunStatus(d.layout.root, base::UnixNow());
  EXPECT_EQ(s.state, "failed");
  EXPECT_NE(s.detail.find("is gone without recording how the job ended"), std::string::npos);
  EXPECT_FALSE(LauncherActive(s));
  // On another host the record is trusted.
  d.Record(RunState::kRunning, 1, "elsewhere-" + base::HostName(), base::LogTimeNow());
  const RunStatus e = ReadRunStatus(d.layout.root, base::UnixNow());
  EXPECT_EQ(e.state, "running");
  EXPECT_EQ(e.liveness, Liveness::kElsewhere);
  EXPECT_TRUE(LauncherActive(e));
}

TEST(RunStatus, TheLockTellsALauncherInItsStartUpChecks) {
  RunDir d;
  // An earlier run finished; a new launcher holds run.lock before its launcher.json.
  d.Record(RunState::kFinished, 1, base::HostName(), base::LogTimeNow());
  {
    const auto lock = history::RunDirLock::Acquire(d.layout.root, nullptr);
    const RunStatus s = ReadRunStatus(d.layout.root, base::UnixNow());
    EXPECT_EQ(s.state, "running");
    EXPECT_EQ(s.detail, "starting: " + history::DescribeHolder(lock->record()) + " holds run.lock");
    EXPECT_TRUE(LauncherStarting(s));
    EXPECT_TRUE(LauncherActive(s));
    const nlohmann::ordered_json j = RunStatusJson(s);
    EXPECT_EQ(j["lock"]["state"], "held");
    EXPECT_EQ(j["lock"]["pid"], static_cast<int>(::getpid()));
    // Its own launcher.json: supervising, no longer starting.
    d.Record(RunState::kRunning, static_cast<int>(::getpid()), base::HostName(),
             base::LogTimeNow());
    const RunStatus r = ReadRunStatus(d.layout.root, base::UnixNow());
    EXPECT_FALSE(LauncherStarting(r));
    EXPECT_EQ(r.state, "running");
  }
  // Released: free again; the record says how the job stands.
  const RunStatus after = ReadRunStatus(d.layout.root, base::UnixNow());
  EXPECT_EQ(after.lock.state, history::LockState::kFree);
  EXPECT_EQ(RunStatusJson(after)["lock"]["holder"], nullptr);
}

TEST(RunStatus, StoppedFinishedFailedAndUnknown) {
  RunDir d;
  EXPECT_EQ(ReadRunStatus(d.layout.root, 0).state, "unknown");
  WriteFile(d.layout.failure_json,
            "{\"first_failing_rank\": 1, \"fatal_message\": \"data file broken\"}\n");
  RunStatus s = ReadRunStatus(d.layout.root, 0);
  EXPECT_EQ(s.state, "failed");
  EXPECT_EQ(s.first_failing_rank, 1);
  EXPECT_EQ(s.fatal_message, "data file broken");

  d.Record(RunState::kStopped, 1, base::HostName(), base::LogTimeNow());
  base::MakeDirs(d.layout.checkpoints + "/step-00000017");
  s = ReadRunStatus(d.layout.root, 0);
  EXPECT_EQ(s.state, "stopped");
  EXPECT_EQ(s.detail, "how it ended");
  EXPECT_EQ(s.step, 17);                // the stop's checkpoint
  EXPECT_EQ(s.first_failing_rank, -1);  // an older failure.json is not this run's

  d.Record(RunState::kFinished, 1, base::HostName(), base::LogTimeNow());
  WriteFile(d.layout.summary_json,
            "{\"steps\": 40, \"final_loss\": 1.25, \"samples_per_second\": 100.5}\n");
  s = ReadRunStatus(d.layout.root, 0);
  EXPECT_EQ(s.state, "finished");
  EXPECT_EQ(s.step, 40);
  EXPECT_EQ(s.loss, 1.25);
  EXPECT_EQ(s.loss_source, "summary.json");
  EXPECT_EQ(s.samples_per_second, 100.5);
}

// Without launcher.json (a directory of an older ringpilot), summary.json alone says the
// run finished; one that is garbled, or has no steps, says nothing (history/run_summary.h).
TEST(RunStatus, OnlyAReadableSummaryMeansFinished) {
  RunDir d;
  WriteFile(d.layout.summary_json, "{\"steps\": 40, \"final_loss\": ");
  EXPECT_EQ(ReadRunStatus(d.layout.root, 0).state, "unknown");
  WriteFile(d.layout.summary_json, "{\"final_loss\": 1.5}\n");
  EXPECT_EQ(ReadRunStatus(d.layout.root, 0).state, "unknown");
  WriteFile(d.layout.summary_json, "{\"steps\": 40, \"final_loss\": null}\n");
  const RunStatus s = ReadRunStatus(d.layout.root, 0);
  EXPECT_EQ(s.state, "finished");
  EXPECT_EQ(s.detail, "summary.json written");
  EXPECT_EQ(s.step, 40);
  EXPECT_FALSE(s.loss.has_value()) << "the last attempt ran no step";
  EXPECT_FALSE(s.samples_per_second.has_value());
}

TEST(RunStatus, AProgramIsItsCommandAndItsOwnProgress) {
  TempDir tmp;
  RunDirLayout layout(tmp.path() + "/run");
  PrepareRunDir(layout,
                "name: prog\nworld: {nodes: 1, procs_per_node: 2, device: cpu}\n"
                "launch: {command: [python3, train.py, --steps, \"600\"]}\n");
  LauncherRecord r;
  r.pid = static_cast<int>(::getpid());
  r.host = base::HostName();
  r.executable = base::SelfExecutablePath();
  r.started = base::LogTimeNow();
  r.attempt = 1;
  r.max_attempts = 3;
  history::WriteLauncherRecord(layout.launcher_json, r);
  const double now = base::UnixNow();
  // Two processes running, no progress line yet.
  for (int rank = 0; rank < 2; ++rank) {
    WriteFile(layout.logs + "/rank-" + std::to_string(rank) + ".program.json",
              "{\"rank\": " + std::to_string(rank) +
                  ", \"pid\": 1, \"state\": \"running\", \"unix\": " + std::to_string(now) + "}\n");
  }
  RunStatus s = ReadRunStatus(layout.root, now);
  EXPECT_TRUE(s.program);
  EXPECT_EQ(s.command, "python3 train.py --steps 600");
  EXPECT_EQ(s.model, "");
  EXPECT_EQ(s.data, "");
  EXPECT_FALSE(s.progress_reported);
  EXPECT_EQ(s.ranks_fresh, 2);
  EXPECT_TRUE(RunStatusJson(s)["step"].is_null());
  // Rank 0 printed `step 120/600 loss 0.41`; a checkpoint file of the program's.
  WriteFile(layout.logs + "/rank-0.program.json",
            "{\"rank\": 0, \"pid\": 1, \"state\": \"running\", \"unix\": " + std::to_string(now) +
                ", \"progress\": {\"step\": 120, \"steps\": 600, \"loss\": 0.41}}\n");
  WriteFile(layout.checkpoints + "/step-00000100.pt", "x");
  s = ReadRunStatus(layout.root, now);
  EXPECT_TRUE(s.progress_reported);
  EXPECT_EQ(s.step, 120);
  EXPECT_EQ(s.steps_target, 600);
  EXPECT_EQ(s.loss, 0.41);
  EXPECT_EQ(s.loss_source, "progress line");
  EXPECT_EQ(s.latest_checkpoint, 100);
  EXPECT_EQ(s.latest_checkpoint_path, layout.checkpoints + "/step-00000100.pt");
  EXPECT_EQ(RunStatusJson(s)["command"], "python3 train.py --steps 600");
  EXPECT_TRUE(RunStatusJson(s)["model"].is_null());
}

}  // namespace
}  // namespace ringpilot::launcher
