#include "launcher/run_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ringpilot::launcher {
namespace {

[[noreturn]] void ThrowErrno(const std::string& path, const char* action, int err) {
  throw RunDirError(path + ": cannot " + action + ": " + std::strerror(err));
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void MakeDirectories(const std::string& path) {
  // mkdir -p: every prefix ending before a '/', then the path itself.
  for (std::size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string prefix = pos == std::string::npos ? path : path.substr(0, pos);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      ThrowErrno(prefix, "create directory", errno);
    }
    if (pos == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ThrowErrno(path, "create directory", errno);
  if (!S_ISDIR(st.st_mode)) throw RunDirError(path + ": exists and is not a directory");
}

std::string DirName(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void FsyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) ThrowErrno(dir, "open directory", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) ThrowErrno(dir, "fsync directory", err);
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buf;
  buf << in.rdbuf();
  *out = buf.str();
  return !in.bad();
}

}  // namespace

RunDirLayout::RunDirLayout(const std::string& root_dir)
    : root(root_dir),
      logs(root_dir + "/logs"),
      checkpoints(root_dir + "/checkpoints"),
      trace(root_dir + "/trace"),
      job_yaml(root_dir + "/job.yaml"),
      launcher_log(root_dir + "/logs/launcher.log"),
      failure_json(root_dir + "/failure.json"),
      hostfile(root_dir + "/hostfile") {}

std::string RunDirLayout::RankLog(int rank) const {
  return logs + "/rank-" + std::to_string(rank) + ".log";
}

std::string DefaultRunDirName(const std::string& job_name, std::time_t now,
                              const std::string& parent) {
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return parent + "/" + job_name + "-" + stamp;
}

std::string UniqueRunDir(const std::string& base) {
  if (!Exists(base)) return base;
  for (int n = 2;; ++n) {
    const std::string candidate = base + "-" + std::to_string(n);
    if (!Exists(candidate)) return candidate;
  }
}

std::string ClaimNewRunDir(const std::string& base) {
  const std::string parent = DirName(base);
  MakeDirectories(parent);
  for (int n = 1;; ++n) {
    const std::string candidate = n == 1 ? base : base + "-" + std::to_string(n);
    if (::mkdir(candidate.c_str(), 0755) == 0) return candidate;
    if (errno != EEXIST) ThrowErrno(candidate, "create directory", errno);
  }
}

void WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) ThrowErrno(tmp, "create", errno);
  std::size_t done = 0;
  int err = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    ThrowErrno(path, "write", err);
  }
  FsyncDirectory(DirName(path));
}

bool KeepPrevious(const std::string& path) {
  if (!Exists(path)) return false;
  const std::string prev = path + ".prev";
  if (Exists(prev)) {
    std::string older;
    for (int n = 1;; ++n) {
      older = prev + "." + std::to_string(n);
      if (!Exists(older)) break;
    }
    if (::rename(prev.c_str(), older.c_str()) != 0) ThrowErrno(prev, "rename", errno);
  }
  if (::link(path.c_str(), prev.c_str()) != 0) ThrowErrno(prev, "create", errno);
  FsyncDirectory(DirName(path));
  return true;
}

PreparedRunDir PrepareRunDir(const RunDirLayout& layout, const std::string& job_yaml) {
  MakeDirectories(layout.root);
  for (const std::string* dir : {&layout.logs, &layout.checkpoints, &layout.trace}) {
    MakeDirectories(*dir);
  }
  PreparedRunDir result;
  std::string old_yaml;
  if (Exists(layout.job_yaml)) {
    result.resumed = true;
    if (!ReadWholeFile(layout.job_yaml, &old_yaml)) {
      throw RunDirError(layout.job_yaml + ": exists but cannot be read");
    }
    if (old_yaml == job_yaml) return result;  // same config: nothing to keep or rewrite
    result.config_changed = true;
    KeepPrevious(layout.job_yaml);
  }
  WriteFileAtomically(layout.job_yaml, job_yaml);
  return result;
}

}  // namespace ringpilot::launcher
