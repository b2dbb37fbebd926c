#include "launcher/run_state.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "base/environment.h"

namespace ringpilot::launcher {
namespace {

std::string ReadLink(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  std::string target = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  // A binary replaced (rebuilt) while it runs reads "PATH (deleted)".
  static const std::string kDeleted = " (deleted)";
  if (target.size() > kDeleted.size() &&
      target.compare(target.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
    target.resize(target.size() - kDeleted.size());
  }
  return target;
}

}  // namespace

Liveness CheckLauncher(const LauncherRecord& record) {
  if (!record.host.empty() && record.host != base::HostName()) return Liveness::kElsewhere;
  if (record.pid <= 0) return Liveness::kGone;
  if (::kill(record.pid, 0) != 0 && errno == ESRCH) return Liveness::kGone;
  // The pid may have been reused: the process must still be the same executable (when
  // /proc tells; another user's process cannot be read, and then the pid is trusted).
  const std::string exe = ReadLink("/proc/" + std::to_string(record.pid) + "/exe");
  if (!exe.empty() && !record.executable.empty() && exe != record.executable) {
    return Liveness::kGone;
  }
  return Liveness::kAlive;
}

}  // namespace ringpilot::launcher
