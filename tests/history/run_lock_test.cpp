#include "history/run_lock.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "base/environment.h"
#include "base/subprocess.h"
#include "tests/test_util.h"

namespace ringpilot::history {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// The pid of a process that has exited (and been reaped): no process has it for now.
int DeadPid() {
  base::Subprocess child = base::Subprocess::Fork([] { return 0; });
  child.Wait();
  return static_cast<int>(child.pid());
}

TEST(RunLock, SecondLauncherIsRefusedWithTheHolderAndNothingChanges) {
  TempDir dir;
  std::string notice = "x";
  const std::unique_ptr<RunDirLock> first = RunDirLock::Acquire(dir.path(), &notice);
  EXPECT_EQ(notice, "");
  EXPECT_EQ(first->record().pid, static_cast<int>(::getpid()));
  const std::string before = ReadFile(RunLockPath(dir.path()));
  // flock is per open file: a second open of the file in this process is a second launcher.
  try {
    RunDirLock::Acquire(dir.path(), &notice);
    FAIL() << "a second lock was granted";
  } catch (const RunDirBusy& e) {
    ASSERT_TRUE(e.holder());
    EXPECT_EQ(e.holder()->pid, first->record().pid);
    EXPECT_EQ(std::string(e.what()), dir.path() + " is in use by ringpilot run (pid " +
                                         std::to_string(::getpid()) + " on " + base::HostName() +
                                         " since " + first->record().started +
                                         "); ringpilot stop it first");
  }
  EXPECT_EQ(ReadFile(RunLockPath(dir.path())), before);
  const RunLockView view = ReadRunLock(dir.path());
  EXPECT_EQ(view.state, LockState::kHeld);
  ASSERT_TRUE(view.record);
  EXPECT_EQ(view.record->started, first->record().started);
}

TEST(RunLock, ReleasedLockIsFreeAndTakenWithoutNotice) {
  TempDir dir;
  { const auto lock = RunDirLock::Acquire(dir.path(), nullptr); }
  EXPECT_EQ(ReadFile(RunLockPath(dir.path())), "");
  EXPECT_EQ(ReadRunLock(dir.path()).state, LockState::kFree);
  std::string notice = "x";
  const auto again = RunDirLock::Acquire(dir.path(), &notice);
  EXPECT_EQ(notice, "");
}

TEST(RunLock, RecordOfADeadProcessIsStaleAndTakenOverWithANotice) {
  TempDir dir;
  RunLockRecord old;
  old.pid = DeadPid();
  old.host = base::HostName();
  old.started = "2026-11-27T10:00:00.000Z";
  WriteFile(RunLockPath(dir.path()), RunLockJson(old));
  EXPECT_EQ(ReadRunLock(dir.path()).state, LockState::kStale);
  std::string notice;
  const auto lock = RunDirLock::Acquire(dir.path(), &notice);
  EXPECT_EQ(notice, dir.path() + ": the lock of ringpilot run (pid " + std::to_string(old.pid) +
                        " on " + old.host + " since " + old.started + ") is stale (pid " +
                        std::to_string(old.pid) + " no longer runs); taking it over");
  EXPECT_EQ(ReadRunLock(dir.path()).record->pid, static_cast<int>(::getpid()));
}

TEST(RunLock, ReusedPidIsToldByItsStartTime) {
  TempDir dir;
  RunLockRecord old;
  old.pid = static_cast<int>(::getppid());  // alive, but it did not start at this time
  old.host = base::HostName();
  old.process_start = 1;
  WriteFile(RunLockPath(dir.path()), RunLockJson(old));
  EXPECT_EQ(ReadRunLock(dir.path()).state, LockState::kStale);
  std::string notice;
  const auto lock = RunDirLock::Acquire(dir.path(), &notice);
  EXPECT_NE(notice, "");
}

TEST(RunLock, LiveRecordHoldsEvenWhenTheFlockIsFree) {
  // A filesystem whose flock another launcher's host (or no flock at all) does not share:
  // the record of a live process stops the second launcher.
  TempDir dir;
  RunLockRecord other;
  other.pid = static_cast<int>(::getppid());
  other.host = base::HostName();
  WriteFile(RunLockPath(dir.path()), RunLockJson(other));
  EXPECT_THROW(RunDirLock::Acquire(dir.path(), nullptr), RunDirBusy);
  other.host = "some-other-host";
  other.started = "2026-11-27T10:00:00.000Z";
  WriteFile(RunLockPath(dir.path()), RunLockJson(other));
  EXPECT_EQ(ReadRunLock(dir.path()).state, LockState::kElsewhere);
  try {
    RunDirLock::Acquire(dir.path(), nullptr);
    FAIL() << "a record of another host was taken over";
  } catch (const RunDirBusy& e) {
    EXPECT_NE(std::string(e.what()).find("(pid " + std::to_string(other.pid) +
                                         " on some-other-host since 2026-11-27T10:00:00.000Z); "
                                         "ringpilot stop it first (on some-other-host; if no "
                                         "launcher runs there any more, remove " +
                                         RunLockPath(dir.path()) + ")"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ParseRunLock(ReadFile(RunLockPath(dir.path())))->host, "some-other-host");
}

TEST(RunLock, LockDoesNotReachChildPrograms) {
  TempDir dir;
  const auto lock = RunDirLock::Acquire(dir.path(), nullptr);
  // An exec'd child (mpirun) holds no copy of the descriptor: close-on-exec.
  const testing::ProcessResult r =
      testing::RunProcess({"/bin/sh", "-c", "ls -l /proc/$$/fd | grep -c run.lock || true"});
  EXPECT_EQ(r.out, "0\n");
}

TEST(RunLock, ParseRejectsWhatIsNotARecord) {
  EXPECT_FALSE(ParseRunLock(""));
  EXPECT_FALSE(ParseRunLock("{\"pid\": \"x\"}"));
  EXPECT_FALSE(ParseRunLock("[1]"));
  RunLockRecord r;
  r.pid = 7;
  r.host = "h";
  r.started = "t";
  r.process_start = 99;
  const std::optional<RunLockRecord> back = ParseRunLock(RunLockJson(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->pid, 7);
  EXPECT_EQ(back->host, "h");
  EXPECT_EQ(back->process_start, 99u);
  EXPECT_EQ(DescribeHolder(*back), "ringpilot run (pid 7 on h since t)");
}

}  // namespace
}  // namespace ringpilot::history
