// Helpers shared by the launcher tests that touch files and processes.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/environment.h"
#include "base/subprocess.h"

namespace ringpilot::testing {

/// A fresh directory under TMPDIR, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/ringpilot-test-XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

inline void WriteFile(const std::string& path, const std::string& text, bool executable = false) {
  std::ofstream(path, std::ios::binary) << text;
  if (executable) ::chmod(path.c_str(), 0755);
}

inline bool Exists(const std::string& path) { return std::filesystem::exists(path); }

/// Result of a child process run to completion.
struct ProcessResult {
  int exit_code = -1;  ///< -1 when killed by a signal
  std::string out;
  std::string err;
};

/// Runs argv (PATH lookup) with `env_overrides` applied on top of this process's
/// environment ("" values unset the variable), in `cwd` when given, stdin from /dev/null;
/// exit code 121 when it could not be started.
inline ProcessResult RunProcess(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env_overrides = {},
                                const std::string& cwd = "") {
  base::SpawnOptions options;
  options.argv = argv;
  base::Environment env = base::CurrentEnvironment();
  for (const auto& [name, value] : env_overrides) {
    if (value.empty()) {
      env.erase(name);
    } else {
      env[name] = value;
    }
  }
  options.env = std::move(env);
  options.working_dir = cwd;
  options.stdin_from = base::ChildInput::kNull;
  options.stdout_to = base::ChildOutput::kPipe;
  options.stderr_to = base::ChildOutput::kPipe;
  base::RunResult run = base::RunToEnd(options);
  ProcessResult r;
  r.exit_code = run.exec_errno != 0 ? 121 : run.status.exit_code;
  r.out = std::move(run.output);
  r.err = std::move(run.error_output);
  return r;
}

/// BUILD/bin/ringpilot: from RINGPILOT_BUILD_DIR (set by ctest), else beside this test
/// binary's directory (BUILD/tests/X -> BUILD/bin/ringpilot), so a test run by hand works.
inline std::string RingpilotBinary() {
  if (const char* build = std::getenv("RINGPILOT_BUILD_DIR"); build != nullptr && *build) {
    return std::string(build) + "/bin/ringpilot";
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path().parent_path() / "bin" / "ringpilot").string();
}

/// A base port P such that P..P+n-1 can all be bound on 127.0.0.1 right now (below the
/// kernel's ephemeral range, where an outgoing connection cannot take one before the
/// program under test listens); 0 when none was found. For tests that would otherwise
/// assume a fixed port (18400) is free on the host.
inline int FreeLoopbackPorts(int n) {
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 32000 - n);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int base = pick(random);
    std::vector<int> fds;
    bool all = true;
    for (int port = base; port < base + n && all; ++port) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      all = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      if (fd >= 0) fds.push_back(fd);
    }
    for (int fd : fds) ::close(fd);
    if (all) return base;
  }
  return 0;
}

inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace ringpilot::testing
