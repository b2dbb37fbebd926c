// Child processes. Every process ringpilot starts goes through here: fork and exec with the
// child's stdio, process group and parent-death signal set up, an exec failure told back to
// the parent with its errno, the child's output read as lines while the caller keeps its own
// periodic work, signals to the child or its group, and waiting. Also the one in-place exec
// (`ringpilot exec` and `export` replace themselves with the program they run) and a
// function run in a forked child without exec (mpirun/cma_probe.h).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/environment.h"

namespace ringpilot::base {

/// A line of a child's output longer than this is handed on in pieces of exactly this many
/// bytes (the rest waits for its newline) rather than buffered without bound.
inline constexpr std::size_t kMaxLineBytes = 64 * 1024;

/// A pipe, /dev/null or fork could not be had: nothing was started. One line, e.g.
/// "cannot fork: Resource temporarily unavailable".
class SpawnError : public std::runtime_error {
 public:
  explicit SpawnError(const std::string& line) : std::runtime_error(line) {}
};

/// Where a child's stdin comes from.
enum class ChildInput {
  kInherit,  ///< this process's stdin
  kNull,     ///< /dev/null
};

/// Where a child's stdout or stderr goes.
enum class ChildOutput {
  kInherit,  ///< this process's own descriptor
  kPipe,     ///< a pipe this process reads (Subprocess::RelayLines, RunToEnd)
  kMerge,    ///< stderr only: wherever stdout goes (its pipe when stdout is piped)
  kNull,     ///< /dev/null
};

/// Which of a child's output streams a line or a piece of output came from. A stderr merged
/// into stdout arrives as kStdout.
enum class ChildStream { kStdout, kStderr };

/// How a child is set up between fork and its program (or function).
struct ChildOptions {
  /// The child leads a new process group (setpgid in the child and again in the parent, so
  /// the group exists before Signal can reach it): a terminal's Ctrl-C then reaches only
  /// this process, and Signal reaches every process the child starts.
  bool own_process_group = false;
  /// Sent to the child by the kernel when the thread that started it dies (PR_SET_PDEATHSIG;
  /// 0 = none). A parent that died before the child could ask for it makes the child exit
  /// at once with 128 + this signal.
  int parent_death_signal = 0;
  ChildInput stdin_from = ChildInput::kInherit;
  ChildOutput stdout_to = ChildOutput::kInherit;  ///< not kMerge
  ChildOutput stderr_to = ChildOutput::kInherit;
  /// Set to SIG_DFL in the child. exec resets caught signals itself but keeps ignored ones
  /// ignored (base/signal_pipe.h ignores SIGPIPE, nohup SIGHUP): name those the program must
  /// get back. The child's signal mask is always emptied.
  std::vector<int> default_signals;
};

/// A program to start: ChildOptions plus what to execute.
struct SpawnOptions : ChildOptions {
  std::vector<std::string> argv;  ///< argv[0] first; must not be empty
  /// The executable. "" = argv[0] looked up as execvp would (base::ResolveExecutable) on the
  /// PATH of `env` (this process's when `env` is unset; /bin:/usr/bin when there is no
  /// PATH); one not found is an exec failure with ENOENT, and no process is started.
  std::string path;
  /// The child's whole environment; unset = this process's (`environ` at the call).
  std::optional<Environment> env;
  /// The child's working directory; "" = this process's. A failed chdir is reported as an
  /// exec failure with its errno.
  std::string working_dir;
};

/// How a child ended.
struct ProcessStatus {
  int exit_code = -1;   ///< the status it exited with; -1 when a signal killed it
  int term_signal = 0;  ///< the signal that killed it; 0 when it exited

  /// From a waitpid status.
  static ProcessStatus FromWaitStatus(int wait_status);
  bool Succeeded() const { return term_signal == 0 && exit_code == 0; }
  /// As a shell reports a command: the exit status, or 128 + the signal.
  int ShellCode() const { return term_signal != 0 ? 128 + term_signal : exit_code; }
};

/// Receives each complete line of a child's output, without its newline (and the last
/// line without one when the stream ends: FinishLines).
using LineHandler = std::function<void(ChildStream stream, const std::string& line)>;

/// One child process, owned: the read ends of its piped output and the duty to reap it.
/// Destroying one whose child was not reaped kills the child (SIGKILL; its group when it has
/// its own) and reaps it, so an exception never leaves a child behind. Movable, not
/// copyable. Not thread-safe: use one object from one thread.
class Subprocess {
 public:
  /// Starts a program. Everything the child needs is built before fork; after it the child
  /// makes only async-signal-safe calls until exec. The read ends this process keeps are
  /// close-on-exec, so programs started at the same time from other threads never hold
  /// them. Throws SpawnError when a pipe, /dev/null or fork cannot be had, and
  /// std::invalid_argument for an empty argv or stdout_to kMerge. An exec that fails (or a
  /// program not on PATH) is no exception: exec_errno() says why, the child that tried was
  /// reaped (it exited 127) and there is no output to read.
  static Subprocess Spawn(const SpawnOptions& options);

  /// Forks a child that runs `body` and exits (_exit) with what it returns; no exec. The
  /// child is a copy of this process with only the calling thread: `body` may make only
  /// async-signal-safe calls (no allocation, no locks, no iostreams) unless this process is
  /// single-threaded. A set-up step that fails (a dup2) makes it exit 127 without running
  /// `body`. Throws as Spawn does.
  static Subprocess Fork(const std::function<int()>& body, const ChildOptions& options = {});

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  /// 0 when the program runs; else the errno of its failed exec (or chdir), ENOENT for a
  /// program not found on PATH.
  int exec_errno() const { return exec_errno_; }
  /// The child's process id (its process group's id with own_process_group); -1 when none
  /// was started (a program not found on PATH).
  pid_t pid() const { return pid_; }

  /// Waits up to `timeout_ms` (-1: without limit) for output on the child's pipes or for
  /// any of `wake_fds` to become readable (they are not read: a signal pipe, say), then
  /// reads what is ready, at most one chunk per stream, and passes each complete line to
  /// `on_line`, in order within each stream. Lines are cut at kMaxLineBytes; a partial last
  /// line waits for its newline or FinishLines. A stream that reached end of file is closed.
  /// Returns false only when poll failed (not EINTR). Meant for a loop that does its own
  /// periodic work between calls.
  bool RelayLines(int timeout_ms, const std::vector<int>& wake_fds, const LineHandler& on_line);
  /// Receives output as it was read, in chunks of any size.
  using ChunkHandler = std::function<void(ChildStream stream, const char* data, std::size_t n)>;
  /// RelayLines without the lines: each chunk passed on as it was read.
  bool ReadOutput(int timeout_ms, const std::vector<int>& wake_fds, const ChunkHandler& on_chunk);
  /// Whether a piped stream is still open (its end of file not yet read).
  bool OutputOpen() const { return out_fd_ >= 0 || err_fd_ >= 0; }
  /// Passes each stream's partial last line (stdout's first) to `on_line` and closes the
  /// pipes; output not yet read is dropped.
  void FinishLines(const LineHandler& on_line);

  /// Sends `sig` to the child's process group when it has its own, else to the child; does
  /// nothing once the child was reaped (its pid may belong to another process by then).
  void Signal(int sig);
  /// Sends `sig` to the child alone, even when it leads a group; nothing once reaped.
  void SignalChild(int sig);

  /// Whether the child has exited, without reaping it: it stays a zombie, so neither its
  /// pid nor its process group id can be reused, and Signal still reaches what is left of
  /// its group. Never blocks.
  bool HasExited();
  /// Reaps the child when it has exited; nullopt while it runs. Never blocks.
  std::optional<ProcessStatus> TryWait();
  /// Blocks until the child exits (EINTR retried), reaps it and returns how it ended; the
  /// same status again on later calls. A child reaped elsewhere (SIGCHLD ignored) reads as
  /// exit_code -1.
  ProcessStatus Wait();

 private:
  Subprocess() = default;
  // Closes the pipes; kills and reaps a child not yet reaped.
  void Release();
  // Forks with the stdio of `options`; in the child, after its set-up, runs `child_main`
  // and exits with its value; a failed set-up is written (its errno) to `report_fd` when
  // that is >= 0, and the child exits 127.
  static Subprocess Launch(const ChildOptions& options, const std::function<int()>& child_main,
                           int report_fd);

  pid_t pid_ = -1;
  bool own_group_ = false;
  bool reaped_ = false;
  ProcessStatus status_;
  int exec_errno_ = 0;
  int out_fd_ = -1;  // read ends of the piped stdout / stderr; -1 once at end of file
  int err_fd_ = -1;
  std::string partial_[2];  // each stream's line so far, stdout's and stderr's
};

/// Limits of RunToEnd.
struct RunLimits {
  /// After this many seconds the child (its group when it has its own) is killed with
  /// SIGKILL; 0 = no limit.
  double timeout_s = 0;
  /// Each piped stream keeps its first this many bytes (the rest is read and dropped);
  /// 0 = all of it.
  std::size_t max_output_bytes = 0;
};

/// A program run to its end by RunToEnd.
struct RunResult {
  int exec_errno = 0;        ///< Subprocess::exec_errno; nothing ran when not 0
  ProcessStatus status;      ///< how it ended (SIGKILL when timed out)
  bool timed_out = false;    ///< killed at RunLimits::timeout_s
  std::string output;        ///< its piped stdout (with stderr when merged)
  std::string error_output;  ///< its piped stderr
};

/// Starts `options` (Subprocess::Spawn), reads its piped output until every pipe reaches end
/// of file (or the timeout), and waits for it; at the timeout the child still running is
/// killed (SIGKILL: its group when it has its own). Output and waiting alone count against
/// the timeout: a child that exited while a process it started still holds the pipes is
/// waited for, not killed. Throws as Spawn does.
RunResult RunToEnd(const SpawnOptions& options, const RunLimits& limits = {});

/// Replaces this process with `path` (execve), `argv` and `env` marshalled here; returns
/// only when that failed, with its errno.
int ExecInPlace(const std::string& path, const std::vector<std::string>& argv,
                const Environment& env);
/// As above with this process's environment.
int ExecInPlace(const std::string& path, const std::vector<std::string>& argv);

/// Writes all of `data` to `fd` as a child's relayed output and the lines around it are
/// written: EINTR is retried, a full non-blocking descriptor (a terminal, a pipe) is waited
/// for up to a second, and any other error ends the write without a word (a closed
/// terminal or reader must not stop a supervisor; its log still gets the line).
void WriteBestEffort(int fd, const std::string& data);

}  // namespace ringpilot::base
