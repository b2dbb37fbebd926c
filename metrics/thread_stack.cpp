// civetweb creates its threads with a fixed stack size chosen when Debian built it
// (USE_STACK_SIZE, ~100 KiB). glibc carves a thread's static TLS out of that stack,
// and a process that loads the CUDA build of LibTorch carries more static TLS than
// that, so every civetweb thread fails to start (pthread_create returns EINVAL and the
// exporter reports "Cannot create threads"). Interposing pthread_attr_setstacksize in
// the executable raises small requests to a floor that leaves room for the TLS; the
// definition lands in the executable because the exporter references this file.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>

namespace ringpilot::metrics {
/// Smallest stack a thread of this process is given when its creator asks for less.
constexpr size_t kMinThreadStackBytes = 4u << 20;
void LinkThreadStackFloor() {}
}  // namespace ringpilot::metrics

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  using Fn = int (*)(pthread_attr_t*, size_t);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (real == nullptr) return 0;  // keep the default stack, which is large enough
  return real(attr, std::max(size, ringpilot::metrics::kMinThreadStackBytes));
}
