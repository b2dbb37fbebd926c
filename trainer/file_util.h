// POSIX file helpers for code linked with LibTorch. libtorch exports its own copy of
// parts of std::filesystem (built with another libstdc++), and calls resolve to it:
// std::filesystem::remove_all, for one, crashes there. So LibTorch-linked code uses
// these instead. Every failure throws std::runtime_error naming the path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringpilot::trainer {

/// mkdir -p.
void MakeDirs(const std::string& path);
/// rm -rf; a missing path is not an error.
void RemoveTree(const std::string& path);
/// Entry names of a directory (no "." or ".."), unsorted; empty when it does not exist.
std::vector<std::string> ListDir(const std::string& path);
bool IsDirectory(const std::string& path);
bool Exists(const std::string& path);
/// Size in bytes; -1 when the file does not exist.
int64_t FileSize(const std::string& path);
/// rename(2): atomic within one filesystem.
void Rename(const std::string& from, const std::string& to);
/// fsync a file or a directory (a directory fsync makes renames in it durable).
void FsyncPath(const std::string& path);

}  // namespace ringpilot::trainer
