// What the NCCL profiler plugin costs NCCL's threads per operation: the calls NCCL makes for
// one collective on C kernel channels (op start and stop on the enqueueing thread; channel
// start, stop timestamp and stop on the proxy thread), through CommStats as plugin.cpp
// makes them (GPU timestamps given, so no host clock read per channel), alone and while
// another thread snapshots (scrapes) nonstop, and the cost of one snapshot of the
// communicator.
//
// Usage: ringpilot-bench-nccl-profiler [--ops N] [--channels C]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "nccl_profiler/comm_stats.h"
#include "nccl_profiler/op_table.h"

namespace np = ringpilot::nccl_profiler;

namespace {

double NsPerOp(np::CommStats& c, int ops, int channels) {
  np::OpStart o;
  o.op = np::ParseNcclOp("AllReduce");
  o.bytes = 25 << 20;
  o.algo = np::ParseAlgo("RING");
  o.proto = np::ParseProto("SIMPLE");
  o.channels = channels;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < ops; ++i) {
    np::Handle* h = c.StartOp(o, np::MonotonicNs());
    if (h == nullptr) continue;
    c.StopOp(h->slot);
    for (int ch = 0; ch < channels; ++ch) {
      np::Handle* k = c.StartChannel(h->slot, 1000 + ch, 0);
      c.RecordChannelStop(k->slot, 5000 + ch, 0);
      c.StopChannel(k->slot);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s * 1e9 / ops;
}

}  // namespace

int main(int argc, char** argv) {
  int ops = 2'000'000;
  int channels = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ops") == 0) ops = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--channels") == 0) channels = std::atoi(argv[i + 1]);
  }
  np::CommStats c(np::CommIdentity{1, "bench", 0, 8, 1}, np::Timing::kKernelChannels);
  NsPerOp(c, ops / 10, channels);  // warm
  std::printf("one op on %d channels (%d ops): %.1f ns, alone\n", channels, ops,
              NsPerOp(c, ops, channels));
  std::atomic<bool> stop{false};
  std::atomic<long> snapshots{0};
  std::thread scraper([&] {
    while (!stop.load()) {
      c.Snapshot();
      snapshots.fetch_add(1);
    }
  });
  const double busy = NsPerOp(c, ops, channels);
  stop = true;
  scraper.join();
  std::printf("one op on %d channels (%d ops): %.1f ns, with %ld snapshots alongside\n", channels,
              ops, busy, snapshots.load());
  const int reps = 2000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) c.Snapshot();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("one snapshot (%d slots scanned): %.1f us\n", np::CommStats::kDefaultSlots,
              s * 1e6 / reps);
  return 0;
}
