// Helpers of the libFuzzer targets (tests/fuzz/*_fuzzer.cpp): the readers under test take
// paths, so each input is written to a file in a scratch directory of the fuzzing process.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/files.h"

namespace ringpilot::fuzz {

/// A directory of this process (under $TMPDIR, else /tmp), created on first use and removed
/// at exit. Not thread-safe (libFuzzer runs one input at a time).
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ringpilot-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string removed_at_exit;
    removed_at_exit = tmpl;
    std::atexit([] {
      try {
        base::RemoveTree(removed_at_exit);
      } catch (const std::exception&) {
      }
    });
    return tmpl;
  }();
  return dir;
}

/// Replaces `path` with `size` bytes of `data`; aborts when it cannot (a broken fuzzing
/// setup, not a finding).
inline void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

inline void WriteFile(const std::string& path, const std::string& text) {
  WriteFile(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

}  // namespace ringpilot::fuzz
