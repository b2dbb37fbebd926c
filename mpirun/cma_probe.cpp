#include "mpirun/cma_probe.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace ringpilot::mpirun {
namespace {

// Forked children share this address; the target stores the marker in its own copy, so
// the reader sees the marker only if it really read the target's memory.
volatile uint64_t probe_cell = 0;
constexpr uint64_t kMarker = 0x52494e4750494c54ULL;  // "RINGPILT"

[[noreturn]] void RunTarget(int ready_fd, int done_fd) {
#ifdef PR_SET_PTRACER
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
  probe_cell = kMarker;
  const char byte = 1;
  (void)!write(ready_fd, &byte, 1);
  char sink;
  (void)!read(done_fd, &sink, 1);  // until the parent closes its end
  _exit(0);
}

[[noreturn]] void RunReader(pid_t target, int ready_fd) {
  char byte = 0;
  if (read(ready_fd, &byte, 1) != 1) _exit(2);
  uint64_t value = 0;
  iovec local{&value, sizeof value};
  iovec remote{const_cast<uint64_t*>(&probe_cell), sizeof value};
  const ssize_t n = process_vm_readv(target, &local, 1, &remote, 1, 0);
  _exit(n == static_cast<ssize_t>(sizeof value) && value == kMarker ? 0 : 1);
}

int WaitStatus(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

bool CrossMemoryAttachWorks() {
  int ready[2], done[2];
  if (pipe(ready) != 0) return false;
  if (pipe(done) != 0) {
    close(ready[0]);
    close(ready[1]);
    return false;
  }
  const pid_t target = fork();
  if (target == 0) {
    close(ready[0]);
    close(done[1]);
    RunTarget(ready[1], done[0]);
  }
  close(ready[1]);
  close(done[0]);
  bool works = false;
  if (target > 0) {
    const pid_t reader = fork();
    if (reader == 0) {
      close(done[1]);
      RunReader(target, ready[0]);
    }
    if (reader > 0) {
      const int status = WaitStatus(reader);
      works = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
  }
  close(ready[0]);
  close(done[1]);  // lets the target return from its read and exit
  if (target > 0) WaitStatus(target);
  return works;
}

}  // namespace ringpilot::mpirun
