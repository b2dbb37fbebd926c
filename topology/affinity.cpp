#include "topology/affinity.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "topology/node_topology.h"

namespace ringpilot::topology {
namespace {

constexpr int kMaxCpus = 8192;

struct CpuMask {
  CpuMask() : set(CPU_ALLOC(kMaxCpus)), size(CPU_ALLOC_SIZE(kMaxCpus)) { CPU_ZERO_S(size, set); }
  ~CpuMask() { CPU_FREE(set); }
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;
  cpu_set_t* set;
  std::size_t size;
};

}  // namespace

std::vector<int> CurrentAffinity() {
  CpuMask mask;
  if (::sched_getaffinity(0, mask.size, mask.set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < kMaxCpus; ++c) {
    if (CPU_ISSET_S(c, mask.size, mask.set)) cpus.push_back(c);
  }
  return cpus;
}

int BoundCpuCount() {
  const std::vector<int> cpus = CurrentAffinity();
  return cpus.empty() ? 1 : static_cast<int>(cpus.size());
}

void BindProcess(const std::vector<int>& cpus) {
  CpuMask mask;
  for (int c : cpus) {
    if (c < 0 || c >= kMaxCpus) {
      throw std::runtime_error("cannot bind to CPU " + std::to_string(c) + ": out of range");
    }
    CPU_SET_S(c, mask.size, mask.set);
  }
  if (::sched_setaffinity(0, mask.size, mask.set) != 0) {
    throw std::runtime_error("cannot bind to CPUs " + FormatCpuList(cpus) +
                             ": sched_setaffinity: " + std::strerror(errno));
  }
  // The threads MPI (or anything else) started before us.
  const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return;
  while (const dirent* e = ::readdir(dir)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (tid <= 0 || tid == self) continue;
    ::sched_setaffinity(tid, mask.size, mask.set);  // a thread that just exited: ESRCH, fine
  }
  ::closedir(dir);
}

}  // namespace ringpilot::topology
