#include "history/run_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "base/files.h"
#include "base/time.h"

namespace ringpilot::history {
namespace {

// A launcher that has just taken the flock writes its record right after: a second one that
// finds the flock taken waits this long for the record before it reports the holder unknown.
constexpr int kRecordWaitMs = 1000;
constexpr int kRecordPollMs = 20;
// A record larger than this is not ours.
constexpr off_t kMaxRecordBytes = 64 * 1024;

// Field 22 of /proc/PID/stat (starttime, clock ticks since boot); 0 when unreadable. The
// command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
uint64_t ProcessStart(int pid) {
  std::string stat;
  try {
    stat = base::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  } catch (const base::FileError&) {
    return 0;
  }
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::size_t pos = close + 1;
  // After ')': field 3 (state) is the first; starttime is field 22, the 20th after it.
  for (int field = 3; field < 22; ++field) {
    pos = stat.find(' ', pos + 1);
    if (pos == std::string::npos) return 0;
  }
  return std::strtoull(stat.c_str() + pos + 1, nullptr, 10);
}

std::string ReadAll(int fd) {
  std::string text;
  char buf[4096];
  for (off_t at = 0; at < kMaxRecordBytes;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  return text;
}

void WriteRecord(int fd, const std::string& path, const std::string& text) {
  if (::ftruncate(fd, 0) != 0) base::ThrowFileError(path, "truncate", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) base::ThrowFileError(path, "write", n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) base::ThrowFileError(path, "fsync", errno);
}

}  // namespace

std::string RunLockPath(const std::string& run_dir) { return run_dir + "/run.lock"; }

std::string DescribeHolder(const RunLockRecord& r) {
  return r.command + " (pid " + std::to_string(r.pid) + " on " +
         (r.host.empty() ? std::string("an unknown host") : r.host) + " since " +
         (r.started.empty() ? std::string("an unknown time") : r.started) + ")";
}

std::string RunLockJson(const RunLockRecord& r) {
  const nlohmann::ordered_json j = {{"pid", r.pid},
                                    {"host", r.host},
                                    {"started", r.started},
                                    {"process_start", r.process_start},
                                    {"command", r.command}};
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::optional<RunLockRecord> ParseRunLock(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer()) return std::nullopt;
  RunLockRecord r;
  r.pid = j["pid"].get<int>();
  const auto text_of = [&j](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  r.host = text_of("host");
  r.started = text_of("started");
  if (const std::string command = text_of("command"); !command.empty()) r.command = command;
  if (j.contains("process_start") && j["process_start"].is_number_unsigned()) {
    r.process_start = j["process_start"].get<uint64_t>();
  }
  return r;
}

const char* ToString(LockState state) {
  switch (state) {
    case LockState::kFree:
      return "free";
    case LockState::kHeld:
      return "held";
    case LockState::kStale:
      return "stale";
    case LockState::kElsewhere:
      return "elsewhere";
  }
  return "free";
}

bool HolderAlive(const RunLockRecord& r) {
  if (r.pid <= 0) return false;
  if (::kill(r.pid, 0) != 0 && errno == ESRCH) return false;
  // The pid may belong to a later process now: its start time tells (when /proc does).
  const uint64_t start = ProcessStart(r.pid);
  return r.process_start == 0 || start == 0 || start == r.process_start;
}

RunLockView ReadRunLock(const std::string& run_dir) {
  RunLockView view;
  const int fd = ::open(RunLockPath(run_dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return view;
  view.record = ParseRunLock(ReadAll(fd));
  ::close(fd);
  if (!view.record) return view;
  if (!view.record->host.empty() && view.record->host != base::HostName()) {
    view.state = LockState::kElsewhere;
  } else {
    view.state = HolderAlive(*view.record) ? LockState::kHeld : LockState::kStale;
  }
  return view;
}

RunDirBusy::RunDirBusy(const std::string& run_dir, const std::optional<RunLockRecord>& holder)
    : std::runtime_error(
          run_dir + " is in use by " +
          (holder ? DescribeHolder(*holder)
                  : std::string("ringpilot run (its holder has not recorded itself yet)")) +
          "; ringpilot stop it first" +
          (holder && !holder->host.empty() && holder->host != base::HostName()
               ? " (on " + holder->host + "; if no launcher runs there any more, remove " +
                     RunLockPath(run_dir) + ")"
               : std::string())),
      holder_(holder) {}

std::unique_ptr<RunDirLock> RunDirLock::Acquire(const std::string& run_dir, std::string* notice) {
  if (notice) notice->clear();
  const std::string path = RunLockPath(run_dir);
  // Not O_TRUNC: opening must change nothing when another launcher holds the file.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) base::ThrowFileError(path, "open", errno);
  struct Closer {
    int fd;
    bool keep = false;
    ~Closer() {
      if (!keep) ::close(fd);
    }
  } closer{fd};
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      std::optional<RunLockRecord> holder;
      for (int waited = 0; !(holder = ParseRunLock(ReadAll(fd))) && waited < kRecordWaitMs;
           waited += kRecordPollMs) {
        std::this_thread::sleep_for(std::chrono::milliseconds(kRecordPollMs));
      }
      throw RunDirBusy(run_dir, holder);
    }
    // A filesystem without flock (ENOLCK, EINVAL, ENOSYS): the record alone decides.
    if (err != ENOLCK && err != EINVAL && err != ENOSYS && err != EOPNOTSUPP) {
      base::ThrowFileError(path, "lock", err);
    }
  }
  // The flock is ours, but on a filesystem whose flock is per host a launcher elsewhere (or,
  // without flock, here) may still hold the directory: its record says so.
  if (const std::optional<RunLockRecord> old = ParseRunLock(ReadAll(fd)); old) {
    const bool here = old->host.empty() || old->host == base::HostName();
    if (!here || (old->pid != ::getpid() && HolderAlive(*old))) throw RunDirBusy(run_dir, old);
    if (notice) {
      *notice = run_dir + ": the lock of " + DescribeHolder(*old) + " is stale (pid " +
                std::to_string(old->pid) + " no longer runs); taking it over";
    }
  }
  RunLockRecord mine;
  mine.pid = static_cast<int>(::getpid());
  mine.host = base::HostName();
  mine.started = base::LogTimeNow();
  mine.process_start = ProcessStart(mine.pid);
  WriteRecord(fd, path, RunLockJson(mine));
  closer.keep = true;
  return std::unique_ptr<RunDirLock>(new RunDirLock(fd, std::move(mine)));
}

RunDirLock::~RunDirLock() {
  // The record first, then the flock: a launcher that takes the flock next finds no holder.
  if (::ftruncate(fd_, 0) == 0) ::fsync(fd_);
  ::close(fd_);
}

}  // namespace ringpilot::history
