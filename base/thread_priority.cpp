#include "base/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ringpilot::base {

void SetThisThreadNice(int nice) {
  if (nice == 0) return;
  // PRIO_PROCESS with a thread id changes that thread alone on Linux (not POSIX's whole
  // process), which is what lets helper threads yield while the training thread does not.
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  [[maybe_unused]] const int rc = ::setpriority(PRIO_PROCESS, tid, nice);
}

}  // namespace ringpilot::base
