#include "base/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ringpilot::base {
namespace {

// A handler cannot carry state: the pipe is process-wide, hence one SignalPipe at a time.
int g_pipe[2] = {-1, -1};

extern "C" void WriteSignalByte(int sig) {
  const int saved_errno = errno;
  const char byte = static_cast<char>(sig);
  if (g_pipe[1] >= 0) {
    // A full pipe drops the byte: the reader has plenty pending already.
    [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

SignalPipe::SignalPipe(const std::vector<int>& signals, const std::vector<int>& even_if_ignored) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &previous_sigpipe_);
  if (signals.empty()) return;
  if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    ::sigaction(SIGPIPE, &previous_sigpipe_, nullptr);
    throw std::runtime_error(std::string("cannot create the signal pipe: ") + std::strerror(err));
  }
  struct sigaction on {};
  on.sa_handler = WriteSignalByte;
  sigemptyset(&on.sa_mask);
  on.sa_flags = SA_RESTART;
  for (const int sig : signals) {
    struct sigaction current {};
    ::sigaction(sig, nullptr, &current);
    const bool forced =
        std::find(even_if_ignored.begin(), even_if_ignored.end(), sig) != even_if_ignored.end();
    if (current.sa_handler == SIG_IGN && !forced) continue;
    Installed entry{sig, {}};
    if (::sigaction(sig, &on, &entry.previous) == 0) installed_.push_back(entry);
  }
}

SignalPipe::~SignalPipe() {
  for (auto it = installed_.rbegin(); it != installed_.rend(); ++it) {
    ::sigaction(it->signal, &it->previous, nullptr);
  }
  ::sigaction(SIGPIPE, &previous_sigpipe_, nullptr);
  for (int& fd : g_pipe) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

int SignalPipe::fd() const { return g_pipe[0]; }

std::vector<int> SignalPipe::Take() {
  std::vector<int> signals;
  if (g_pipe[0] < 0) return signals;
  char buf[64];
  ssize_t n;
  while ((n = ::read(g_pipe[0], buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; ++i) signals.push_back(static_cast<unsigned char>(buf[i]));
  }
  return signals;
}

}  // namespace ringpilot::base
