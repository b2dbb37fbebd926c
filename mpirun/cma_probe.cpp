#include "mpirun/cma_probe.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>

#include "base/subprocess.h"

namespace ringpilot::mpirun {
namespace {

// Forked children share this address; the target stores the marker in its own copy, so
// the reader sees the marker only if it really read the target's memory.
volatile uint64_t probe_cell = 0;
constexpr uint64_t kMarker = 0x52494e4750494c54ULL;  // "RINGPILT"

// A pipe whose ends are closed when it goes (each process closes the ends it does not use).
struct Pipe {
  int read = -1;
  int write = -1;
  Pipe() {
    int fds[2];
    if (pipe(fds) == 0) {
      read = fds[0];
      write = fds[1];
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  bool ok() const { return read >= 0; }
  void CloseRead() {
    if (read >= 0) close(read);
    read = -1;
  }
  void CloseWrite() {
    if (write >= 0) close(write);
    write = -1;
  }
};

// The target child: marks itself traceable, stores the marker, says so, and waits until
// the parent closes `done`.
int RunTarget(int ready_fd, int done_fd) {
#ifdef PR_SET_PTRACER
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
  probe_cell = kMarker;
  const char byte = 1;
  (void)!write(ready_fd, &byte, 1);
  char sink;
  (void)!read(done_fd, &sink, 1);  // until the parent closes its end
  return 0;
}

// The reader child: 0 when it read the marker out of the target.
int RunReader(pid_t target, int ready_fd) {
  char byte = 0;
  if (read(ready_fd, &byte, 1) != 1) return 2;
  uint64_t value = 0;
  iovec local{&value, sizeof value};
  iovec remote{const_cast<uint64_t*>(&probe_cell), sizeof value};
  const ssize_t n = process_vm_readv(target, &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(sizeof value) && value == kMarker ? 0 : 1;
}

}  // namespace

bool CrossMemoryAttachWorks() {
  Pipe ready, done;
  if (!ready.ok() || !done.ok()) return false;
  try {
    base::Subprocess target = base::Subprocess::Fork([&] {
      ready.CloseRead();
      done.CloseWrite();
      return RunTarget(ready.write, done.read);
    });
    ready.CloseWrite();
    done.CloseRead();
    bool works = false;
    try {
      base::Subprocess reader = base::Subprocess::Fork([&] {
        done.CloseWrite();
        return RunReader(target.pid(), ready.read);
      });
      works = reader.Wait().Succeeded();
    } catch (const base::SpawnError&) {
    }
    ready.CloseRead();
    done.CloseWrite();  // lets the target return from its read and exit
    target.Wait();
    return works;
  } catch (const base::SpawnError&) {
    return false;
  }
}

}  // namespace ringpilot::mpirun
