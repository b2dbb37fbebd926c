// CommStats, the per-communicator core of the NCCL profiler plugin, driven with the event
// sequences NCCL produces (profiler API v4/v5: op start/stop, kernel channel start, stop
// timestamp, channel stop), and the op/size tables it labels them with.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/environment.h"
#include "comm/collective_op.h"
#include "nccl_profiler/comm_stats.h"
#include "nccl_profiler/op_table.h"
#include "nccl_profiler/settings.h"

namespace ringpilot::nccl_profiler {
namespace {

constexpr int64_t kMiB = 1 << 20;

CommIdentity World(int nranks) { return CommIdentity{0xabcdefull, "world", 1, nranks, 1}; }

OpStart AllReduce(int64_t bytes, int channels) {
  OpStart o;
  o.op = NcclOp::kAllReduce;
  o.bytes = bytes;
  o.algo = ParseAlgo("RING");
  o.proto = ParseProto("SIMPLE");
  o.channels = channels;
  return o;
}

// One operation on `channels` channels, each running on the GPU from gpu_start to
// gpu_start + gpu_ns; returns its slot still in flight (enqueued, kernels not reported).
Slot* Enqueue(CommStats& c, const OpStart& o) {
  Handle* h = c.StartOp(o, MonotonicNs());
  EXPECT_NE(h, nullptr);
  if (h == nullptr) return nullptr;
  EXPECT_EQ(h->kind, HandleKind::kOp);
  c.StopOp(h->slot);
  return h->slot;
}

void RunChannel(CommStats& c, Slot* slot, uint64_t gpu_start, uint64_t gpu_stop) {
  Handle* ch = c.StartChannel(slot, gpu_start, MonotonicNs());
  ASSERT_EQ(ch->kind, HandleKind::kChannel);
  c.RecordChannelStop(ch->slot, gpu_stop, MonotonicNs());
  c.StopChannel(ch->slot);
}

const CellSnapshot* FindCell(const CommSnapshot& s, NcclOp op) {
  for (const CellSnapshot& c : s.cells) {
    if (c.op == op) return &c;
  }
  return nullptr;
}

TEST(CommStats, CollectiveCompletesWhenEveryChannelStoppedWithGpuSpanAndBusBandwidth) {
  CommStats c(World(4), Timing::kKernelChannels);
  Slot* op = Enqueue(c, AllReduce(8 * kMiB, 2));
  ASSERT_NE(op, nullptr);
  RunChannel(c, op, 1'000'000, 1'400'000);
  CommSnapshot mid = c.Snapshot();
  EXPECT_EQ(mid.in_flight, 1u);  // one channel still to report
  EXPECT_TRUE(mid.cells.empty());
  RunChannel(c, op, 1'100'000, 1'500'000);

  const CommSnapshot s = c.Snapshot();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_FALSE(s.has_oldest);
  EXPECT_EQ(s.coll_started, 1u);
  EXPECT_EQ(s.coll_completed, 1u);
  ASSERT_EQ(s.cells.size(), 1u);
  const CellSnapshot& cell = s.cells[0];
  EXPECT_EQ(cell.count, 1u);
  EXPECT_EQ(cell.bytes, static_cast<uint64_t>(8 * kMiB));
  EXPECT_EQ(cell.timed_count, 1u);
  EXPECT_STREQ(comm::SizeBucketName(cell.size_bucket), "4MiB-16MiB");
  EXPECT_STREQ(AlgoLabel(cell.algo), "ring");
  EXPECT_STREQ(ProtoLabel(cell.proto), "simple");
  // First channel start to last channel stop: 0.5 ms of GPU time.
  EXPECT_DOUBLE_EQ(cell.seconds, 500e-6);
  // nccl-tests: busbw = bytes / time * 2(n-1)/n.
  EXPECT_DOUBLE_EQ(cell.busbw, 8.0 * kMiB / 500e-6 * 1.5);
  ASSERT_EQ(s.histograms.size(), 1u);
  EXPECT_EQ(s.histograms[0].count, 1u);
  EXPECT_DOUBLE_EQ(s.histograms[0].sum_seconds, 500e-6);
  // The trainer's bounds (metrics/buckets.h): 0.5 ms goes to the first bound >= it, as
  // prometheus-cpp's Observe would put it; no other bucket counts it.
  int want = 0;
  while (want < kHistogramBounds && s.histograms[0].sum_seconds > HistogramBound(want)) ++want;
  EXPECT_DOUBLE_EQ(HistogramBound(want), 5e-4);
  for (int i = 0; i <= kHistogramBounds; ++i) {
    EXPECT_EQ(s.histograms[0].buckets[i], i == want ? 1u : 0u) << "bucket " << i;
  }
}

TEST(CommStats, ChannelsMayReportBeforeNcclStopsTheEnqueueEvent) {
  CommStats c(World(2), Timing::kKernelChannels);
  Handle* h = c.StartOp(AllReduce(kMiB, 1), MonotonicNs());
  ASSERT_NE(h, nullptr);
  RunChannel(c, h->slot, 10, 2010);
  EXPECT_EQ(c.Snapshot().coll_completed, 0u);  // NCCL still holds the op handle
  c.StopOp(h->slot);
  const CommSnapshot s = c.Snapshot();
  EXPECT_EQ(s.coll_completed, 1u);
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_DOUBLE_EQ(s.cells[0].seconds, 2e-6);
}

TEST(CommStats, OutOfOrderCompletionKeepsTheOlderOperationInFlight) {
  CommStats c(World(8), Timing::kKernelChannels);
  Slot* first = Enqueue(c, AllReduce(kMiB, 2));
  Slot* second = Enqueue(c, AllReduce(kMiB, 1));
  RunChannel(c, first, 100, 200);   // one of first's two channels
  RunChannel(c, second, 300, 400);  // second finishes before first
  CommSnapshot s = c.Snapshot();
  EXPECT_EQ(s.coll_started, 2u);
  EXPECT_EQ(s.coll_completed, 2u);  // the highest completed
  EXPECT_EQ(s.in_flight, 1u);
  ASSERT_TRUE(s.has_oldest);
  EXPECT_EQ(s.oldest.seq, 1u);
  EXPECT_EQ(s.oldest.op, NcclOp::kAllReduce);
  RunChannel(c, first, 150, 600);
  s = c.Snapshot();
  EXPECT_EQ(s.in_flight, 0u);
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_EQ(s.cells[0].count, 2u);
  EXPECT_DOUBLE_EQ(s.cells[0].seconds, (600 - 100 + 400 - 300) * 1e-9);
}

TEST(CommStats, StoppedRankShowsTheOperationItIsStuckInWithItsSequenceNumber) {
  CommStats c(World(4), Timing::kKernelChannels);
  for (int i = 0; i < 3; ++i) {
    Slot* op = Enqueue(c, AllReduce(64 << 10, 1));
    RunChannel(c, op, 1000 * i, 1000 * i + 500);
  }
  OpStart bcast = AllReduce(4096, 1);
  bcast.op = NcclOp::kBroadcast;
  Enqueue(c, bcast);  // enqueued; its kernel never reports (the peers never arrive)
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const CommSnapshot s = c.Snapshot();
  EXPECT_EQ(s.coll_started, 4u);
  EXPECT_EQ(s.coll_completed, 3u);
  EXPECT_EQ(s.in_flight, 1u);
  ASSERT_TRUE(s.has_oldest);
  EXPECT_EQ(s.oldest.seq, 4u);
  EXPECT_EQ(s.oldest.op, NcclOp::kBroadcast);
  EXPECT_GE(s.oldest.age_seconds, 0.015);
  EXPECT_GT(s.oldest.start_unix, 1.7e9);
}

TEST(CommStats, PointToPointHasItsOwnSequenceAndNoAlgorithm) {
  CommStats c(World(2), Timing::kKernelChannels);
  OpStart send;
  send.op = NcclOp::kSend;
  send.bytes = 1000;
  send.channels = 1;
  OpStart recv = send;
  recv.op = NcclOp::kRecv;
  RunChannel(c, Enqueue(c, send), 1000, 2000);
  Slot* r = Enqueue(c, recv);
  Slot* coll = Enqueue(c, AllReduce(kMiB, 1));
  RunChannel(c, coll, 1000, 5000);
  CommSnapshot s = c.Snapshot();
  EXPECT_EQ(s.p2p_started, 2u);
  EXPECT_EQ(s.p2p_completed, 1u);
  EXPECT_EQ(s.coll_started, 1u);
  EXPECT_EQ(s.coll_completed, 1u);
  ASSERT_TRUE(s.has_oldest);
  EXPECT_TRUE(s.oldest.p2p);
  EXPECT_EQ(s.oldest.op, NcclOp::kRecv);
  RunChannel(c, r, 1000, 3000);
  s = c.Snapshot();
  const CellSnapshot* sent = FindCell(s, NcclOp::kSend);
  ASSERT_NE(sent, nullptr);
  EXPECT_STREQ(AlgoLabel(sent->algo), "none");
  // send/recv: bus bandwidth = algorithm bandwidth.
  EXPECT_DOUBLE_EQ(sent->busbw, 1000 / 1e-6);
}

TEST(CommStats, AbortMidCollectiveCountsItAbandonedAndNothingInFlight) {
  CommStats c(World(4), Timing::kKernelChannels);
  Slot* op = Enqueue(c, AllReduce(kMiB, 2));
  c.StartChannel(op, 100, MonotonicNs());  // one channel started, then ncclCommAbort
  c.Finalize();
  const CommSnapshot s = c.Snapshot();
  EXPECT_TRUE(s.finalized);
  EXPECT_EQ(s.abandoned, 1u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_TRUE(s.cells.empty());
  EXPECT_EQ(s.coll_completed, 0u);
}

TEST(CommStats, FullPoolCountsUntrackedOperationsAndRecovers) {
  CommStats c(World(2), Timing::kKernelChannels, /*slots=*/2);
  Slot* a = Enqueue(c, AllReduce(kMiB, 1));
  Slot* b = Enqueue(c, AllReduce(kMiB, 1));
  EXPECT_EQ(c.StartOp(AllReduce(kMiB, 1), MonotonicNs()), nullptr);
  EXPECT_EQ(c.Snapshot().dropped, 1u);
  RunChannel(c, a, 0, 10);
  Slot* d = Enqueue(c, AllReduce(kMiB, 1));  // reuses a's slot
  ASSERT_NE(d, nullptr);
  RunChannel(c, b, 0, 10);
  RunChannel(c, d, 0, 10);
  const CommSnapshot s = c.Snapshot();
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_EQ(s.cells[0].count, 3u);
  EXPECT_EQ(s.coll_started, 3u);  // the untracked one has no sequence number
  EXPECT_EQ(s.in_flight, 0u);
}

TEST(CommStats, ExtraEventsForACompletedOperationAreIgnored) {
  CommStats c(World(2), Timing::kKernelChannels);
  Slot* op = Enqueue(c, AllReduce(kMiB, 1));
  RunChannel(c, op, 0, 10);
  c.StopChannel(op);  // a stop NCCL should not send
  c.StopOp(op);
  const CommSnapshot s = c.Snapshot();
  EXPECT_EQ(s.cells[0].count, 1u);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST(CommStats, WithoutGpuTimestampsTheProxyThreadsHostTimesCount) {
  CommStats c(World(2), Timing::kKernelChannels);
  Slot* op = Enqueue(c, AllReduce(kMiB, 1));
  Handle* ch = c.StartChannel(op, 0, 1'000);
  c.RecordChannelStop(ch->slot, 0, 4'000);
  c.StopChannel(ch->slot);
  const CommSnapshot s = c.Snapshot();
  EXPECT_DOUBLE_EQ(s.cells[0].seconds, 3e-6);
}

TEST(CommStats, EnqueueOnlyTimingCountsAtStopWithoutTime) {
  CommStats c(CommIdentity{}, Timing::kEnqueueOnly);
  c.LearnIdentity(0x1234, 3);
  Enqueue(c, AllReduce(kMiB, 4));  // channels are not awaited in this mode
  const CommSnapshot s = c.Snapshot();
  EXPECT_EQ(s.id.hash, 0x1234u);
  EXPECT_EQ(s.id.rank, 3);
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_EQ(s.cells[0].count, 1u);
  EXPECT_EQ(s.cells[0].timed_count, 0u);
  EXPECT_EQ(s.cells[0].busbw, 0.0);
  EXPECT_TRUE(s.histograms.empty());
  EXPECT_EQ(s.coll_completed, 1u);
}

// NCCL's enqueueing thread and its proxy thread run the hooks at the same time as a
// scrape; every operation must be counted exactly once.
TEST(CommStats, ConcurrentEnqueueCompletionAndSnapshotsCountEveryOperationOnce) {
  CommStats c(World(4), Timing::kKernelChannels, 64);
  constexpr int kOps = 20000;
  std::atomic<bool> done{false};
  std::vector<Slot*> queue(kOps, nullptr);
  std::atomic<int> enqueued{0};
  std::thread proxy([&] {
    for (int i = 0; i < kOps; ++i) {
      while (enqueued.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      if (queue[i] != nullptr) RunChannel(c, queue[i], 100, 300);
    }
  });
  std::thread scraper([&] {
    while (!done.load()) {
      const CommSnapshot s = c.Snapshot();
      EXPECT_LE(s.coll_completed, s.coll_started);
    }
  });
  int tracked = 0;
  for (int i = 0; i < kOps; ++i) {
    Handle* h = c.StartOp(AllReduce(kMiB, 1), MonotonicNs());
    if (h != nullptr) {
      c.StopOp(h->slot);
      ++tracked;
    }
    queue[i] = h ? h->slot : nullptr;
    enqueued.store(i + 1, std::memory_order_release);
  }
  proxy.join();
  done = true;
  scraper.join();
  const CommSnapshot s = c.Snapshot();
  ASSERT_EQ(s.cells.size(), 1u);
  EXPECT_EQ(s.cells[0].count, static_cast<uint64_t>(tracked));
  EXPECT_EQ(s.cells[0].count + s.dropped, static_cast<uint64_t>(kOps));
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_DOUBLE_EQ(s.cells[0].seconds, tracked * 200e-9);
}

TEST(OpTable, NcclNamesMapToTheTrainersLabelsAndNcclTestsFactors) {
  EXPECT_EQ(ParseNcclOp("AllReduce"), NcclOp::kAllReduce);
  EXPECT_EQ(ParseNcclOp("AlltoAll"), NcclOp::kAllToAll);
  EXPECT_EQ(ParseNcclOp("Recv"), NcclOp::kRecv);
  EXPECT_EQ(ParseNcclOp("PutSignal"), NcclOp::kOther);
  EXPECT_EQ(ParseNcclOp(nullptr), NcclOp::kOther);
  EXPECT_STREQ(OpLabel(NcclOp::kAllReduce), comm::ToString(comm::CollectiveOp::kAllReduce));
  EXPECT_STREQ(OpLabel(NcclOp::kReduceScatter), "reduce_scatter");
  EXPECT_STREQ(OpLabel(NcclOp::kOther), "other");
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(NcclOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(NcclOp::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(NcclOp::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(NcclOp::kSend, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(NcclOp::kAllReduce, 0), 0.0);  // ranks unknown
  // All-gather: NCCL reports the per-rank count, nccl-tests' size is the whole output.
  EXPECT_EQ(MessageBytes(NcclOp::kAllGather, 1000, 4, 8), 32000);
  EXPECT_EQ(MessageBytes(NcclOp::kAllReduce, 1000, 2, 8), 2000);
  EXPECT_EQ(DataTypeSize("ncclBfloat16"), 2);
  EXPECT_EQ(DataTypeSize("ncclFloat32"), 4);
  EXPECT_EQ(DataTypeSize("Unknown"), 0);
  EXPECT_EQ(ParseAlgo("NVLS_TREE"), 5);
  EXPECT_STREQ(AlgoLabel(ParseAlgo("SOMETHING_NEW")), "other");
  EXPECT_STREQ(ProtoLabel(ParseProto("LL128")), "ll128");
  EXPECT_STREQ(ProtoLabel(ParseProto(nullptr)), "none");
}

TEST(OpTable, SizeBucketsAreTheTrainers) {
  EXPECT_STREQ(comm::SizeBucket(0), "lt64KiB");
  EXPECT_STREQ(comm::SizeBucket((64 << 10) - 1), "lt64KiB");
  EXPECT_STREQ(comm::SizeBucket(64 << 10), "64KiB-1MiB");
  EXPECT_STREQ(comm::SizeBucket(25 * kMiB), "16MiB-64MiB");
  EXPECT_STREQ(comm::SizeBucket(64 * kMiB), "ge64MiB");
  EXPECT_STREQ(comm::SizeBucketName(comm::kSizeBuckets), "unknown");
}

TEST(Settings, ReadsPortBindRunDirRankAndJob) {
  const Settings s = SettingsFromEnvironment({{"RINGPILOT_METRICS_PORT", "9403"},
                                              {"RINGPILOT_METRICS_BIND", "0.0.0.0"},
                                              {"RINGPILOT_RUN_DIR", "/runs/a"},
                                              {"RANK", "3"},
                                              {"LOCAL_RANK", "1"},
                                              {"RINGPILOT_JOB_NAME", "llm"}},
                                             /*first_comm_rank=*/0);
  EXPECT_EQ(s.port, 9403);
  EXPECT_EQ(s.bind, "0.0.0.0");
  EXPECT_EQ(s.run_dir, "/runs/a");
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.job, "llm");
  const Settings file_only = SettingsFromEnvironment({{"RINGPILOT_RUN_DIR", "/r"}}, 6);
  EXPECT_EQ(file_only.port, -1);
  EXPECT_EQ(file_only.rank, 6);  // the first communicator's rank stands in for RANK
  EXPECT_EQ(file_only.local_rank, -1);
  EXPECT_EQ(file_only.job, "exec");
  EXPECT_EQ(file_only.bind, "auto");  // the node's address under Slurm/Kubernetes
  EXPECT_FALSE(file_only.multi_node);
  EXPECT_EQ(file_only.file_sd_dir, "");
  const Settings nodes = SettingsFromEnvironment({{"RINGPILOT_RUN_DIR", "/r"},
                                                  {"WORLD_SIZE", "16"},
                                                  {"LOCAL_WORLD_SIZE", "8"},
                                                  {"RINGPILOT_METRICS_FILE_SD_DIR", "/sd"}},
                                                 0);
  EXPECT_TRUE(nodes.multi_node);  // "auto" binds the node's address
  EXPECT_EQ(nodes.file_sd_dir, "/sd");
}

TEST(Settings, PortIsBasePlusLocalRankUnlessGivenOutright) {
  // What `ringpilot exec` passes: the base; each process adds its own LOCAL_RANK (the
  // workers of a torchrun under exec have their own), as the trainer's ranks do.
  EXPECT_EQ(SettingsFromEnvironment(
                {{"RINGPILOT_METRICS_PORT_BASE", "18400"}, {"RANK", "13"}, {"LOCAL_RANK", "5"}}, 0)
                .port,
            18405);
  // No LOCAL_RANK: RANK, then the first communicator's rank, stand in.
  EXPECT_EQ(
      SettingsFromEnvironment({{"RINGPILOT_METRICS_PORT_BASE", "18400"}, {"RANK", "5"}}, 0).port,
      18405);
  EXPECT_EQ(SettingsFromEnvironment({{"RINGPILOT_METRICS_PORT_BASE", "18400"}}, 2).port, 18402);
  EXPECT_EQ(SettingsFromEnvironment({{"RINGPILOT_METRICS_PORT_BASE", "0"}, {"RANK", "5"}}, 0).port,
            0);
  EXPECT_EQ(SettingsFromEnvironment(
                {{"RINGPILOT_METRICS_PORT_BASE", "18400"}, {"RINGPILOT_METRICS_PORT", "7"}}, 0)
                .port,
            7);
}

TEST(Settings, BadValuesAndNothingToExportAreOneLineErrors) {
  auto error = [](const base::Environment& env) {
    try {
      SettingsFromEnvironment(env, 0);
    } catch (const SettingsError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{"RINGPILOT_METRICS_PORT", "94x"}}),
            "RINGPILOT_METRICS_PORT='94x' is not a number in 0..65535");
  EXPECT_EQ(error({{"RINGPILOT_METRICS_PORT", "70000"}}),
            "RINGPILOT_METRICS_PORT='70000' is not a number in 0..65535");
  EXPECT_EQ(error({{"RINGPILOT_METRICS_PORT", "1"}, {"RANK", "-1"}}),
            "RANK='-1' is not a number in 0..16777216");
  EXPECT_EQ(error({{"RINGPILOT_METRICS_PORT_BASE", "65530"}, {"RANK", "9"}}),
            "RINGPILOT_METRICS_PORT_BASE=65530 + RANK 9 is past port 65535");
  EXPECT_EQ(error({{"RINGPILOT_METRICS_PORT_BASE", "65530"}, {"LOCAL_RANK", "7"}}),
            "RINGPILOT_METRICS_PORT_BASE=65530 + LOCAL_RANK 7 is past port 65535");
  const std::string nothing = error({{"RANK", "0"}});
  EXPECT_NE(nothing.find("nothing to export to"), std::string::npos) << nothing;
  EXPECT_EQ(nothing.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::nccl_profiler
