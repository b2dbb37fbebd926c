// `ringpilot status`, `logs` and `stop` against a run whose "ranks" are a fake mpirun that
// writes rank 0's log and heartbeat and, on SIGUSR1, a checkpoint and exit 75 (what the
// real ranks do); and `ringpilot --version` with a fake trainer and mpirun.
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/subprocess.h"
#include "tests/test_util.h"

namespace ringpilot::cli {
namespace {

using testing::Exists;
using testing::ProcessResult;
using testing::ReadFile;
using testing::RingpilotBinary;
using testing::RunProcess;
using testing::SplitLines;
using testing::TempDir;
using testing::WriteFile;

constexpr const char* kJob = R"(name: ctl
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 2, preflight: false}
model: {name: resnet18-cifar}
train: {steps: 100}
)";

// Rank 0 of attempt N: a log line, a heartbeat at step 6 (loss 2.5), then it waits; SIGUSR1
// "checkpoints" step 7 and exits 75.
constexpr const char* kRanks = R"SH(#!/bin/bash
logs="$RINGPILOT_RUN_DIR/logs"
stamp() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
on_usr1() {
  mkdir -p "$RINGPILOT_RUN_DIR/checkpoints/step-00000007"
  echo "$(stamp) INFO preempted: checkpoint of step 7 written" >> "$logs/rank-0.log"
  exit 75
}
trap on_usr1 USR1
echo $$ > "$RINGPILOT_RUN_DIR/ranks.pid"
echo "$(stamp) INFO step 7/100 | loss 2.5000 (attempt $RINGPILOT_ATTEMPT)" >> "$logs/rank-0.log"
printf '{"rank": 0, "step": 6, "steps": 100, "phase": "step", "unix": %s, "loss": 2.5}\n' \
  "$(date +%s.%N)" > "$logs/rank-0.heartbeat"
echo ready
while :; do sleep 0.05; done
)SH";

// A process started in the background (base/subprocess.h), its output in files: a shell
// that redirects, then execs the program with the test's extra environment.
struct Background {
  std::optional<base::Subprocess> child;
  std::string out;
  std::string err;
  bool reaped = false;  // Wait saw it end
  Background(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& dir, const std::string& name)
      : out(dir + "/" + name + ".out"), err(dir + "/" + name + ".err") {
    base::SpawnOptions o;
    o.argv = {"/bin/sh", "-c", "out=$1 err=$2; shift 2; exec \"$@\" >\"$out\" 2>\"$err\"",
              "sh",      out,  err};
    o.argv.insert(o.argv.end(), argv.begin(), argv.end());
    o.env = base::CurrentEnvironment();
    for (const auto& [k, v] : env) (*o.env)[k] = v;
    child = base::Subprocess::Spawn(o);
  }
  pid_t pid() const { return child->pid(); }
  // The exit status, or -1 when it did not end within `seconds` (it is killed when the
  // Background goes).
  int Wait(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (const std::optional<base::ProcessStatus> s = child->TryWait()) {
        reaped = true;
        return s->term_signal == 0 ? s->exit_code : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
};

struct FakeRun {
  TempDir tmp;
  std::string job = tmp.path() + "/job.yaml";
  std::string ranks = tmp.path() + "/fake-mpirun";
  std::string trainer = tmp.path() + "/fake-trainer";
  std::string run_dir = tmp.path() + "/run";
  std::map<std::string, std::string> env;
  FakeRun() {
    WriteFile(job, kJob);
    WriteFile(ranks, kRanks, true);
    WriteFile(trainer, "#!/bin/sh\nexit 0\n", true);
    env = {{"RINGPILOT_MPIRUN", ranks}, {"RINGPILOT_TRAINER", trainer}};
  }
  ProcessResult Ringpilot(std::vector<std::string> args) {
    args.insert(args.begin(), RingpilotBinary());
    return RunProcess(args, env, tmp.path());
  }
  // Until rank 0's heartbeat is there (the attempt runs), at most 20 s.
  bool WaitForRanks() {
    for (int i = 0; i < 400; ++i) {
      if (Exists(run_dir + "/logs/rank-0.heartbeat") && Exists(run_dir + "/launcher.json")) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

TEST(RunDirCommands, StatusLogsAndStopOfARunningJob) {
  FakeRun r;
  Background job({RingpilotBinary(), "run", r.job, "--run-dir", r.run_dir}, r.env, r.tmp.path(),
                 "run");
  ASSERT_TRUE(r.WaitForRanks()) << ReadFile(job.err);

  ProcessResult s = r.Ringpilot({"status", r.run_dir});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("state       running (launcher pid " + std::to_string(job.pid())),
            std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("attempt     1 of at most 3\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("step        6/100 | loss 2.5000"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("job         ctl: resnet18-cifar, 2 rank(s)"), std::string::npos);
  EXPECT_NE(s.out.find("logs        " + r.run_dir + "/logs"), std::string::npos);
  s = r.Ringpilot({"status", r.run_dir, "--json"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const nlohmann::json j = nlohmann::json::parse(s.out);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["step"], 6);
  EXPECT_EQ(j["loss"], 2.5);
  EXPECT_EQ(j["launcher"]["pid"], job.pid());
  EXPECT_EQ(j["launcher"]["attempt"], 1);

  ProcessResult logs = r.Ringpilot({"logs", r.run_dir});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("INFO step 7/100 | loss 2.5000 (attempt 1)\n"), std::string::npos);
  logs = r.Ringpilot({"logs", r.run_dir, "--launcher", "-n", "1"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(SplitLines(logs.out).size(), 1u) << logs.out;
  EXPECT_EQ(r.Ringpilot({"logs", r.run_dir, "--rank", "2"}).exit_code, 2);  // ranks 0..1

  // Follow rank 0's log while the job is stopped: it ends by itself once the launcher does.
  Background follow({RingpilotBinary(), "logs", r.run_dir, "-f"}, r.env, r.tmp.path(), "follow");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const ProcessResult stop = r.Ringpilot({"stop", r.run_dir});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_NE(stop.out.find("sent SIGUSR1 to the launcher (pid " + std::to_string(job.pid())),
            std::string::npos)
      << stop.out;
  // The launcher's one line, which `stop` repeats.
  const std::string line = "stopped at step 7 by ringpilot stop; checkpoint " + r.run_dir +
                           "/checkpoints/step-00000007; resume with: ringpilot run " + r.run_dir +
                           "/job.yaml --run-dir " + r.run_dir;
  EXPECT_NE(stop.out.find("ringpilot stop: " + line + "\n"), std::string::npos) << stop.out;
  EXPECT_EQ(job.Wait(10), base::kExitStopped);
  EXPECT_EQ(follow.Wait(10), 0) << ReadFile(follow.err);
  const std::string followed = ReadFile(follow.out);
  EXPECT_NE(followed.find("step 7/100"), std::string::npos) << followed;
  EXPECT_NE(followed.find("preempted: checkpoint of step 7 written"), std::string::npos)
      << followed;

  s = r.Ringpilot({"status", r.run_dir});
  EXPECT_NE(s.out.find("state       stopped (" + line + ")"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("step        7/100"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("resume      ringpilot run " + r.run_dir + "/job.yaml"), std::string::npos);
  // Nothing to stop any more: said, exit 0.
  const ProcessResult again = r.Ringpilot({"stop", r.run_dir});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("is not running: stopped"), std::string::npos) << again.out;
}

TEST(RunDirCommands, ForceStopsWithoutACheckpoint) {
  FakeRun r;
  Background job({RingpilotBinary(), "run", r.job, "--run-dir", r.run_dir}, r.env, r.tmp.path(),
                 "run");
  ASSERT_TRUE(r.WaitForRanks()) << ReadFile(job.err);
  const ProcessResult stop = r.Ringpilot({"stop", r.run_dir, "--force"});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_EQ(job.Wait(10), 143);
  EXPECT_FALSE(Exists(r.run_dir + "/checkpoints/step-00000007"));
  const ProcessResult s = r.Ringpilot({"status", r.run_dir, "--json"});
  const nlohmann::json j = nlohmann::json::parse(s.out);
  EXPECT_EQ(j["state"], "stopped");
  EXPECT_NE(j["detail"].get<std::string>().find("interrupted by SIGTERM"), std::string::npos);
}

TEST(RunDirCommands, LauncherGoneAndNotARunDirectory) {
  FakeRun r;
  Background job({RingpilotBinary(), "run", r.job, "--run-dir", r.run_dir}, r.env, r.tmp.path(),
                 "run");
  ASSERT_TRUE(r.WaitForRanks()) << ReadFile(job.err);
  // A launcher killed outright cannot record its end: status says so, stop refuses.
  job.child->SignalChild(SIGKILL);
  job.Wait(10);
  EXPECT_TRUE(job.reaped);
  // Its "ranks" live on, orphaned, as real ones would until mpirun's daemons noticed.
  const pid_t ranks = std::stoi(ReadFile(r.run_dir + "/ranks.pid"));
  ::kill(ranks, SIGKILL);
  const ProcessResult s = r.Ringpilot({"status", r.run_dir});
  EXPECT_NE(s.out.find("state       failed (the launcher (pid"), std::string::npos) << s.out;
  const ProcessResult stop = r.Ringpilot({"stop", r.run_dir});
  EXPECT_EQ(stop.exit_code, 1);
  EXPECT_NE(stop.out.find("is not running: failed"), std::string::npos) << stop.out;

  const std::string empty = r.tmp.path() + "/empty";
  std::filesystem::create_directories(empty);
  const ProcessResult bad = r.Ringpilot({"status", empty});
  EXPECT_EQ(bad.exit_code, 2);
  ASSERT_EQ(SplitLines(bad.err).size(), 1u) << bad.err;
  EXPECT_NE(bad.err.find("not a run directory"), std::string::npos);
  EXPECT_EQ(r.Ringpilot({"logs", empty}).exit_code, 2);
  EXPECT_EQ(r.Ringpilot({"stop", empty}).exit_code, 2);
}

TEST(RunDirCommands, Version) {
  TempDir tmp;
  WriteFile(
      tmp.path() + "/trainer",
      "#!/bin/sh\necho 'a LibTorch warning' >&2\n"
      "echo '{\"torch\": \"2.11.0\", \"cuda_compiled\": \"13.0\", \"cuda_runtime\": \"13.0\", "
      "\"nccl_compiled\": \"2.28.9\", \"nccl_loaded\": \"2.28.3\", \"mpi\": \"Open MPI v4.1.4, "
      "package: Debian\"}'\n",
      true);
  WriteFile(tmp.path() + "/mpirun", "#!/bin/sh\necho 'mpirun (Open MPI) 4.1.4'\n", true);
  ProcessResult r =
      RunProcess({RingpilotBinary(), "--version"}, {{"RINGPILOT_TRAINER", tmp.path() + "/trainer"},
                                                    {"RINGPILOT_MPIRUN", tmp.path() + "/mpirun"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = SplitLines(r.out);
  ASSERT_GE(lines.size(), 7u) << r.out;
  EXPECT_EQ(lines[0].rfind("ringpilot 0.1.0 (git ", 0), 0u) << lines[0];
  EXPECT_NE(r.out.find("  libtorch        2.11.0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  cuda runtime    13.0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  nccl            2.28.3 (compiled against 2.28.9)\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  mpi             Open MPI v4.1.4, package: Debian\n"), std::string::npos);
  EXPECT_NE(r.out.find("  mpirun          mpirun (Open MPI) 4.1.4\n"), std::string::npos);
  EXPECT_NE(r.out.find("  prometheus-cpp  "), std::string::npos);
  EXPECT_NE(r.out.find("  yaml-cpp        "), std::string::npos);

  // Without a trainer the line says why; the rest is still printed.
  r = RunProcess({RingpilotBinary(), "--version"}, {{"RINGPILOT_TRAINER", tmp.path() + "/none"},
                                                    {"RINGPILOT_MPIRUN", tmp.path() + "/mpirun"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("libtorch        unknown: " + tmp.path() + "/none not found"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  mpirun          mpirun (Open MPI) 4.1.4\n"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::cli
