#include "nccl_profiler/stats_file.h"

#include <nlohmann/json.hpp>

namespace ringpilot::nccl_profiler {

std::string StatsPath(const std::string& run_dir, int rank) {
  return run_dir + "/logs/rank-" + std::to_string(rank) + ".nccl.json";
}

namespace {

nlohmann::json InFlightJson(const InFlight& o) {
  return {{"op", OpLabel(o.op)},
          {"seq", o.seq},
          {"start_unix", o.start_unix},
          {"age_seconds", o.age_seconds}};
}

}  // namespace

std::string StatsJson(const RankLabels& rank, int api_version,
                      const std::vector<CommSnapshot>& comms, double written_unix) {
  nlohmann::json list = nlohmann::json::array();
  for (const CommSnapshot& s : comms) {
    if (s.id.hash == 0) continue;
    nlohmann::json ops = nlohmann::json::array();
    for (const CellSnapshot& c : s.cells) {
      ops.push_back({{"op", OpLabel(c.op)},
                     {"size_bucket", comm::SizeBucketName(c.size_bucket)},
                     {"algo", AlgoLabel(c.algo)},
                     {"proto", ProtoLabel(c.proto)},
                     {"count", c.count},
                     {"bytes_total", c.bytes},
                     {"timed_count", c.timed_count},
                     {"seconds_total", c.seconds},
                     {"busbw_bytes_per_second", c.busbw}});
    }
    nlohmann::json oldest = nullptr;
    if (s.has_oldest) oldest = InFlightJson(s.oldest);
    nlohmann::json abandoned_oldest = nullptr;
    if (s.has_abandoned_oldest) abandoned_oldest = InFlightJson(s.abandoned_oldest);
    nlohmann::json recent = nlohmann::json::array();
    for (const RecentCollective& r : s.recent) {
      recent.push_back(
          {r.seq, OpLabel(r.op), r.bytes, r.enqueue_unix, r.kernel_start_ns, r.seconds});
    }
    list.push_back(
        {{"comm", CommLabel(s.id.hash)},
         {"name", s.id.name},
         {"comm_rank", s.id.rank},
         {"comm_size", s.id.nranks},
         {"nodes", s.id.nnodes},
         {"timing", s.timing == Timing::kKernelChannels ? "gpu" : "none"},
         {"finalized", s.finalized},
         {"init_unix", s.init_unix},
         {"operations", ops},
         {"collective_seq", {{"started", s.coll_started}, {"completed", s.coll_completed}}},
         {"p2p_seq", {{"started", s.p2p_started}, {"completed", s.p2p_completed}}},
         {"in_flight", s.in_flight},
         {"oldest_in_flight", oldest},
         {"untracked_ops", s.dropped},
         {"abandoned_ops", s.abandoned},
         {"abandoned_oldest", abandoned_oldest},
         {"recent_collectives", recent}});
  }
  nlohmann::json j = {{"rank", rank.rank},
                      {"node", rank.node},
                      {"local_rank", rank.local_rank},
                      {"job", rank.job},
                      {"profiler_api_version", api_version},
                      {"written_unix", written_unix},
                      {"communicators", list}};
  return j.dump(2) + "\n";
}

}  // namespace ringpilot::nccl_profiler
