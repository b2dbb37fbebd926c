// `ringpilot logs`: print a log of a run directory and, with -f, follow it as `tail -F`
// does (a replaced or truncated file is read again from its start; a file that does not
// exist yet is waited for) until the job's launcher (run.lock, launcher.json) has ended. Rank
// logs are appended to by every attempt, so following one follows the restarts too.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "base/exit_status.h"
#include "base/files.h"
#include "cli/run_dir_commands.h"
#include "config/job.h"
#include "history/launcher_record.h"
#include "history/run_lock.h"
#include "launcher/run_dir.h"
#include "launcher/run_state.h"

namespace ringpilot::cli {
namespace {

// How often a followed log looks at launcher.json to see whether the job has ended.
constexpr double kLauncherCheckS = 1.0;

// Writes all of `data` to stdout; false when stdout is gone (a closed pipe).
bool WriteOut(const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// An open log and where we are in it.
struct Followed {
  int fd = -1;
  ino_t inode = 0;
  off_t offset = 0;
  ~Followed() {
    if (fd >= 0) ::close(fd);
  }
  bool Open(const std::string& path, off_t at) {
    if (fd >= 0) ::close(fd);
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    ::fstat(fd, &st);
    inode = st.st_ino;
    offset = at;
    return true;
  }
  // Copies what was appended since the last call to stdout. False when stdout is gone.
  bool Drain() {
    char buf[65536];
    while (true) {
      const ssize_t n = ::pread(fd, buf, sizeof buf, offset);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return true;
      offset += n;
      if (!WriteOut(buf, static_cast<std::size_t>(n))) return false;
    }
  }
};

// The byte offset where the last `lines` lines of `path` start (0 for the whole file).
off_t TailOffset(const std::string& path, int lines) {
  if (lines < 0) return 0;
  const int64_t size = base::FileSize(path);
  if (size <= 0) return 0;
  if (lines == 0) return static_cast<off_t>(size);
  const std::string text = base::ReadFile(path);
  std::size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;  // the last line's own newline
  for (int seen = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++seen == lines) break;
  }
  return static_cast<off_t>(pos);
}

// Whether the job has ended: no launcher holds run.lock and the one recorded in
// launcher.json (if any) has ended. A launcher in its start-up checks holds the lock before
// it writes launcher.json, and one of an older version wrote launcher.json alone.
bool LauncherEnded(const launcher::RunDirLayout& layout) {
  const history::RunLockView lock = history::ReadRunLock(layout.root);
  const std::optional<launcher::LauncherRecord> rec =
      history::ReadLauncherRecordIfValid(layout.launcher_json);
  const bool locked =
      lock.state == history::LockState::kHeld || lock.state == history::LockState::kElsewhere;
  if (locked && (!rec || rec->pid != lock.record->pid)) return false;  // starting
  // None recorded: one that died in its start-up checks left a stale lock; else none has
  // started yet, and the log is followed until interrupted.
  if (!rec) return lock.state == history::LockState::kStale;
  return rec->state != launcher::RunState::kRunning ||
         launcher::CheckLauncher(*rec) == launcher::Liveness::kGone;
}

}  // namespace

int RunLogs(const LogsArgs& args) {
  const std::string dir =
      std::filesystem::absolute(std::filesystem::path(args.run_dir)).lexically_normal().string();
  const launcher::RunDirLayout layout(dir);
  if (!base::Exists(layout.job_yaml)) {
    std::cerr << "ringpilot logs: " << dir << ": not a run directory (no job.yaml)\n";
    return base::kExitUsage;
  }
  int world = 0;
  try {
    world = config::LoadJobConfig(layout.job_yaml).world.size();
  } catch (const config::ConfigError& e) {
    std::cerr << "ringpilot logs: " << e.lines().front() << "\n";
    return base::kExitUsage;
  }
  if (!args.launcher && args.rank >= world) {
    std::cerr << "ringpilot logs: --rank " << args.rank << ": the job has ranks 0.." << world - 1
              << "\n";
    return base::kExitUsage;
  }
  const std::string path = args.launcher ? layout.launcher_log : layout.RankLog(args.rank);
  Followed log;
  if (!log.Open(path, TailOffset(path, args.lines)) && !args.follow) {
    std::cerr << "ringpilot logs: " << path << ": " << std::strerror(errno) << "\n";
    return base::kExitFailure;
  }
  if (log.fd >= 0 && !log.Drain()) return base::kExitOk;
  if (!args.follow) return base::kExitOk;

  auto last_check = std::chrono::steady_clock::now();
  bool ended = false;
  while (true) {
    if (log.fd < 0) {
      log.Open(path, 0);  // not there yet: the rank has not started
    } else {
      struct stat st {};
      const bool gone = ::stat(path.c_str(), &st) != 0;
      if (!gone && (st.st_ino != log.inode || st.st_size < log.offset)) {
        // Replaced or truncated: what remains of the old file first, then the new one.
        if (!log.Drain()) return base::kExitOk;
        std::cerr << "ringpilot logs: " << path << " was replaced; reading it from the start\n";
        log.Open(path, 0);
      }
    }
    if (log.fd >= 0 && !log.Drain()) return base::kExitOk;
    // The launcher's end is seen one poll late, so the ranks' last lines are in by then.
    if (ended) return base::kExitOk;
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - last_check).count() >= kLauncherCheckS) {
      last_check = now;
      ended = LauncherEnded(layout);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(args.poll_s));
  }
}

}  // namespace ringpilot::cli
