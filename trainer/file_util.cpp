#include "trainer/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace ringpilot::trainer {

namespace {
[[noreturn]] void Fail(const std::string& path, const char* what) {
  throw std::runtime_error(path + ": " + what + ": " + std::strerror(errno));
}
}  // namespace

void MakeDirs(const std::string& path) {
  if (path.empty()) return;
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) Fail(prefix, "cannot create");
  }
  if (!IsDirectory(path)) {
    errno = ENOTDIR;
    Fail(path, "cannot create");
  }
}

void RemoveTree(const std::string& path) {
  if (!Exists(path)) return;
  auto remove = [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); };
  if (::nftw(path.c_str(), remove, 16, FTW_DEPTH | FTW_PHYS) != 0) Fail(path, "cannot remove");
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    Fail(path, "cannot list");
  }
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
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
  if (::rename(from.c_str(), to.c_str()) != 0) Fail(from, ("cannot rename to " + to).c_str());
}

void FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | (IsDirectory(path) ? O_DIRECTORY : 0));
  if (fd < 0) Fail(path, "cannot open to fsync");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0) Fail(path, "fsync failed");
}

}  // namespace ringpilot::trainer
