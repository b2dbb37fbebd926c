#include "trainer/startup/host_memory.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ringpilot::trainer::startup {
namespace {

// A variable the user set to steer malloc, or null.
const char* UserMallocSetting(std::string* value) {
  for (const char* name : {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                           "MALLOC_TOP_PAD_"}) {
    if (const char* v = std::getenv(name)) {
      *value = v;
      return name;
    }
  }
  if (const char* v = std::getenv("GLIBC_TUNABLES"); v && std::strstr(v, "glibc.malloc.")) {
    *value = v;
    return "GLIBC_TUNABLES";
  }
  if (const char* v = std::getenv("LD_PRELOAD")) {
    for (const char* lib : {"jemalloc", "tcmalloc", "mimalloc"}) {
      if (std::strstr(v, lib)) {
        *value = v;
        return "LD_PRELOAD";
      }
    }
  }
  return nullptr;
}

}  // namespace

HostMemoryPolicy ConfigureHostMemory(bool retain) {
  if (!retain)
    return {false, "host memory: glibc malloc defaults (train.retain_host_memory false)"};
  std::string value;
  if (const char* name = UserMallocSetting(&value)) {
    return {false, std::string("host memory: left as ") + name + "=" + value + " sets it"};
  }
#if defined(__GLIBC__)
  // Both calls only fail for out-of-range values, which these are not; check anyway so
  // the log never claims what did not happen.
  const bool ok = mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, -1) != 0;
  if (!ok) return {false, "host memory: mallopt refused; glibc malloc defaults kept"};
  return {true, "host memory: freed blocks kept for reuse (glibc malloc: no mmap, no trim)"};
#else
  return {false, "host memory: not glibc; the C library's allocator is left as it is"};
#endif
}

}  // namespace ringpilot::trainer::startup
