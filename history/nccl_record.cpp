#include "history/nccl_record.h"

#include <nlohmann/json.hpp>

#include "history/record_fields.h"

namespace ringpilot::history {

using nlohmann::json;

namespace {

json InFlightJson(const std::optional<NcclInFlight>& o) {
  if (!o) return nullptr;
  return {{"op", o->op},
          {"seq", o->seq},
          {"start_unix", o->start_unix},
          {"age_seconds", o->age_seconds}};
}

json CommJson(const NcclCommRecord& c) {
  json ops = json::array();
  for (const NcclOperationTotals& o : c.operations) {
    ops.push_back({{"op", o.op},
                   {"size_bucket", o.size_bucket},
                   {"algo", o.algo},
                   {"proto", o.proto},
                   {"count", o.count},
                   {"bytes_total", o.bytes_total},
                   {"timed_count", o.timed_count},
                   {"seconds_total", o.seconds_total},
                   {"busbw_bytes_per_second", o.busbw_bytes_per_second}});
  }
  json recent = json::array();
  for (const NcclRecentCollective& r : c.recent_collectives) {
    recent.push_back({r.seq, r.op, r.bytes, r.enqueue_unix, r.kernel_start_ns, r.seconds});
  }
  return {{"comm", c.comm},
          {"name", c.name},
          {"comm_rank", c.comm_rank},
          {"comm_size", c.comm_size},
          {"nodes", c.nodes},
          {"timing", c.gpu_timing ? "gpu" : "none"},
          {"finalized", c.finalized},
          {"init_unix", c.init_unix},
          {"operations", ops},
          {"collective_seq",
           {{"started", c.collectives_started}, {"completed", c.collectives_completed}}},
          {"p2p_seq", {{"started", c.p2p_started}, {"completed", c.p2p_completed}}},
          {"in_flight", c.in_flight},
          {"oldest_in_flight", InFlightJson(c.oldest_in_flight)},
          {"untracked_ops", c.untracked_ops},
          {"abandoned_ops", c.abandoned_ops},
          {"abandoned_oldest", InFlightJson(c.abandoned_oldest)},
          {"recent_collectives", recent}};
}

std::optional<NcclInFlight> ParseInFlight(const RecordFields& c, const std::string& key) {
  if (!c.Has(key)) return std::nullopt;
  const RecordFields o = c.Object(key);
  NcclInFlight op;
  op.op = o.String("op");
  op.seq = o.Unsigned("seq");
  op.start_unix = o.Number("start_unix");
  op.age_seconds = o.Number("age_seconds");
  return op;
}

NcclCommRecord ParseComm(const json& j, const std::string& file, const std::string& prefix) {
  const RecordFields c(j, file, prefix);
  NcclCommRecord comm;
  comm.comm = c.String("comm");
  if (comm.comm.empty()) c.Fail("comm", "missing");
  comm.name = c.String("name");
  comm.comm_rank = c.Int("comm_rank", -1, -1, kMaxRecordRank);
  comm.comm_size = c.Int("comm_size", 0, 0, kMaxRecordRank + 1);
  comm.nodes = c.Int("nodes", 0, 0, kMaxRecordRank + 1);
  comm.gpu_timing = c.String("timing") == "gpu";
  comm.finalized = c.Has("finalized") && c.raw().at("finalized") == true;
  comm.init_unix = c.Number("init_unix");
  const RecordFields seq = c.Object("collective_seq");
  comm.collectives_started = seq.Unsigned("started");
  comm.collectives_completed = seq.Unsigned("completed");
  if (c.Has("operations")) {
    const json& list = c.raw().at("operations");
    if (!list.is_array()) c.Fail("operations", "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const RecordFields o(list[i], file, prefix + "operations[" + std::to_string(i) + "].");
      NcclOperationTotals t;
      t.op = o.String("op");
      if (t.op.empty()) o.Fail("op", "missing");
      t.size_bucket = o.String("size_bucket");
      t.algo = o.String("algo");
      t.proto = o.String("proto");
      t.count = o.Unsigned("count");
      t.bytes_total = o.Unsigned("bytes_total");
      t.timed_count = o.Unsigned("timed_count");
      t.seconds_total = o.Number("seconds_total");
      t.busbw_bytes_per_second = o.Number("busbw_bytes_per_second");
      comm.operations.push_back(std::move(t));
    }
  }
  comm.oldest_in_flight = ParseInFlight(c, "oldest_in_flight");
  comm.abandoned_oldest = ParseInFlight(c, "abandoned_oldest");
  if (c.Has("recent_collectives")) {
    const json& rows = c.raw().at("recent_collectives");
    if (!rows.is_array()) c.Fail("recent_collectives", "expected a list");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const json& r = rows[i];
      const bool ok = r.is_array() && r.size() == 6 && r[0].is_number_unsigned() &&
                      r[1].is_string() && r[2].is_number_integer() && r[3].is_number() &&
                      r[4].is_number_unsigned() && r[5].is_number();
      if (!ok) {
        c.Fail(
            "recent_collectives[" + std::to_string(i) + "]",
            "expected [seq, op, bytes, enqueue_unix, kernel_start_ns, seconds], got " + r.dump());
      }
      comm.recent_collectives.push_back({r[0].get<uint64_t>(), r[1].get<std::string>(),
                                         r[2].get<int64_t>(), r[3].get<double>(),
                                         r[4].get<uint64_t>(), r[5].get<double>()});
    }
  }
  const RecordFields p2p = c.Object("p2p_seq");
  comm.p2p_started = p2p.Unsigned("started");
  comm.p2p_completed = p2p.Unsigned("completed");
  comm.in_flight = c.Unsigned("in_flight");
  comm.untracked_ops = c.Unsigned("untracked_ops");
  comm.abandoned_ops = c.Unsigned("abandoned_ops");
  return comm;
}

}  // namespace

std::string NcclRecordPath(const std::string& logs_dir, int rank) {
  return logs_dir + "/rank-" + std::to_string(rank) + kNcclRecordSuffix;
}

std::string NcclRecordJson(const NcclRecord& record) {
  json comms = json::array();
  for (const NcclCommRecord& c : record.communicators) comms.push_back(CommJson(c));
  const json j = {{"rank", record.rank},
                  {"node", record.node},
                  {"local_rank", record.local_rank},
                  {"job", record.job},
                  {"profiler_api_version", record.profiler_api_version},
                  {"written_unix", record.written_unix},
                  {"communicators", comms}};
  return j.dump(2) + "\n";
}

NcclRecord ReadNcclRecord(const std::string& path, int file_rank) {
  const json j = ReadJsonFile(path);
  const RecordFields f(j, path);
  NcclRecord r;
  const RankHeader header = ReadRankHeader(f, file_rank);
  r.rank = header.rank;
  r.node = header.node;
  r.local_rank = header.local_rank;
  r.written_unix = f.Number("written_unix");
  if (f.Has("communicators")) {
    const json& list = j.at("communicators");
    if (!list.is_array()) f.Fail("communicators", "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) {
      r.communicators.push_back(
          ParseComm(list[i], path, "communicators[" + std::to_string(i) + "]."));
    }
  }
  r.job = f.String("job");
  r.profiler_api_version = f.Int("profiler_api_version", 0, 0, 1000);
  return r;
}

}  // namespace ringpilot::history
