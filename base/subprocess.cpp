#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/exit_status.h"
#include "base/time.h"

extern char** environ;

namespace ringpilot::base {
namespace {

// One read per ready stream per poll takes at most this much.
constexpr std::size_t kReadChunkBytes = 16384;
// execvp's search path when PATH is unset (glibc's _CS_PATH).
constexpr const char* kDefaultSearchPath = "/bin:/usr/bin";
// RunToEnd checks a child that closed its output this often until its deadline.
constexpr int kExitPollMs = 10;

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// Both ends of a pipe, closed on scope exit unless taken.
struct PipeFds {
  int read = -1;
  int write = -1;
  PipeFds() = default;
  PipeFds(const PipeFds&) = delete;
  PipeFds& operator=(const PipeFds&) = delete;
  ~PipeFds() {
    CloseFd(&read);
    CloseFd(&write);
  }
  void Open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw SpawnError(std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    read = fds[0];
    write = fds[1];
  }
};

// Strings as execve takes them: pointers into strings owned here, then a null pointer.
class ExecStrings {
 public:
  explicit ExecStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  ExecStrings(const ExecStrings&) = delete;
  ExecStrings& operator=(const ExecStrings&) = delete;
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// The descriptors a child's stdio is made of, opened before fork. The parent keeps the
// read ends (taken out of here); the rest is closed when this goes.
struct Plumbing {
  int null_fd = -1;
  PipeFds out;
  PipeFds err;
  // What the child puts on 0, 1 and 2 (-1: leave as inherited).
  int child_stdin = -1;
  int child_stdout = -1;
  int child_stderr = -1;
  bool stderr_to_stdout = false;  // 2 becomes whatever 1 is, after 1 is in place

  explicit Plumbing(const ChildOptions& options) {
    if (options.stdout_to == ChildOutput::kMerge) {
      throw std::invalid_argument("Subprocess: stdout cannot be merged into itself");
    }
    const bool needs_null = options.stdin_from == ChildInput::kNull ||
                            options.stdout_to == ChildOutput::kNull ||
                            options.stderr_to == ChildOutput::kNull;
    if (needs_null) {
      null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      if (null_fd < 0) {
        throw SpawnError(std::string("cannot open /dev/null: ") + std::strerror(errno));
      }
    }
    if (options.stdin_from == ChildInput::kNull) child_stdin = null_fd;
    if (options.stdout_to == ChildOutput::kPipe) {
      out.Open();
      child_stdout = out.write;
    } else if (options.stdout_to == ChildOutput::kNull) {
      child_stdout = null_fd;
    }
    if (options.stderr_to == ChildOutput::kPipe) {
      err.Open();
      child_stderr = err.write;
    } else if (options.stderr_to == ChildOutput::kNull) {
      child_stderr = null_fd;
    } else if (options.stderr_to == ChildOutput::kMerge) {
      stderr_to_stdout = true;
    }
  }
  Plumbing(const Plumbing&) = delete;
  Plumbing& operator=(const Plumbing&) = delete;
  ~Plumbing() { CloseFd(&null_fd); }
  // In the parent after fork: the child holds its ends now.
  void CloseChildEnds() {
    CloseFd(&null_fd);
    CloseFd(&out.write);
    CloseFd(&err.write);
  }
};

// In the child: `fd` becomes `target`. The same number only loses close-on-exec (dup2 of a
// descriptor onto itself would leave the flag, and the program would find it closed).
int MoveFd(int fd, int target) {
  if (fd < 0) return 0;
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0 ? 0 : errno;
  return ::dup2(fd, target) >= 0 ? 0 : errno;
}

// In the child, between fork and exec: async-signal-safe calls only. Returns 0 or the errno
// of the step that failed.
int SetUpChild(const ChildOptions& options, const Plumbing& plumbing, pid_t parent) {
  if (options.own_process_group) ::setpgid(0, 0);
  if (options.parent_death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
    // The parent died before prctl: the signal will never come.
    if (::getppid() != parent) ::_exit(128 + options.parent_death_signal);
  }
  if (const int e = MoveFd(plumbing.child_stdin, STDIN_FILENO)) return e;
  if (const int e = MoveFd(plumbing.child_stdout, STDOUT_FILENO)) return e;
  if (const int e = MoveFd(plumbing.child_stderr, STDERR_FILENO)) return e;
  if (plumbing.stderr_to_stdout && ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) return errno;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (const int sig : options.default_signals) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  return 0;
}

// The PATH a program name is looked up on.
std::string SearchPath(const std::optional<Environment>& env) {
  if (env) {
    const auto it = env->find("PATH");
    return it == env->end() ? kDefaultSearchPath : it->second;
  }
  const char* path = std::getenv("PATH");
  return path == nullptr ? kDefaultSearchPath : path;
}

}  // namespace

ProcessStatus ProcessStatus::FromWaitStatus(int wait_status) {
  ProcessStatus s;
  if (WIFSIGNALED(wait_status)) {
    s.term_signal = WTERMSIG(wait_status);
  } else if (WIFEXITED(wait_status)) {
    s.exit_code = WEXITSTATUS(wait_status);
  }
  return s;
}

Subprocess Subprocess::Launch(const ChildOptions& options, const std::function<int()>& child_main,
                              int report_fd) {
  Plumbing plumbing(options);
  Subprocess child;
  child.own_group_ = options.own_process_group;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw SpawnError(std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int err = SetUpChild(options, plumbing, parent);
    if (err == 0) ::_exit(child_main());
    if (report_fd >= 0) {
      [[maybe_unused]] const ssize_t n = ::write(report_fd, &err, sizeof err);
    }
    ::_exit(kExitNotFound);
  }
  child.pid_ = pid;
  // Also here, so the group exists before this process might signal it.
  if (options.own_process_group) ::setpgid(pid, pid);
  plumbing.CloseChildEnds();
  child.out_fd_ = std::exchange(plumbing.out.read, -1);
  child.err_fd_ = std::exchange(plumbing.err.read, -1);
  return child;
}

Subprocess Subprocess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) throw std::invalid_argument("Subprocess::Spawn: empty argv");
  std::string path = options.path;
  if (path.empty()) {
    path = ResolveExecutable(options.argv[0], SearchPath(options.env));
    if (path.empty()) {
      Subprocess none;
      none.reaped_ = true;
      none.exec_errno_ = ENOENT;
      return none;
    }
  }
  const ExecStrings argv(options.argv);
  std::optional<ExecStrings> env_strings;
  if (options.env) env_strings.emplace(ToEnvStrings(*options.env));
  char* const* envp = env_strings ? env_strings->get() : environ;
  // The child writes its exec's errno here; a successful exec closes it (close-on-exec),
  // and the parent reads end of file.
  PipeFds exec_error;
  exec_error.Open();
  const int report_fd = exec_error.write;
  Subprocess child = Launch(
      options,
      [&]() -> int {
        int err = 0;
        if (!options.working_dir.empty() && ::chdir(options.working_dir.c_str()) != 0) {
          err = errno;
        } else {
          ::execve(path.c_str(), argv.get(), envp);
          err = errno;
        }
        [[maybe_unused]] const ssize_t n = ::write(report_fd, &err, sizeof err);
        return kExitNotFound;
      },
      report_fd);
  CloseFd(&exec_error.write);
  int err = 0;
  ssize_t got;
  do {
    got = ::read(exec_error.read, &err, sizeof err);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof err)) {
    child.Wait();
    CloseFd(&child.out_fd_);
    CloseFd(&child.err_fd_);
    child.exec_errno_ = err;
  }
  return child;
}

Subprocess Subprocess::Fork(const std::function<int()>& body, const ChildOptions& options) {
  return Launch(options, body, -1);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      own_group_(other.own_group_),
      reaped_(std::exchange(other.reaped_, true)),
      status_(other.status_),
      exec_errno_(other.exec_errno_),
      out_fd_(std::exchange(other.out_fd_, -1)),
      err_fd_(std::exchange(other.err_fd_, -1)),
      partial_{std::move(other.partial_[0]), std::move(other.partial_[1])} {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    Release();
    pid_ = std::exchange(other.pid_, -1);
    own_group_ = other.own_group_;
    reaped_ = std::exchange(other.reaped_, true);
    status_ = other.status_;
    exec_errno_ = other.exec_errno_;
    out_fd_ = std::exchange(other.out_fd_, -1);
    err_fd_ = std::exchange(other.err_fd_, -1);
    partial_[0] = std::move(other.partial_[0]);
    partial_[1] = std::move(other.partial_[1]);
  }
  return *this;
}

Subprocess::~Subprocess() { Release(); }

void Subprocess::Release() {
  CloseFd(&out_fd_);
  CloseFd(&err_fd_);
  if (pid_ > 0 && !reaped_) {
    Signal(SIGKILL);
    Wait();
  }
}

bool Subprocess::ReadOutput(int timeout_ms, const std::vector<int>& wake_fds,
                            const ChunkHandler& on_chunk) {
  std::vector<pollfd> fds = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};  // -1: skipped
  for (const int fd : wake_fds) fds.push_back({fd, POLLIN, 0});
  if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return false;
  char buf[kReadChunkBytes];
  int* const stream_fds[2] = {&out_fd_, &err_fd_};
  for (int i = 0; i < 2; ++i) {
    int* fd = stream_fds[i];
    if (*fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t r = ::read(*fd, buf, sizeof buf);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) {
      CloseFd(fd);
      continue;
    }
    on_chunk(i == 0 ? ChildStream::kStdout : ChildStream::kStderr, buf,
             static_cast<std::size_t>(r));
  }
  return true;
}

bool Subprocess::RelayLines(int timeout_ms, const std::vector<int>& wake_fds,
                            const LineHandler& on_line) {
  return ReadOutput(timeout_ms, wake_fds, [&](ChildStream stream, const char* data, std::size_t n) {
    std::string& partial = partial_[stream == ChildStream::kStdout ? 0 : 1];
    partial.append(data, n);
    std::size_t start = 0;
    while (true) {
      const std::size_t nl = partial.find('\n', start);
      const std::size_t end = nl == std::string::npos ? partial.size() : nl;
      if (end - start > kMaxLineBytes) {  // complete or not, a piece goes now
        on_line(stream, partial.substr(start, kMaxLineBytes));
        start += kMaxLineBytes;
        continue;
      }
      if (nl == std::string::npos) break;
      on_line(stream, partial.substr(start, nl - start));
      start = nl + 1;
    }
    partial.erase(0, start);
  });
}

void Subprocess::FinishLines(const LineHandler& on_line) {
  const ChildStream streams[2] = {ChildStream::kStdout, ChildStream::kStderr};
  for (int i = 0; i < 2; ++i) {
    if (!partial_[i].empty()) on_line(streams[i], partial_[i]);
    partial_[i].clear();
  }
  CloseFd(&out_fd_);
  CloseFd(&err_fd_);
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(own_group_ ? -pid_ : pid_, sig);
}

void Subprocess::SignalChild(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

bool Subprocess::HasExited() {
  if (pid_ <= 0 || reaped_) return true;
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid_;
}

std::optional<ProcessStatus> Subprocess::TryWait() {
  if (pid_ <= 0 || reaped_) return status_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0 || (r < 0 && errno == EINTR)) return std::nullopt;
  reaped_ = true;
  status_ = r == pid_ ? ProcessStatus::FromWaitStatus(status) : ProcessStatus{};
  return status_;
}

ProcessStatus Subprocess::Wait() {
  if (pid_ <= 0 || reaped_) return status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  reaped_ = true;
  status_ = r == pid_ ? ProcessStatus::FromWaitStatus(status) : ProcessStatus{};
  return status_;
}

RunResult RunToEnd(const SpawnOptions& options, const RunLimits& limits) {
  RunResult result;
  Subprocess child = Subprocess::Spawn(options);
  result.exec_errno = child.exec_errno();
  if (result.exec_errno != 0) return result;
  const bool limited = limits.timeout_s > 0;
  const int64_t deadline_ns = MonotonicNs() + static_cast<int64_t>(limits.timeout_s * 1e9);
  const auto remaining_ms = [&] {
    return static_cast<int>(std::max<int64_t>(0, (deadline_ns - MonotonicNs()) / 1'000'000));
  };
  const auto keep = [&](ChildStream stream, const char* data, std::size_t n) {
    std::string& text = stream == ChildStream::kStdout ? result.output : result.error_output;
    if (limits.max_output_bytes != 0) {
      n = std::min(n, limits.max_output_bytes - std::min(limits.max_output_bytes, text.size()));
    }
    text.append(data, n);
  };
  while (child.OutputOpen()) {
    const int ms = limited ? remaining_ms() : -1;
    if (ms == 0) break;
    if (!child.ReadOutput(ms, {}, keep)) break;
  }
  if (!limited) {
    result.status = child.Wait();
    return result;
  }
  while (true) {
    if (const std::optional<ProcessStatus> status = child.TryWait()) {
      result.status = *status;
      return result;
    }
    const int ms = remaining_ms();
    if (ms == 0) {
      result.timed_out = true;
      child.Signal(SIGKILL);
      result.status = child.Wait();
      return result;
    }
    ::poll(nullptr, 0, std::min(ms, kExitPollMs));
  }
}

int ExecInPlace(const std::string& path, const std::vector<std::string>& argv,
                const Environment& env) {
  const ExecStrings args(argv);
  const ExecStrings envp(ToEnvStrings(env));
  ::execve(path.c_str(), args.get(), envp.get());
  return errno;
}

int ExecInPlace(const std::string& path, const std::vector<std::string>& argv) {
  const ExecStrings args(argv);
  ::execv(path.c_str(), args.get());
  return errno;
}

void WriteBestEffort(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 1000) <= 0) return;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

}  // namespace ringpilot::base
