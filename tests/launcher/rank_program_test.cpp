// The per-rank wrapper of a launch.command program (launcher/rank_program.h): output copied
// into the rank log and relayed, the closing line (FATAL when the program failed on its
// own), signals forwarded, exit status as a shell's.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/subprocess.h"
#include "base/time.h"
#include "history/program_beat.h"
#include "launcher/failure_report.h"
#include "launcher/rank_program.h"
#include "tests/test_util.h"

namespace ringpilot::launcher {
namespace {

using testing::ReadFile;
using testing::SplitLines;
using testing::TempDir;

struct Ran {
  int status = -1;
  std::string out, err, log;
};

// Runs `script` with sh as the program of rank 3, its streams into files.
Ran RunScript(const TempDir& dir, const std::string& script) {
  RankProgramOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", script};
  o.env = base::CurrentEnvironment();
  o.env["RANK"] = "3";
  o.log_path = dir.path() + "/logs/rank-3.log";
  o.header = {"ringpilot exec: rank 3 header"};
  const int out = ::open((dir.path() + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open((dir.path() + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  o.stdout_fd = out;
  o.stderr_fd = err;
  Ran r;
  r.status = RunRankProgram(o);
  ::close(out);
  ::close(err);
  r.out = ReadFile(dir.path() + "/out");
  r.err = ReadFile(dir.path() + "/err");
  r.log = ReadFile(o.log_path);
  return r;
}

TEST(RankProgram, OutputGoesToTheLogAndOnAndSuccessIsNoFatal) {
  TempDir dir;
  const Ran r = RunScript(dir, "echo out1; echo err1 >&2; printf 'no newline'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "out1\nno newline\n");
  EXPECT_EQ(r.err, "err1\n");
  const std::vector<std::string> log = SplitLines(r.log);
  ASSERT_EQ(log.size(), 5u) << r.log;
  // Every line: TIME LEVEL text, TIME as every log line's.
  for (const std::string& line : log) EXPECT_TRUE(base::ParseLogTimeNs(line)) << line;
  const auto text = [](const std::string& line) { return line.substr(base::kLogTimeLength + 1); };
  EXPECT_EQ(text(log[0]), "INFO ringpilot exec: rank 3 header");
  EXPECT_NE(r.log.find(" OUT out1\n"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find(" ERR err1\n"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find(" OUT no newline\n"), std::string::npos) << r.log;
  EXPECT_EQ(text(log[4]), "INFO ringpilot exec: sh finished");
  EXPECT_EQ(r.log.find("FATAL"), std::string::npos);
}

TEST(RankProgram, ExitCodeIsAFatalLineWithTheLastErrorLine) {
  TempDir dir;
  const int64_t before = static_cast<int64_t>(std::time(nullptr)) * 1'000'000'000;
  const Ran r = RunScript(dir, "echo 'Traceback ...' >&2; echo 'ValueError: bad lr' >&2; exit 3");
  EXPECT_EQ(r.status, 3);
  const std::vector<std::string> log = SplitLines(r.log);
  ASSERT_FALSE(log.empty());
  const std::optional<FatalLine> fatal = ParseFatalLine(log.back());
  ASSERT_TRUE(fatal.has_value()) << log.back();
  EXPECT_GE(fatal->time_ns, before);
  EXPECT_EQ(fatal->message, "sh exited with status 3 (last error line: ValueError: bad lr)");
  // The front end's analysis finds it as the trainer's.
  const std::optional<FatalLine> first = FindFirstFatal(dir.path() + "/logs", before);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 3);
  EXPECT_EQ(SplitLines(r.err).back(),
            "ringpilot exec: rank 3: sh exited with status 3 (last error line: ValueError: bad "
            "lr)");
  // The log is appended: a second attempt keeps the first one's lines.
  const Ran again = RunScript(dir, "exit 0");
  EXPECT_EQ(again.status, 0);
  EXPECT_NE(again.log.find("ValueError: bad lr"), std::string::npos);
}

TEST(RankProgram, KilledProgramIsFatalWithTheSignalAndShellStatus) {
  TempDir dir;
  const Ran r = RunScript(dir, "echo started; kill -KILL $$");
  EXPECT_EQ(r.status, 128 + SIGKILL);
  const std::optional<FatalLine> fatal = ParseFatalLine(SplitLines(r.log).back());
  ASSERT_TRUE(fatal.has_value()) << r.log;
  EXPECT_EQ(fatal->message, "sh killed by SIGKILL");
}

TEST(RankProgram, PreemptedExitIsNotAFailure) {
  TempDir dir;
  const Ran r = RunScript(dir, "exit 75");
  EXPECT_EQ(r.status, base::kExitPreempted);
  EXPECT_EQ(SplitLines(r.log).back().substr(base::kLogTimeLength + 1),
            "INFO ringpilot exec: sh stopped with status 75 (checkpointed for preemption)");
}

TEST(RankProgram, MissingProgramIsFatalAnd127) {
  TempDir dir;
  RankProgramOptions o;
  o.path = dir.path() + "/no-such-program";
  o.argv = {"no-such-program"};
  o.log_path = dir.path() + "/logs/rank-0.log";
  o.stderr_fd = ::open("/dev/null", O_WRONLY);
  EXPECT_EQ(RunRankProgram(o), base::kExitNotFound);
  ::close(o.stderr_fd);
  const std::optional<FatalLine> fatal = ParseFatalLine(SplitLines(ReadFile(o.log_path)).back());
  ASSERT_TRUE(fatal.has_value());
  EXPECT_EQ(fatal->message, "cannot execute no-such-program: No such file or directory");
}

// mpirun tearing the job down (after another rank failed) sends SIGTERM to the process it
// started: the wrapper passes it on, the program ends, and the rank is not blamed.
TEST(RankProgram, ForwardedSigtermStopsTheProgramWithoutBlame) {
  TempDir dir;
  const std::string log = dir.path() + "/logs/rank-3.log";
  base::Subprocess wrapper = base::Subprocess::Fork([&] {
    RankProgramOptions o;
    o.path = "/bin/sh";
    // The program traps TERM to show that it got it, from us (its own process group).
    o.argv = {"sh", "-c",
              "trap 'echo got TERM; exit 143' TERM; echo ready; while :; do sleep 0.05; done"};
    o.env = base::CurrentEnvironment();
    o.log_path = log;
    o.stdout_fd = o.stderr_fd = ::open("/dev/null", O_WRONLY);
    return RunRankProgram(o);
  });
  for (int i = 0; i < 200 && ReadFile(log).find("ready") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(ReadFile(log).find("ready"), std::string::npos);
  wrapper.SignalChild(SIGTERM);
  const base::ProcessStatus status = wrapper.Wait();
  ASSERT_EQ(status.term_signal, 0);
  EXPECT_EQ(status.exit_code, 143);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("got TERM"), std::string::npos) << text;
  EXPECT_EQ(text.find("FATAL"), std::string::npos) << text;
  EXPECT_EQ(SplitLines(text).back().substr(base::kLogTimeLength + 1),
            "INFO ringpilot exec: sh exited with status 143 after SIGTERM from the launcher");
}

TEST(RankProgram, ClosingLines) {
  RankProgramEnd end;
  end.term_signal = SIGSEGV;
  const int64_t t = 1700000000123000000;  // 2023-11-14T22:13:20.123Z
  EXPECT_EQ(ClosingLogLine(end, "python3", t),
            "2023-11-14T22:13:20.123Z FATAL python3 killed by SIGSEGV");
  end.stop_signal = SIGINT;
  EXPECT_EQ(ClosingLogLine(end, "python3", t),
            "2023-11-14T22:13:20.123Z INFO ringpilot exec: python3 killed by SIGSEGV after SIGINT "
            "from the launcher");
  RankProgramEnd code;
  code.exit_code = base::kExitPermanent;
  code.last_error_line = std::string(400, 'x');
  const std::string line = ClosingLogLine(code, "p", t);
  EXPECT_EQ(line.rfind("2023-11-14T22:13:20.123Z FATAL p exited with status 78 (last error line: " +
                           std::string(300, 'x') + "...)",
                       0),
            0u);
  EXPECT_EQ(ShellStatus(code), 78);
}

TEST(RankProgram, ProgressLines) {
  const auto p = ParseProgressLine("step 600/600 loss 0.3012 (41.2 steps/s)");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->step, 600);
  EXPECT_EQ(p->steps, 600);
  EXPECT_DOUBLE_EQ(*p->loss, 0.3012);
  const auto q = ParseProgressLine("Step: 12 / 40, loss=1.5e-1, lr 0.1");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->step, 12);
  EXPECT_EQ(q->steps, 40);
  EXPECT_DOUBLE_EQ(*q->loss, 0.15);
  const auto r = ParseProgressLine("step=7");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->step, 7);
  EXPECT_EQ(r->steps, 0);
  EXPECT_FALSE(r->loss.has_value());
  // Not progress: the step is not where the line starts, or no number follows.
  EXPECT_FALSE(ParseProgressLine("rank 0: preempted: checkpoint at step 240, exit 75"));
  EXPECT_FALSE(ParseProgressLine("steps per epoch: 117"));
  EXPECT_FALSE(ParseProgressLine("stepping through the data"));
  // val_loss is not the loss.
  EXPECT_FALSE(ParseProgressLine("step 3 val_loss 0.5")->loss.has_value());
}

TEST(RankProgram, BeatSaysTheProcessAndTheLastProgressLine) {
  TempDir dir;
  RankProgramOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", "echo 'step 10/20 loss 2.5'; echo 'step 20/20 loss 1.25'; exit 0"};
  o.env = base::CurrentEnvironment();
  o.log_path = dir.path() + "/logs/rank-1.log";
  o.beat_path = history::ProgramBeatPath(dir.path() + "/logs", 1);
  o.rank = 1;
  const int null_fd = ::open("/dev/null", O_WRONLY);
  o.stdout_fd = null_fd;
  o.stderr_fd = null_fd;
  EXPECT_EQ(RunRankProgram(o), 0);
  ::close(null_fd);
  const std::map<int, history::ProgramBeat> beats =
      history::ReadProgramBeats(dir.path() + "/logs", 0);
  ASSERT_EQ(beats.count(1), 1u);
  const history::ProgramBeat& b = beats.at(1);
  EXPECT_EQ(b.state, "exited");
  EXPECT_EQ(b.status, 0);
  EXPECT_GT(b.pid, 0);
  EXPECT_NE(b.command.find("sh -c"), std::string::npos) << b.command;
  ASSERT_TRUE(b.progress.has_value());
  EXPECT_EQ(b.progress->step, 20);
  EXPECT_EQ(b.progress->steps, 20);
  EXPECT_EQ(b.progress->loss, 1.25);
  // The launcher's reader of the same file.
  const std::map<int, RankHeartbeat> heartbeats = ReadProgramBeats(dir.path() + "/logs", 0);
  ASSERT_EQ(heartbeats.count(1), 1u);
  EXPECT_TRUE(heartbeats.at(1).progress);
  EXPECT_EQ(heartbeats.at(1).step, 20);
  EXPECT_EQ(heartbeats.at(1).phase, "exited");
}

}  // namespace
}  // namespace ringpilot::launcher
