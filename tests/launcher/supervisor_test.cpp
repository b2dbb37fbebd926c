#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/time.h"
#include "launcher/mpirun_command.h"
#include "launcher/run_dir.h"
#include "launcher/run_state.h"
#include "launcher/supervisor.h"
#include "tests/test_util.h"

namespace ringpilot::launcher {
namespace {

using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// A stand-in for mpirun: prints on both streams, and on attempt 1 writes a FATAL line
// into rank 1's log and fails with exit 3; later attempts succeed.
constexpr const char* kFlakyMpirun = R"(#!/bin/sh
echo "fake mpirun attempt $RINGPILOT_ATTEMPT master $RINGPILOT_MASTER_ADDR:$RINGPILOT_MASTER_PORT args $*"
echo "warning from attempt $RINGPILOT_ATTEMPT" >&2
logs="$RINGPILOT_RUN_DIR/logs"
echo "rank 0 attempt $RINGPILOT_ATTEMPT" >> "$logs/rank-0.log"
if [ "$RINGPILOT_ATTEMPT" = 1 ]; then
  echo "step 3 loss 2.1" >> "$logs/rank-1.log"
  echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) FATAL injected crash at step 4" >> "$logs/rank-1.log"
  printf 'last words without newline'
  exit 3
fi
echo done
exit 0
)";

// The supervisor's stdout/stderr/progress go to files of the test's run dir.
struct Harness {
  TempDir tmp;
  RunDirLayout layout{tmp.path() + "/run"};
  std::string out_path = tmp.path() + "/stdout";
  std::string err_path = tmp.path() + "/stderr";
  int out_fd = -1;
  int err_fd = -1;
  std::vector<std::string> progress;

  Harness() {
    PrepareRunDir(layout, "name: t\n");
    out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  ~Harness() {
    ::close(out_fd);
    ::close(err_fd);
  }

  SupervisorOptions Options(int max_restarts) {
    SupervisorOptions o;
    o.max_restarts = max_restarts;
    o.run_dir = layout.root;
    o.log_path = layout.launcher_log;
    o.progress = [this](const std::string& line) { progress.push_back(line); };
    o.stdout_fd = out_fd;
    o.stderr_fd = err_fd;
    o.restart_delay_s = 0;
    return o;
  }

  SupervisedCommand Script(const std::string& body) {
    const std::string path = tmp.path() + "/fake-mpirun";
    WriteFile(path, body, /*executable=*/true);
    SupervisedCommand c;
    c.argv = {path, "-np", "2", "trainer"};
    c.env = base::CurrentEnvironment();
    c.env["RINGPILOT_MASTER_ADDR"] = "127.0.0.1";
    c.env["RINGPILOT_MASTER_PORT"] = "29500";
    return c;
  }

  bool ProgressHas(const std::string& line) const {
    for (const std::string& p : progress) {
      if (p == line) return true;
    }
    return false;
  }
};

TEST(Supervisor, RestartsOnceThenSucceedsAndRelaysEverything) {
  Harness h;
  Supervisor sup(h.Options(2));
  const JobOutcome outcome = sup.Run(h.Script(kFlakyMpirun));
  EXPECT_EQ(outcome.exit_status, 0);
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_FALSE(outcome.interrupted);
  EXPECT_TRUE(h.ProgressHas(
      "ringpilot: job failed (exit 3) on attempt 1; restarting from the last checkpoint as "
      "attempt 2 (restart 1 of 2)"));
  EXPECT_TRUE(h.ProgressHas("ringpilot: job finished after 1 restart(s)"));

  const std::string out = ReadFile(h.out_path);
  EXPECT_NE(out.find("fake mpirun attempt 1 master 127.0.0.1:29500 args -np 2 trainer\n"),
            std::string::npos);
  EXPECT_NE(out.find("fake mpirun attempt 2 "), std::string::npos);
  EXPECT_NE(out.find("last words without newline\n"), std::string::npos);
  EXPECT_NE(out.find("done\n"), std::string::npos);
  const std::string err = ReadFile(h.err_path);
  EXPECT_NE(err.find("warning from attempt 1\n"), std::string::npos);
  EXPECT_NE(err.find("warning from attempt 2\n"), std::string::npos);

  const std::string log = ReadFile(h.layout.launcher_log);
  for (const char* expected :
       {"fake mpirun attempt 1 ", "warning from attempt 1", "last words without newline",
        "fake mpirun attempt 2 ", "done", "restart 1 of 2", "finished after 1 restart(s)"}) {
    EXPECT_NE(log.find(expected), std::string::npos) << expected;
  }
  // Every line of launcher.log starts with the one time format.
  for (const std::string& line : testing::SplitLines(log)) {
    EXPECT_TRUE(base::ParseLogTimeNs(line).has_value()) << line;
    EXPECT_EQ(line[base::kLogTimeLength], ' ') << line;
  }
  // launcher.json: finished, this process, the last attempt.
  const std::optional<LauncherRecord> rec = history::ReadLauncherRecord(h.layout.launcher_json);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, RunState::kFinished);
  EXPECT_EQ(rec->pid, static_cast<int>(::getpid()));
  EXPECT_EQ(rec->attempt, 2);
  EXPECT_EQ(rec->max_attempts, 3);
  EXPECT_EQ(rec->exit_status, 0);
  EXPECT_EQ(CheckLauncher(*rec), Liveness::kAlive);  // this test process
  EXPECT_FALSE(Exists(h.layout.failure_json));
  // The failed attempt keeps its own report.
  ASSERT_TRUE(Exists(h.layout.AttemptFailureJson(1)));
  EXPECT_EQ(nlohmann::json::parse(ReadFile(h.layout.AttemptFailureJson(1)))["fatal_message"],
            "injected crash at step 4");
  EXPECT_TRUE(h.ProgressHas("ringpilot: attempt 1 failed (exit 3)"));
  EXPECT_EQ(ReadFile(h.layout.RankLog(0)), "rank 0 attempt 1\nrank 0 attempt 2\n");
}

TEST(Supervisor, NoRestartsLeftWritesFailureJson) {
  Harness h;
  // A FATAL line from an earlier run in this directory must not be blamed.
  WriteFile(h.layout.RankLog(0), "FATAL 1000 ancient failure\n");
  Supervisor sup(h.Options(0));
  const JobOutcome outcome = sup.Run(h.Script(kFlakyMpirun));
  EXPECT_EQ(outcome.exit_status, 3);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_EQ(outcome.first_failing_rank, 1);
  ASSERT_TRUE(Exists(h.layout.failure_json));
  const auto j = nlohmann::json::parse(ReadFile(h.layout.failure_json));
  EXPECT_EQ(j["attempts"], 1);
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["first_failing_rank"], 1);
  EXPECT_EQ(j["first_failing_rank_source"], "fatal_line");
  EXPECT_EQ(j["fatal_message"], "injected crash at step 4");
  ASSERT_EQ(j["last_lines"]["1"].size(), 2u);
  EXPECT_EQ(j["last_lines"]["1"][0], "step 3 loss 2.1");
  EXPECT_EQ(j["last_lines"]["0"].back(), "rank 0 attempt 1");
  const std::optional<LauncherRecord> rec = history::ReadLauncherRecord(h.layout.launcher_json);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, RunState::kFailed);
  EXPECT_EQ(rec->exit_status, 3);
  EXPECT_EQ(rec->detail, "failed (exit 3) after 1 attempt(s); first failing rank 1");
  EXPECT_TRUE(h.ProgressHas("ringpilot: job failed for good after 1 attempt(s) (exit 3)"));
  EXPECT_TRUE(h.ProgressHas("ringpilot: first failing rank: 1: injected crash at step 4"));
  EXPECT_TRUE(h.ProgressHas("ringpilot: details in " + h.layout.failure_json));
  EXPECT_NE(ReadFile(h.layout.launcher_log).find("first failing rank: 1"), std::string::npos);
}

TEST(Supervisor, PermanentFailureIsNotRestarted) {
  Harness h;
  Supervisor sup(h.Options(3));
  const JobOutcome outcome = sup.Run(h.Script(R"(#!/bin/sh
echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) FATAL metrics exporter: cannot listen on 0.0.0.0:9400: Address already in use" >> "$RINGPILOT_RUN_DIR/logs/rank-0.log"
exit 78
)"));
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_EQ(outcome.exit_status, base::kExitPermanent);
  EXPECT_EQ(outcome.first_failing_rank, 0);
  EXPECT_TRUE(h.ProgressHas(
      "ringpilot: not restarting: the failure repeats on every attempt (exit 78: job file, "
      "metrics port, checkpoint or data; see the FATAL line)"));
  ASSERT_TRUE(Exists(h.layout.failure_json));
  const auto j = nlohmann::json::parse(ReadFile(h.layout.failure_json));
  EXPECT_EQ(j["exit_code"], 78);
  EXPECT_EQ(j["fatal_message"],
            "metrics exporter: cannot listen on 0.0.0.0:9400: Address already in use");
}

TEST(Supervisor, FailingRankFromMpirunOutputWhenNoFatalLine) {
  Harness h;
  Supervisor sup(h.Options(1));
  const JobOutcome outcome = sup.Run(h.Script(R"(#!/bin/sh
echo "  Process name: [[4242,1],2]" >&2
echo "  Exit code:    5" >&2
exit 5
)"));
  EXPECT_EQ(outcome.exit_status, 5);
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_EQ(outcome.first_failing_rank, 2);
  const auto j = nlohmann::json::parse(ReadFile(h.layout.failure_json));
  EXPECT_EQ(j["first_failing_rank_source"], "mpirun_output");
  EXPECT_EQ(j["attempts"], 2);
}

TEST(Supervisor, MpirunKilledBySignal) {
  Harness h;
  Supervisor sup(h.Options(0));
  const JobOutcome outcome = sup.Run(h.Script("#!/bin/sh\nkill -KILL $$\n"));
  EXPECT_EQ(outcome.exit_status, 128 + SIGKILL);
  const auto j = nlohmann::json::parse(ReadFile(h.layout.failure_json));
  EXPECT_EQ(j["signal"], SIGKILL);
  EXPECT_EQ(j["first_failing_rank"], -1);
}

TEST(Supervisor, SigtermIsForwardedAndStopsRestarts) {
  Harness h;
  Supervisor sup(h.Options(3));
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGTERM);
  });
  const auto start = std::chrono::steady_clock::now();
  const JobOutcome outcome = sup.Run(h.Script(R"(#!/bin/sh
trap 'echo "got TERM"; exit 143' TERM
echo ready
while :; do sleep 0.05; done
)"));
  sender.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_TRUE(outcome.interrupted);
  EXPECT_EQ(outcome.exit_status, 143);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_NE(ReadFile(h.out_path).find("got TERM"), std::string::npos);
  EXPECT_TRUE(h.ProgressHas("ringpilot: received SIGTERM; stopping the job (no restart)"));
  EXPECT_FALSE(Exists(h.layout.failure_json));
  const std::optional<LauncherRecord> rec = history::ReadLauncherRecord(h.layout.launcher_json);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, RunState::kStopped);
  EXPECT_EQ(rec->exit_status, 143);
  EXPECT_NE(rec->detail.find("interrupted by SIGTERM"), std::string::npos) << rec->detail;
  // Our own disposition is restored: SIGTERM is back to its default.
  struct sigaction now {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(Supervisor, Usr1IsForwardedToMpirunAndEndsPreemptedWithoutRestart) {
  Harness h;
  Supervisor sup(h.Options(3));
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGUSR1);
  });
  // Like the ranks: on USR1 "checkpoint" and exit with the preempted status.
  const JobOutcome outcome = sup.Run(h.Script(R"(#!/bin/sh
trap 'echo "checkpoint at step 7"; exit 75' USR1
echo ready
while :; do sleep 0.05; done
)"));
  sender.join();
  EXPECT_TRUE(outcome.preempted);
  EXPECT_FALSE(outcome.interrupted);
  EXPECT_EQ(outcome.exit_status, base::kExitPreempted);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_NE(ReadFile(h.out_path).find("checkpoint at step 7"), std::string::npos);
  EXPECT_TRUE(h.ProgressHas(
      "ringpilot: received SIGUSR1; forwarding it to mpirun: the ranks checkpoint at the next "
      "step boundary and stop (no restart)"));
  EXPECT_TRUE(h.ProgressHas(
      "ringpilot: job preempted: the ranks checkpointed and stopped; exit 75 (run the same run "
      "directory again to resume)"));
  EXPECT_FALSE(Exists(h.layout.failure_json));
  struct sigaction now {};
  ::sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  const std::optional<LauncherRecord> rec = history::ReadLauncherRecord(h.layout.launcher_json);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, RunState::kStopped);
  EXPECT_EQ(rec->exit_status, base::kExitPreempted);
  EXPECT_EQ(rec->detail.rfind("SIGUSR1: checkpointed and stopped", 0), 0u) << rec->detail;
}

TEST(Supervisor, RunningRecordAndAStopRequest) {
  Harness h;
  // A stale request of an earlier stop: a new run removes it.
  WriteFile(h.layout.stop_request, "old\n");
  Supervisor sup(h.Options(3));
  const std::string record = h.layout.launcher_json;
  const std::string request = h.layout.stop_request;
  std::thread stopper([record, request] {
    // What `ringpilot stop` does once the record says running: the request, then SIGUSR1.
    for (int i = 0; i < 200; ++i) {
      const std::optional<LauncherRecord> r = history::ReadLauncherRecord(record);
      if (r && r->state == RunState::kRunning && r->attempt == 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    WriteFile(request, "now\n");
    ::kill(::getpid(), SIGUSR1);
  });
  // Like the ranks: a checkpoint of step 12, exit 75, and mpirun's notice about it.
  const std::string checkpoints = h.layout.checkpoints;
  const JobOutcome outcome = sup.Run(h.Script(R"(#!/bin/sh
trap 'mkdir -p )" + checkpoints + R"(/step-00000012; echo "rank 0: checkpoint of step 12"
echo "--------------------------------------------------------------------------" >&2
echo "Primary job  terminated normally, but 1 process returned" >&2
echo "a non-zero exit code. Per user-direction, the job has been aborted." >&2
echo "--------------------------------------------------------------------------" >&2
exit 75' USR1
while :; do sleep 0.05; done
)"));
  stopper.join();
  EXPECT_TRUE(outcome.preempted);
  EXPECT_TRUE(outcome.stopped);
  EXPECT_EQ(outcome.exit_status, base::kExitStopped);
  const std::string line = "stopped at step 12 by ringpilot stop; checkpoint " + checkpoints +
                           "/step-00000012; resume with: ringpilot run " + h.layout.root +
                           "/job.yaml --run-dir " + h.layout.root;
  EXPECT_TRUE(h.ProgressHas("ringpilot: " + line));
  EXPECT_EQ(h.progress.size(), 1u)
      << "one line for a stop";  // the received-SIGUSR1 note is in the log only
  // No crash banner on the terminal; the log keeps mpirun's lines.
  EXPECT_EQ(ReadFile(h.err_path).find("non-zero exit code"), std::string::npos);
  EXPECT_NE(ReadFile(h.out_path).find("checkpoint of step 12"), std::string::npos);
  EXPECT_NE(ReadFile(h.layout.launcher_log).find("non-zero exit code"), std::string::npos);
  const std::optional<LauncherRecord> rec = history::ReadLauncherRecord(record);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, RunState::kStopped);
  EXPECT_EQ(rec->exit_status, base::kExitStopped);
  EXPECT_EQ(rec->detail, line);
}

TEST(Supervisor, MpirunNoticesAfterAFailedStopAreRelayed) {
  Harness h;
  WriteFile(h.layout.stop_request, "x\n");
  Supervisor sup(h.Options(0));
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGUSR1);
  });
  // Run() removes an old request; this one comes with the signal, as `stop` sends it.
  const std::string request = h.layout.stop_request;
  std::thread writer([request] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    WriteFile(request, "now\n");
  });
  const JobOutcome outcome = sup.Run(h.Script(R"(#!/bin/sh
trap 'echo "------------------------------------------" >&2; echo "a rank failed" >&2
echo "------------------------------------------" >&2; exit 9' USR1
while :; do sleep 0.05; done
)"));
  sender.join();
  writer.join();
  EXPECT_EQ(outcome.exit_status, base::kExitStopped);
  // Not the clean checkpointed end: mpirun's notice reaches the terminal.
  EXPECT_NE(ReadFile(h.err_path).find("a rank failed"), std::string::npos);
  ASSERT_EQ(h.progress.size(), 1u);
  EXPECT_NE(h.progress[0].find("stopped by ringpilot stop; no checkpoint in "), std::string::npos)
      << h.progress[0];
}

TEST(Supervisor, EachRunOfADirectoryIsNumbered) {
  Harness h;
  for (int run = 1; run <= 3; ++run) {
    Supervisor sup(h.Options(1));
    EXPECT_EQ(sup.Run(h.Script("#!/bin/sh\nexit 0\n")).exit_status, 0);
    const std::optional<LauncherRecord> rec = history::ReadLauncherRecord(h.layout.launcher_json);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->run, run);
    EXPECT_EQ(rec->attempts_before, run - 1);
    if (run == 1) {
      EXPECT_EQ(rec->detail, "finished after 1 attempt(s)");
    } else {
      EXPECT_EQ(rec->detail, "finished after 1 attempt(s) of run " + std::to_string(run) +
                                 " of this run directory (" + std::to_string(run) +
                                 " attempt(s) over the " + std::to_string(run) + " runs)");
    }
  }
}

TEST(Supervisor, FailureAfterUsr1IsPreemptedNotRestarted) {
  Harness h;
  Supervisor sup(h.Options(3));
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGUSR1);
  });
  // A rank that had no handler yet: mpirun ends with a failure instead of status 75.
  const JobOutcome outcome = sup.Run(h.Script(R"(#!/bin/sh
trap 'exit 9' USR1
while :; do sleep 0.05; done
)"));
  sender.join();
  EXPECT_TRUE(outcome.preempted);
  EXPECT_EQ(outcome.exit_status, base::kExitPreempted);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_TRUE(h.ProgressHas(
      "ringpilot: job stopped after SIGUSR1 (exit 9) without a preemption checkpoint; not "
      "restarting; exit 75 (a rerun resumes from the latest checkpoint, if any)"));
  EXPECT_FALSE(Exists(h.layout.failure_json));
}

TEST(Supervisor, PreemptedStatusWithoutSignalIsNotAFailure) {
  Harness h;
  Supervisor sup(h.Options(2));
  const JobOutcome outcome = sup.Run(h.Script("#!/bin/sh\nexit 75\n"));
  EXPECT_TRUE(outcome.preempted);
  EXPECT_EQ(outcome.exit_status, base::kExitPreempted);
  EXPECT_EQ(outcome.attempts, 1);
  EXPECT_FALSE(Exists(h.layout.failure_json));
}

TEST(Supervisor, MissingExecutableIs127WithoutRestart) {
  Harness h;
  Supervisor sup(h.Options(2));
  SupervisedCommand c;
  c.argv = {h.tmp.path() + "/no-such-mpirun"};
  const JobOutcome outcome = sup.Run(c);
  EXPECT_EQ(outcome.exit_status, 127);
  EXPECT_EQ(outcome.attempts, 1);
  ASSERT_FALSE(h.progress.empty());
  EXPECT_NE(h.progress.back().find("cannot execute"), std::string::npos);
}

// A rank gave up (its heartbeat says "abort", as comm::AbortJob leaves it) and mpirun does
// not end the job: a host it cannot reach holds it (tests/integration/link_cut.sh). This
// one also ignores SIGTERM. After abort_grace_s the supervisor stops it, says why, and
// restarts.
constexpr const char* kStuckAfterAbortMpirun = R"SH(#!/bin/sh
logs="$RINGPILOT_RUN_DIR/logs"
if [ "$RINGPILOT_RESTART" = 0 ]; then
  echo "FATAL $(date +%s%N) allreduce #9 not complete after 1.0 s (comm.timeout_s 1); a peer rank is stopped, hung or dead (rank 0 on a)" >> "$logs/rank-0.log"
  printf '{"rank": 0, "step": 3, "phase": "abort", "unix": %s, "collectives_started": 9, "collectives_completed": 8}' "$(date +%s.%N)" > "$logs/rank-0.heartbeat"
  trap '' TERM
  while :; do sleep 0.1; done
fi
exit 0
)SH";

TEST(Supervisor, StopsMpirunThatOutlivesAnAbortAndRestarts) {
  Harness h;
  SupervisorOptions o = h.Options(1);
  o.abort_grace_s = 1;
  Supervisor sup(o);
  const auto start = std::chrono::steady_clock::now();
  const JobOutcome outcome = sup.Run(h.Script(kStuckAfterAbortMpirun));
  // Grace 1 s (heartbeats read once a second), SIGTERM ignored, SIGKILL 5 s later.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_EQ(outcome.exit_status, 0);
  EXPECT_EQ(outcome.attempts, 2);
  const std::string why =
      "mpirun had not ended the job 1 s after rank 0 gave up (launch.abort_grace_s); a host it "
      "cannot reach (network down?) holds it";
  EXPECT_TRUE(h.ProgressHas("ringpilot: " + why + "; stopping mpirun"));
  EXPECT_TRUE(
      h.ProgressHas("ringpilot: mpirun did not stop after SIGTERM; killing its process group"));
  const auto report = nlohmann::json::parse(ReadFile(h.layout.AttemptFailureJson(1)));
  EXPECT_EQ(report["mpirun_stopped_because"], why);
  EXPECT_EQ(report["signal_name"], "SIGKILL");
  EXPECT_EQ(report["first_failing_rank"], 0);
}

// mpirun never starts a rank (a daemon that cannot call back): stopped after
// start_timeout_s; a later attempt that starts runs on however long it takes.
TEST(Supervisor, StopsAnAttemptWhoseRanksNeverStart) {
  Harness h;
  SupervisorOptions o = h.Options(1);
  o.start_timeout_s = 1;
  Supervisor sup(o);
  const JobOutcome outcome = sup.Run(h.Script(R"SH(#!/bin/sh
if [ "$RINGPILOT_RESTART" = 0 ]; then exec sleep 60; fi
printf '{"rank": 0, "step": 0, "phase": "step", "unix": %s}' "$(date +%s.%N)" > "$RINGPILOT_RUN_DIR/logs/rank-0.heartbeat"
sleep 2.5
exit 0
)SH"));
  EXPECT_EQ(outcome.exit_status, 0);
  EXPECT_EQ(outcome.attempts, 2);
  const std::string why =
      "no rank had started 1 s after launch (launch.start_timeout_s): mpirun is waiting for a "
      "host it cannot reach (network down?) or a rank stuck in start-up";
  EXPECT_TRUE(h.ProgressHas("ringpilot: " + why + "; stopping mpirun"));
  EXPECT_FALSE(
      h.ProgressHas("ringpilot: mpirun did not stop after SIGTERM; killing its process group"));
  const auto report = nlohmann::json::parse(ReadFile(h.layout.AttemptFailureJson(1)));
  EXPECT_EQ(report["mpirun_stopped_because"], why);
  EXPECT_EQ(report["signal_name"], "SIGTERM");
}

// The hang watch of a launch.command job: a first attempt that never ends is stopped as
// hung (its process group gets SIGTERM) and restarted; the attempt's report says why, and
// every attempt sees RINGPILOT_ATTEMPT and RINGPILOT_MAX_RESTARTS.
TEST(Supervisor, HangCheckStopsTheAttemptAndRestarts) {
  Harness h;
  SupervisorOptions o = h.Options(1);
  o.hang_check_period_s = 0.1;
  o.kill_grace_s = 5;
  int checks = 0;
  double seen_start = 0;
  o.hang_check = [&](double attempt_start_unix) {
    seen_start = attempt_start_unix;
    return ++checks == 2 ? std::string("rank 1 has waited 301 s in allreduce #8") : "";
  };
  Supervisor sup(o);
  const auto t0 = std::chrono::steady_clock::now();
  const JobOutcome outcome = sup.Run(h.Script(R"sh(#!/bin/sh
echo "attempt $RINGPILOT_ATTEMPT of $(($RINGPILOT_MAX_RESTARTS + 1))"
if [ "$RINGPILOT_ATTEMPT" = 1 ]; then
  trap 'echo stopped; exit 143' TERM
  while :; do sleep 0.05; done
fi
exit 0
)sh"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(outcome.exit_status, 0);
  EXPECT_EQ(outcome.attempts, 2);
  EXPECT_GT(seen_start, 1.7e9);
  EXPECT_TRUE(h.ProgressHas(
      "ringpilot: job hung: rank 1 has waited 301 s in allreduce #8; stopping this attempt"));
  const std::string out = ReadFile(h.out_path);
  EXPECT_NE(out.find("attempt 1 of 2\nstopped\nattempt 2 of 2\n"), std::string::npos) << out;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(h.layout.AttemptFailureJson(1)));
  EXPECT_EQ(report["hang"], "rank 1 has waited 301 s in allreduce #8");
  EXPECT_EQ(report["exit_code"], 143);
}

// A job of one rank that stops beating: no peer times out, so the hang watch alone
// stops it, and the report names that rank as the first failing rank and the rank behind,
// in words for a rank without peers.
TEST(Supervisor, HangOfTheOnlyRankNamesIt) {
  Harness h;
  SupervisorOptions o = h.Options(0);
  o.hang_check_period_s = 0.1;
  o.kill_grace_s = 5;
  int checks = 0;
  o.hang_check = [&](double) {
    return ++checks == 2 ? std::string("rank 0 wrote no heartbeat for 16 s (comm.timeout_s 8)")
                         : "";
  };
  Supervisor sup(o);
  const JobOutcome outcome = sup.Run(h.Script(R"sh(#!/bin/sh
logs="$RINGPILOT_RUN_DIR/logs"
mkdir -p "$logs"
printf '{"rank": 0, "step": 24, "phase": "step", "unix": %s, "collectives_started": 50, "collectives_completed": 49}' "$(date +%s)" > "$logs/rank-0.heartbeat"
trap 'exit 143' TERM
while :; do sleep 0.05; done
)sh"));
  EXPECT_NE(outcome.exit_status, 0);
  EXPECT_EQ(outcome.first_failing_rank, 0);
  const nlohmann::json report = nlohmann::json::parse(ReadFile(h.layout.failure_json));
  EXPECT_EQ(report["first_failing_rank"], 0);
  EXPECT_EQ(report["rank_behind"], 0);
  EXPECT_EQ(report["first_failing_rank_source"], "hang");
  EXPECT_TRUE(h.ProgressHas("ringpilot: first failing rank: 0 (it stopped beating: the job hung)"));
  EXPECT_TRUE(
      h.ProgressHas("ringpilot: rank behind: 0 (the only rank): last heard in step at step 25, 49 "
                    "collectives done"));
}

}  // namespace
}  // namespace ringpilot::launcher
