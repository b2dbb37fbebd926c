// POSIX file helpers used by every component, including code linked with LibTorch:
// libtorch exports its own copy of parts of std::filesystem (built with another
// libstdc++) and calls resolve to it (std::filesystem::remove_all, for one, crashes
// there), so nothing here uses std::filesystem. Every failure throws FileError, one line
// naming the path and the system error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringpilot::base {

/// A file or directory could not be created, read, written, renamed or removed.
class FileError : public std::runtime_error {
 public:
  explicit FileError(const std::string& line) : std::runtime_error(line) {}
};

/// Throws FileError "PATH: cannot ACTION: strerror(err)".
[[noreturn]] void ThrowFileError(const std::string& path, const std::string& action, int err);

/// mkdir -p (mode 0755). Throws when a component exists and is not a directory.
void MakeDirs(const std::string& path);
/// rm -rf; a missing path is not an error.
void RemoveTree(const std::string& path);
/// Entry names of a directory (no "." or ".."), sorted; empty when it does not exist or
/// is not a directory.
std::vector<std::string> ListDir(const std::string& path);
bool IsDirectory(const std::string& path);
/// True when anything (a dangling symlink included) exists at `path`.
bool Exists(const std::string& path);
/// Size in bytes; -1 when the file does not exist.
int64_t FileSize(const std::string& path);
/// rename(2): atomic within one filesystem.
void Rename(const std::string& from, const std::string& to);
/// fsync a file or a directory (a directory fsync makes renames in it durable).
void FsyncPath(const std::string& path);
/// Directory part of `path`: "." when it has none, "/" for "/x".
std::string DirName(const std::string& path);
/// The whole file; throws FileError when it cannot be read.
std::string ReadFile(const std::string& path);
/// Writes `content` to a temp file beside `path`, fsyncs it, renames it over `path` and
/// fsyncs the directory: readers see the old file or the new one, never a partial one,
/// and nothing is lost when writing fails.
void WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace ringpilot::base
