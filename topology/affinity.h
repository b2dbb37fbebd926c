// The calling process's CPU affinity: read it (sched_getaffinity) and bind every thread of
// the process to a CPU set (sched_setaffinity on each task of /proc/self/task; threads
// started later inherit it). Linux only; POSIX calls, no std::filesystem (LibTorch-linked
// code calls these).
#pragma once

#include <string>
#include <vector>

namespace ringpilot::topology {

/// CPUs the calling thread may run on, ascending; empty when it cannot be read.
std::vector<int> CurrentAffinity();

/// How many CPUs the calling thread may run on (the size of CurrentAffinity()); 1 when it
/// cannot be read. The one answer to "how many cores does this rank have" for thread pools.
int BoundCpuCount();

/// Binds every thread of this process to `cpus`. Throws std::runtime_error naming the CPUs
/// and the error when the calling thread cannot be bound (other threads that vanished
/// meanwhile are skipped).
void BindProcess(const std::vector<int>& cpus);

}  // namespace ringpilot::topology
