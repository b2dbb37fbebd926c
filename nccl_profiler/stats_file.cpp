#include "nccl_profiler/stats_file.h"

namespace ringpilot::nccl_profiler {

namespace {

history::NcclInFlight InFlightRecord(const InFlight& o) {
  history::NcclInFlight r;
  r.op = OpLabel(o.op);
  r.seq = o.seq;
  r.start_unix = o.start_unix;
  r.age_seconds = o.age_seconds;
  return r;
}

}  // namespace

history::NcclRecord StatsRecord(const RankLabels& rank, int api_version,
                                const std::vector<CommSnapshot>& comms, double written_unix) {
  history::NcclRecord record;
  record.rank = rank.rank;
  record.node = rank.node;
  record.local_rank = rank.local_rank;
  record.job = rank.job;
  record.profiler_api_version = api_version;
  record.written_unix = written_unix;
  for (const CommSnapshot& s : comms) {
    if (s.id.hash == 0) continue;
    history::NcclCommRecord& c = record.communicators.emplace_back();
    c.comm = CommLabel(s.id.hash);
    c.name = s.id.name;
    c.comm_rank = s.id.rank;
    c.comm_size = s.id.nranks;
    c.nodes = s.id.nnodes;
    c.gpu_timing = s.timing == Timing::kKernelChannels;
    c.finalized = s.finalized;
    c.init_unix = s.init_unix;
    for (const CellSnapshot& cell : s.cells) {
      history::NcclOperationTotals& o = c.operations.emplace_back();
      o.op = OpLabel(cell.op);
      o.size_bucket = comm::SizeBucketName(cell.size_bucket);
      o.algo = AlgoLabel(cell.algo);
      o.proto = ProtoLabel(cell.proto);
      o.count = cell.count;
      o.bytes_total = cell.bytes;
      o.timed_count = cell.timed_count;
      o.seconds_total = cell.seconds;
      o.busbw_bytes_per_second = cell.busbw;
    }
    c.collectives_started = s.coll_started;
    c.collectives_completed = s.coll_completed;
    c.p2p_started = s.p2p_started;
    c.p2p_completed = s.p2p_completed;
    c.in_flight = s.in_flight;
    if (s.has_oldest) c.oldest_in_flight = InFlightRecord(s.oldest);
    c.untracked_ops = s.dropped;
    c.abandoned_ops = s.abandoned;
    if (s.has_abandoned_oldest) c.abandoned_oldest = InFlightRecord(s.abandoned_oldest);
    for (const RecentCollective& r : s.recent) {
      c.recent_collectives.push_back(
          {r.seq, OpLabel(r.op), r.bytes, r.enqueue_unix, r.kernel_start_ns, r.seconds});
    }
  }
  return record;
}

}  // namespace ringpilot::nccl_profiler
