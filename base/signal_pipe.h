// Signals turned into bytes on a pipe, for loops that poll() their file descriptors.
#pragma once

#include <csignal>
#include <vector>

namespace ringpilot::base {

/// While it lives, each of `signals` is caught by a handler that only writes the signal's
/// number to a non-blocking self-pipe (async-signal-safe); the owner polls fd() with its
/// other descriptors and reads them back with Take(). A signal that was ignored when the
/// scope began stays ignored (nohup), unless it is in `even_if_ignored`. SIGPIPE is ignored
/// for the scope's life: a closed stdout (a reader gone) must not kill a process that still
/// has children to reap. The destructor restores every previous disposition and closes the
/// pipe.
///
/// One SignalPipe per process at a time (the handler writes to one process-wide pipe); the
/// constructor throws std::runtime_error naming errno when the pipe cannot be made. Not
/// thread-safe: create, poll and destroy it on one thread.
class SignalPipe {
 public:
  explicit SignalPipe(const std::vector<int>& signals,
                      const std::vector<int>& even_if_ignored = {});
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  /// The pipe's read end to poll for POLLIN; -1 with no signals (poll() skips it).
  int fd() const;

  /// The signals received since the last call, oldest first (empty when none).
  std::vector<int> Take();

 private:
  struct Installed {
    int signal;
    struct sigaction previous;
  };
  std::vector<Installed> installed_;
  struct sigaction previous_sigpipe_ {};
};

}  // namespace ringpilot::base
