// How a rank's host (CPU) memory is served between steps. A CPU training step allocates
// and frees the same large tensors every step (bert-tiny's MLM logits are 37 MB at batch
// 16); glibc serves blocks over its mmap threshold (at most 32 MB) with a fresh mmap and
// unmaps them on free, and trims the heap top beyond its trim threshold, so each step
// page-faults them in again: 16 ms per 37 MB on the CI host, ~8-11% of a bert-tiny step.
#pragma once

#include <string>

namespace ringpilot::trainer::startup {

/// Outcome of ConfigureHostMemory, for the rank's log.
struct HostMemoryPolicy {
  bool applied = false;  ///< glibc malloc now keeps freed memory
  std::string detail;    ///< one line: what was done, or why nothing was
};

/// `retain` (train.retain_host_memory): glibc malloc stops using mmap for large blocks and
/// stops trimming the heap, so freed memory is reused without page faults; the process's
/// resident size then stays at its peak. Nothing changes when `retain` is false, when the
/// environment already tunes malloc (MALLOC_MMAP_MAX_, MALLOC_MMAP_THRESHOLD_,
/// MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, or glibc.malloc tunables in GLIBC_TUNABLES),
/// when LD_PRELOAD brings another allocator (jemalloc, tcmalloc, mimalloc), or when the C
/// library is not glibc: the user's choice wins. Call once, early, before other threads
/// allocate. Not thread-safe.
HostMemoryPolicy ConfigureHostMemory(bool retain);

}  // namespace ringpilot::trainer::startup
