// CPU priority of the exporter's threads: a scrape must not take CPU from training.
#pragma once

namespace ringpilot::metrics {

/// Sets the calling thread's nice value to `nice` (Linux keeps it per thread; threads it
/// creates later inherit it). 0 leaves it as it is. Raising nice needs no privilege; a
/// failure (a seccomp profile, a value out of range) leaves the priority unchanged and is
/// not reported: scrapes still work, only without yielding. Thread-safe.
void SetThisThreadNice(int nice);

}  // namespace ringpilot::metrics
