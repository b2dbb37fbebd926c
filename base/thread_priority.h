// CPU priority of helper threads: a scrape or a decode worker must not take a core from the
// threads that keep the GPU busy (the training thread, nvJPEG's own threads).
#pragma once

namespace ringpilot::base {

/// Sets the calling thread's nice value to `nice` (Linux keeps it per thread; threads it
/// creates later inherit it). 0 leaves it as it is. Raising nice needs no privilege; a
/// failure (a seccomp profile, a value out of range) leaves the priority unchanged and is
/// not reported: the thread still works, only without yielding. Thread-safe.
void SetThisThreadNice(int nice);

}  // namespace ringpilot::base
