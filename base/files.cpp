#include "base/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ringpilot::base {

namespace {
[[noreturn]] void Fail(const std::string& path, const std::string& action) {
  ThrowFileError(path, action, errno);
}
}  // namespace

void ThrowFileError(const std::string& path, const std::string& action, int err) {
  throw FileError(path + ": cannot " + action + ": " + std::strerror(err));
}

void MakeDirs(const std::string& path) {
  if (path.empty()) return;
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) Fail(prefix, "create directory");
  }
  if (!IsDirectory(path)) {
    errno = ENOTDIR;
    Fail(path, "create directory");
  }
}

void RemoveTree(const std::string& path) {
  if (!Exists(path)) return;
  auto remove = [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); };
  if (::nftw(path.c_str(), remove, 16, FTW_DEPTH | FTW_PHYS) != 0) Fail(path, "remove");
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR) return out;
    Fail(path, "list");
  }
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_size);
}

void Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) Fail(from, "rename to " + to);
}

void FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | (IsDirectory(path) ? O_DIRECTORY : 0));
  if (fd < 0) Fail(path, "open to fsync");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0) Fail(path, "fsync");
}

std::string DirName(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, "read");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) Fail(path, "read");
  return buf.str();
}

void WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) Fail(tmp, "create");
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
    ThrowFileError(path, "write", err);
  }
  FsyncPath(DirName(path));
}

}  // namespace ringpilot::base
