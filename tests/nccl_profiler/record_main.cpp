// nccl_profiler_record: one rank of a program as NCCL would report it to the built
// libringpilot-nccl-profiler.so, through the plugin's v5 function table, so that tests of
// what reads logs/rank-N.nccl.json (diagnose, the failure report, the hang watch) get files
// the real plugin wrote.
//
//   nccl_profiler_record SO RUN_DIR RANK WORLD COLLECTIVES [--late R] [--stuck R] [--abort]
//
// Every rank enqueues COLLECTIVES all-reduces of 4 MiB (fp32) on one world communicator,
// each on 2 kernel channels with GPU timestamps 10 ms apart per sequence number. Rank R of
// --late arrives 2 ms after the others at every one: its kernel runs 1 ms, the others' 3 ms
// (they wait for it inside the kernel); 10 ms pass on the wall clock between collectives too.
// With --stuck R, the other ranks enqueue one more
// all-reduce that never completes (rank R never arrives). --abort finalizes the
// communicator at the end (as ncclCommAbort does); otherwise the process exits with the
// communicator alive, and the plugin writes the file at exit.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "nccl_profiler/profiler_abi.h"

namespace abi = ringpilot::nccl_profiler::abi;

namespace {

constexpr uint64_t kWorld = 0x00000000c0ffee00ull;

int Usage() {
  std::fprintf(stderr,
               "usage: nccl_profiler_record SO RUN_DIR RANK WORLD COLLECTIVES [--late R] "
               "[--stuck R] [--abort]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) return Usage();
  const std::string so = argv[1], run_dir = argv[2];
  const int rank = std::atoi(argv[3]), world = std::atoi(argv[4]);
  const int collectives = std::atoi(argv[5]);
  int late = -1, stuck = -1;
  bool abort = false;
  for (int i = 6; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--late" && i + 1 < argc) {
      late = std::atoi(argv[++i]);
    } else if (a == "--stuck" && i + 1 < argc) {
      stuck = std::atoi(argv[++i]);
    } else if (a == "--abort") {
      abort = true;
    } else {
      return Usage();
    }
  }
  // The plugin's settings: this rank's stats file, no HTTP endpoint.
  ::setenv("RINGPILOT_RUN_DIR", run_dir.c_str(), 1);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::unsetenv("RINGPILOT_METRICS_PORT");
  ::unsetenv("RINGPILOT_METRICS_PORT_BASE");
  void* lib = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "nccl_profiler_record: %s\n", ::dlerror());
    return 1;
  }
  auto* p = static_cast<abi::ProfilerV5*>(::dlsym(lib, "ncclProfiler_v5"));
  if (p == nullptr) return 1;
  void* ctx = nullptr;
  int mask = 0;
  p->init(&ctx, kWorld, &mask, "world", 1, world, rank, nullptr);
  if (ctx == nullptr) return 1;

  const auto enqueue = [&]() {
    abi::EventDescrV5 api{};
    api.type = abi::kCollApi;
    api.collApi.func = "AllReduce";
    void* api_handle = nullptr;
    p->startEvent(ctx, &api_handle, &api);
    abi::EventDescrV5 d{};
    d.type = abi::kColl;
    d.parentObj = api_handle;
    d.coll.func = "AllReduce";
    d.coll.count = 1 << 20;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = 2;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* task = nullptr;
    p->startEvent(ctx, &task, &d);
    p->stopEvent(task);
    p->stopEvent(api_handle);
    return task;
  };
  const auto channel = [&](void* task, uint64_t start, uint64_t stop) {
    abi::EventDescrV5 d{};
    d.type = abi::kKernelCh;
    d.parentObj = task;
    d.kernelCh.pTimer = start;
    void* ch = nullptr;
    p->startEvent(ctx, &ch, &d);
    abi::EventStateArgsV4 args{};
    args.kernelCh.pTimer = stop;
    p->recordEventState(ch, abi::kKernelChStop, &args);
    p->stopEvent(ch);
  };
  for (int k = 1; k <= collectives; ++k) {
    const uint64_t t = 1'000'000'000ull + static_cast<uint64_t>(k) * 10'000'000ull;
    const uint64_t start = rank == late ? t + 2'000'000 : t;
    const uint64_t stop = t + 3'000'000;
    void* task = enqueue();
    channel(task, start, stop);
    channel(task, start + 1000, stop);
    // The 10 ms between collectives pass on the wall clock too, so that the kernel time
    // is a share of the process's time as in a real program.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (stuck >= 0 && rank != stuck) enqueue();  // the peers wait in it for the stuck rank
  if (abort) p->finalize(ctx);
  return 0;
}
