// base/subprocess.h: exit statuses, exec failures, PATH and environment, the line relay,
// timeouts and process groups, the parent-death signal, functions in a child, in-place exec.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/subprocess.h"
#include "tests/test_util.h"

namespace ringpilot::base {
namespace {

using testing::TempDir;
using testing::WriteFile;

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"sh", "-c", script};
  o.path = "/bin/sh";
  return o;
}

// Whether `pid` is a live process (a zombie counts as dead: it only waits to be reaped,
// which a container's init may never do).
bool Alive(pid_t pid) {
  std::string stat;
  try {
    stat = testing::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  } catch (...) {
    return false;
  }
  const std::size_t close = stat.rfind(')');
  if (stat.empty() || close == std::string::npos || close + 2 >= stat.size()) return false;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

// Waits up to 5 s for `pid` to die.
bool DiesSoon(pid_t pid) {
  for (int i = 0; i < 250 && Alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !Alive(pid);
}

struct Lines {
  std::vector<std::string> out;
  std::vector<std::string> err;
  LineHandler handler() {
    return [this](ChildStream stream, const std::string& line) {
      (stream == ChildStream::kStdout ? out : err).push_back(line);
    };
  }
};

// Relays until both pipes reached end of file.
void RelayAll(Subprocess* child, Lines* lines) {
  const LineHandler on_line = lines->handler();
  while (child->OutputOpen()) ASSERT_TRUE(child->RelayLines(1000, {}, on_line));
}

TEST(Subprocess, ExitStatusAndSignalDeath) {
  const RunResult exited = RunToEnd(Shell("exit 3"));
  EXPECT_EQ(exited.exec_errno, 0);
  EXPECT_EQ(exited.status.exit_code, 3);
  EXPECT_EQ(exited.status.term_signal, 0);
  EXPECT_EQ(exited.status.ShellCode(), 3);
  EXPECT_FALSE(exited.status.Succeeded());
  EXPECT_TRUE(RunToEnd(Shell("exit 0")).status.Succeeded());

  const RunResult killed = RunToEnd(Shell("kill -TERM $$"));
  EXPECT_EQ(killed.status.term_signal, SIGTERM);
  EXPECT_EQ(killed.status.exit_code, -1);
  EXPECT_EQ(killed.status.ShellCode(), 128 + SIGTERM);
}

TEST(Subprocess, ExecFailureIsReportedWithErrno) {
  SpawnOptions missing;
  missing.argv = {"no-such-program"};
  missing.path = "/nonexistent/no-such-program";
  Subprocess child = Subprocess::Spawn(missing);
  EXPECT_EQ(child.exec_errno(), ENOENT);
  EXPECT_GT(child.pid(), 0);  // it was forked, failed to exec and was reaped
  EXPECT_FALSE(child.OutputOpen());
  EXPECT_EQ(child.Wait().exit_code, 127);

  TempDir dir;
  WriteFile(dir.path() + "/not-executable", "#!/bin/sh\nexit 0\n");
  SpawnOptions not_executable;
  not_executable.argv = {"not-executable"};
  not_executable.path = dir.path() + "/not-executable";
  EXPECT_EQ(RunToEnd(not_executable).exec_errno, EACCES);

  // Not on PATH: nothing is forked.
  SpawnOptions unknown;
  unknown.argv = {"ringpilot-no-such-program-xyz"};
  Subprocess none = Subprocess::Spawn(unknown);
  EXPECT_EQ(none.exec_errno(), ENOENT);
  EXPECT_EQ(none.pid(), -1);

  SpawnOptions bad_dir = Shell("exit 0");
  bad_dir.working_dir = dir.path() + "/no-such-dir";
  EXPECT_EQ(RunToEnd(bad_dir).exec_errno, ENOENT);
}

TEST(Subprocess, PathLookupUsesTheChildsPath) {
  TempDir dir;
  WriteFile(dir.path() + "/ringpilot-subprocess-probe", "#!/bin/sh\necho \"found $0\"\n",
            /*executable=*/true);
  SpawnOptions o;
  o.argv = {"ringpilot-subprocess-probe"};
  o.env = Environment{{"PATH", "/nonexistent:" + dir.path()}};
  o.stdout_to = ChildOutput::kPipe;
  const RunResult run = RunToEnd(o);
  ASSERT_EQ(run.exec_errno, 0);
  EXPECT_EQ(run.output, "found " + dir.path() + "/ringpilot-subprocess-probe\n");
  EXPECT_TRUE(run.status.Succeeded());
}

TEST(Subprocess, EnvironmentIsPassedExactly) {
  SpawnOptions o;
  o.argv = {"env"};
  o.path = ResolveExecutable("env", "/usr/bin:/bin");
  ASSERT_FALSE(o.path.empty());
  o.env = Environment{{"B", "x=y z"}, {"A", "1"}, {"EMPTY", ""}};
  o.stdout_to = ChildOutput::kPipe;
  EXPECT_EQ(RunToEnd(o).output, "A=1\nB=x=y z\nEMPTY=\n");

  // Unset: this process's environment.
  ::setenv("RINGPILOT_SUBPROCESS_TEST", "inherited", 1);
  o.env.reset();
  const std::string inherited = RunToEnd(o).output;
  ::unsetenv("RINGPILOT_SUBPROCESS_TEST");
  EXPECT_NE(inherited.find("\nRINGPILOT_SUBPROCESS_TEST=inherited\n"), std::string::npos);
}

TEST(Subprocess, WorkingDirectoryAndNullStdin) {
  TempDir dir;
  char real[PATH_MAX];
  ASSERT_NE(::realpath(dir.path().c_str(), real), nullptr);
  SpawnOptions o = Shell("pwd -P; cat; echo end");
  o.working_dir = dir.path();
  o.stdin_from = ChildInput::kNull;  // cat ends at once
  o.stdout_to = ChildOutput::kPipe;
  EXPECT_EQ(RunToEnd(o).output, std::string(real) + "\nend\n");
}

TEST(Subprocess, RelaysLinesOfBothStreamsAndThePartialLastLine) {
  SpawnOptions o = Shell("printf 'a\\nb\\n'; printf 'e1\\n\\ne2' >&2; printf 'tail'");
  o.stdout_to = ChildOutput::kPipe;
  o.stderr_to = ChildOutput::kPipe;
  Subprocess child = Subprocess::Spawn(o);
  ASSERT_EQ(child.exec_errno(), 0);
  Lines lines;
  RelayAll(&child, &lines);
  EXPECT_EQ(lines.out, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(lines.err, (std::vector<std::string>{"e1", ""}));
  child.FinishLines(lines.handler());
  EXPECT_EQ(lines.out, (std::vector<std::string>{"a", "b", "tail"}));
  EXPECT_EQ(lines.err, (std::vector<std::string>{"e1", "", "e2"}));
  EXPECT_TRUE(child.Wait().Succeeded());
}

TEST(Subprocess, LineLongerThanTheLimitComesInPieces) {
  const std::size_t total = 3 * kMaxLineBytes + 1000;
  SpawnOptions o =
      Shell("head -c " + std::to_string(total) + " /dev/zero | tr '\\0' x; echo; echo next");
  o.stdout_to = ChildOutput::kPipe;
  Subprocess child = Subprocess::Spawn(o);
  Lines lines;
  RelayAll(&child, &lines);
  child.FinishLines(lines.handler());
  ASSERT_EQ(lines.out.size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(lines.out[i], std::string(kMaxLineBytes, 'x'));
  EXPECT_EQ(lines.out[3], std::string(1000, 'x'));
  EXPECT_EQ(lines.out[4], "next");
}

TEST(Subprocess, MergedStderrAndOutputLimit) {
  SpawnOptions o = Shell("echo out; echo err >&2; head -c 5000 /dev/zero");
  o.stdout_to = ChildOutput::kPipe;
  o.stderr_to = ChildOutput::kMerge;
  const RunResult run = RunToEnd(o, {0, 10});
  EXPECT_EQ(run.output, std::string("out\nerr\n\0\0", 10));
  EXPECT_TRUE(run.error_output.empty());
  EXPECT_TRUE(run.status.Succeeded());  // the rest was read (no SIGPIPE), only not kept

  SpawnOptions bad;
  bad.argv = {"sh"};
  bad.stdout_to = ChildOutput::kMerge;
  EXPECT_THROW(Subprocess::Spawn(bad), std::invalid_argument);
}

// A child that started a grandchild and then hangs: at the timeout both die, the
// grandchild through the process group.
TEST(Subprocess, TimeoutKillsTheWholeGroup) {
  SpawnOptions o = Shell("sleep 30 & echo $!; sleep 30");
  o.own_process_group = true;
  o.stdout_to = ChildOutput::kPipe;
  const auto start = std::chrono::steady_clock::now();
  const RunResult run = RunToEnd(o, {0.5, 0});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(run.timed_out);
  EXPECT_EQ(run.status.term_signal, SIGKILL);
  const pid_t grandchild = std::atoi(run.output.c_str());
  ASSERT_GT(grandchild, 0) << run.output;
  EXPECT_TRUE(DiesSoon(grandchild));
}

TEST(Subprocess, SignalReachesTheGroupAndHasExitedLeavesAZombie) {
  SpawnOptions o = Shell("sleep 30 & echo $!; wait");
  o.own_process_group = true;
  o.stdout_to = ChildOutput::kPipe;
  Subprocess child = Subprocess::Spawn(o);
  Lines lines;
  while (lines.out.empty()) ASSERT_TRUE(child.RelayLines(1000, {}, lines.handler()));
  const pid_t grandchild = std::atoi(lines.out[0].c_str());
  ASSERT_GT(grandchild, 0);
  EXPECT_FALSE(child.HasExited());
  EXPECT_FALSE(child.TryWait().has_value());
  child.Signal(SIGTERM);
  while (!child.HasExited()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Not reaped yet: the pid still names the (zombie) child.
  EXPECT_TRUE(testing::Exists("/proc/" + std::to_string(child.pid())));
  EXPECT_EQ(child.Wait().term_signal, SIGTERM);
  EXPECT_EQ(child.TryWait()->term_signal, SIGTERM);
  EXPECT_TRUE(DiesSoon(grandchild));
}

TEST(Subprocess, SignalChildSparesTheRestOfTheGroup) {
  SpawnOptions o = Shell("sleep 30 & echo $!; wait");
  o.own_process_group = true;
  o.stdout_to = ChildOutput::kPipe;
  Subprocess child = Subprocess::Spawn(o);
  Lines lines;
  while (lines.out.empty()) ASSERT_TRUE(child.RelayLines(1000, {}, lines.handler()));
  const pid_t grandchild = std::atoi(lines.out[0].c_str());
  child.SignalChild(SIGKILL);
  EXPECT_EQ(child.Wait().term_signal, SIGKILL);
  EXPECT_TRUE(Alive(grandchild));
  ::kill(grandchild, SIGKILL);
}

TEST(Subprocess, RelayWakesOnAnotherDescriptor) {
  SpawnOptions o = Shell("sleep 30");
  o.stdout_to = ChildOutput::kPipe;
  Subprocess child = Subprocess::Spawn(o);
  int wake[2];
  ASSERT_EQ(::pipe(wake), 0);
  ASSERT_EQ(::write(wake[1], "x", 1), 1);
  const auto start = std::chrono::steady_clock::now();
  Lines lines;
  EXPECT_TRUE(child.RelayLines(20000, {wake[0]}, lines.handler()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(lines.out.empty());
  ::close(wake[0]);
  ::close(wake[1]);
}

TEST(Subprocess, DestroyingKillsAndReapsAChildStillRunning) {
  pid_t pid = -1;
  {
    Subprocess child = Subprocess::Spawn(Shell("sleep 30"));
    pid = child.pid();
    Subprocess moved = std::move(child);
    EXPECT_EQ(moved.pid(), pid);
    EXPECT_EQ(child.pid(), -1);  // moved from: owns nothing
  }
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

// The launcher's guarantee: its child dies with it, even when the launcher is killed.
TEST(Subprocess, ParentDeathSignalReachesTheChild) {
  Subprocess parent = Subprocess::Fork(
      []() -> int {
        SpawnOptions o;
        o.argv = {"sleep", "30"};
        o.parent_death_signal = SIGTERM;
        o.stdout_to = ChildOutput::kNull;
        Subprocess child = Subprocess::Spawn(o);
        const std::string line = std::to_string(child.pid()) + "\n";
        WriteBestEffort(STDOUT_FILENO, line);
        ::_exit(0);  // no destructor: the kernel, not ~Subprocess, must stop the child
      },
      [] {
        ChildOptions c;
        c.stdout_to = ChildOutput::kPipe;
        return c;
      }());
  Lines lines;
  while (parent.OutputOpen()) ASSERT_TRUE(parent.RelayLines(1000, {}, lines.handler()));
  EXPECT_TRUE(parent.Wait().Succeeded());
  ASSERT_EQ(lines.out.size(), 1u);
  const pid_t child = std::atoi(lines.out[0].c_str());
  ASSERT_GT(child, 0);
  EXPECT_TRUE(DiesSoon(child));
}

TEST(Subprocess, ForkRunsAFunctionInAChild) {
  EXPECT_EQ(Subprocess::Fork([] { return 7; }).Wait().exit_code, 7);

  ChildOptions piped;
  piped.stdout_to = ChildOutput::kPipe;
  Subprocess child = Subprocess::Fork(
      [] {
        const char text[] = "from the child\n";
        return ::write(STDOUT_FILENO, text, sizeof text - 1) == sizeof text - 1 ? 0 : 1;
      },
      piped);
  Lines lines;
  RelayAll(&child, &lines);
  EXPECT_EQ(lines.out, std::vector<std::string>{"from the child"});
  EXPECT_TRUE(child.Wait().Succeeded());
}

TEST(Subprocess, ExecInPlace) {
  // In a child, which it replaces.
  Subprocess replaced = Subprocess::Fork([] {
    ExecInPlace("/bin/sh", {"sh", "-c", "test \"$ONLY\" = 1 && test -z \"$HOME\" && exit 5"},
                Environment{{"ONLY", "1"}});
    return 1;
  });
  EXPECT_EQ(replaced.Wait().exit_code, 5);
  // Here, where it fails and returns.
  EXPECT_EQ(ExecInPlace("/nonexistent/program", {"program"}), ENOENT);
  EXPECT_EQ(ExecInPlace("/nonexistent/program", {"program"}, Environment{}), ENOENT);
}

TEST(Subprocess, WriteBestEffortWritesEverything) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  WriteBestEffort(fds[1], "line one\nline two\n");
  ::close(fds[1]);
  char buf[64] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof buf), 18);
  EXPECT_EQ(std::string(buf), "line one\nline two\n");
  ::close(fds[0]);
}

}  // namespace
}  // namespace ringpilot::base
