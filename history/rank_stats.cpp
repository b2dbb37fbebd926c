#include "history/rank_stats.h"

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "history/rank_files.h"
#include "history/record_fields.h"

namespace ringpilot::history {

using nlohmann::json;

namespace {

// {"<rank>": value}; culprit steps are whole numbers and written as such.
json RankMapJson(const std::map<int, double>& m, bool whole) {
  json out = json::object();
  for (const auto& [rank, value] : m) {
    if (whole) {
      out[std::to_string(rank)] = static_cast<int64_t>(value);
    } else {
      out[std::to_string(rank)] = value;
    }
  }
  return out;
}

// gpu_clocks' optional readings, each written only when present: the writer and the
// reader take the keys from here.
struct OptionalClockField {
  const char* key;
  std::optional<double> GpuClocks::*value;
};
constexpr OptionalClockField kOptionalClockFields[] = {
    {"power_limited_seconds", &GpuClocks::power_limited_seconds},
    {"thermal_limited_seconds", &GpuClocks::thermal_limited_seconds},
    {"sm_clock_mhz", &GpuClocks::sm_clock_mhz},
    {"sm_clock_max_mhz", &GpuClocks::sm_clock_max_mhz},
    {"power_watts", &GpuClocks::power_watts},
    {"power_limit_watts", &GpuClocks::power_limit_watts},
};

CollectiveTotals ParseCollective(const json& j, const std::string& file, std::size_t i) {
  const RecordFields c(j, file, "collectives[" + std::to_string(i) + "].");
  CollectiveTotals t;
  t.op = c.String("op");
  if (t.op.empty()) c.Fail("op", "missing");
  t.size_bucket = c.String("size_bucket");
  t.count = c.Unsigned("count");
  t.bytes_total = c.Unsigned("bytes_total");
  t.seconds_total = c.Number("seconds_total");
  t.busbw_bytes_per_second = c.Number("busbw_bytes_per_second");
  return t;
}

}  // namespace

std::string RankStatsPath(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + kRankStatsSuffix;
}

std::map<int, std::string> RankStatsFiles(const std::string& dir) {
  std::map<int, std::string> files = RankFiles(dir, kRankStatsSuffix);
  files.erase(files.upper_bound(kMaxRecordRank), files.end());
  return files;
}

std::string RankStatsJson(const RankStats& s) {
  json colls = json::array();
  for (const CollectiveTotals& c : s.collectives) {
    colls.push_back({{"op", c.op},
                     {"size_bucket", c.size_bucket},
                     {"count", c.count},
                     {"bytes_total", c.bytes_total},
                     {"seconds_total", c.seconds_total},
                     {"busbw_bytes_per_second", c.busbw_bytes_per_second}});
  }
  json j = {
      {"rank", s.rank},
      {"node", s.node},
      {"local_rank", s.local_rank},
      {"world_size", s.world_size},
      {"steps", s.steps},
      {"step_seconds", {{"p50", s.step_p50}, {"p99", s.step_p99}, {"mean", s.step_mean}}},
      {"phase_seconds_total", s.phase_seconds_total},
      {"straggler",
       {{"wait_seconds_total", s.wait_seconds_total},
        {"culprit_steps", RankMapJson(s.culprit_steps, /*whole=*/true)},
        {"wait_by_culprit_seconds", RankMapJson(s.wait_by_culprit, /*whole=*/false)},
        {"compute_skew_seconds_mean", s.compute_skew_mean}}},
      {"collectives", colls},
      {"expected_busbw_bytes_per_second", s.expected_busbw},
  };
  if (s.input_wait) {
    const InputWaitSeconds& w = *s.input_wait;
    j["input_wait_seconds"] = {
        {"steps", w.steps}, {"total", w.total}, {"p50", w.p50}, {"p99", w.p99}, {"max", w.max}};
  }
  if (s.image_decode) {
    const ImageDecode& d = *s.image_decode;
    j["image_decode"] = {
        {"where", d.where}, {"threads", d.threads}, {"batch", d.batch}, {"decision", d.decision}};
  }
  if (s.gpu_clocks) {
    const GpuClocks& g = *s.gpu_clocks;
    json clocks = {{"seconds", g.seconds}};
    for (const OptionalClockField& field : kOptionalClockFields) {
      if (const std::optional<double>& v = g.*field.value) clocks[field.key] = *v;
    }
    j["gpu_clocks"] = clocks;
  }
  if (s.gpu_idle_seconds) j["gpu_idle_seconds_total"] = *s.gpu_idle_seconds;
  if (s.overlap_ratio) j["overlap_ratio"] = *s.overlap_ratio;
  return j.dump(2) + "\n";
}

void WriteRankStats(const std::string& path, const RankStats& stats) {
  base::WriteFileAtomically(path, RankStatsJson(stats));
}

RankStats ReadRankStats(const std::string& path, int file_rank) {
  const json j = ReadJsonFile(path);
  const RecordFields f(j, path);
  RankStats s;
  const RankHeader header = ReadRankHeader(f, file_rank);
  s.rank = header.rank;
  s.node = header.node;
  s.local_rank = header.local_rank;
  s.world_size = f.Int("world_size", 0, 0, kMaxRecordRank + 1);
  s.steps = f.Unsigned("steps");
  const RecordFields step = f.Object("step_seconds");
  s.step_p50 = step.Number("p50");
  s.step_p99 = step.Number("p99");
  s.step_mean = step.Number("mean");
  s.phase_seconds_total = f.NumberMap("phase_seconds_total");
  if (f.Has("input_wait_seconds")) {
    const RecordFields wait = f.Object("input_wait_seconds");
    InputWaitSeconds w;
    w.steps = wait.Unsigned("steps");
    w.total = wait.Number("total");
    w.p50 = wait.Number("p50");
    w.p99 = wait.Number("p99");
    w.max = wait.Number("max");
    s.input_wait = w;
  }
  if (f.Has("image_decode")) {
    const RecordFields decode = f.Object("image_decode");
    ImageDecode d;
    d.where = decode.String("where");
    if (d.where != kDecodeOnHost && d.where != kDecodeOnGpu) {
      decode.Fail("where", std::string("expected ") + kDecodeOnHost + " or " + kDecodeOnGpu);
    }
    d.threads = decode.Int("threads", 0, 0, 1 << 20);
    d.batch = static_cast<int64_t>(decode.Unsigned("batch"));
    d.decision = decode.String("decision");
    s.image_decode = d;
  }
  if (f.Has("gpu_clocks")) {
    const RecordFields clocks = f.Object("gpu_clocks");
    GpuClocks g;
    g.seconds = clocks.Number("seconds");
    if (g.seconds < 0) clocks.Fail("seconds", "negative");
    for (const OptionalClockField& field : kOptionalClockFields) {
      if (!clocks.Has(field.key)) continue;
      const double v = clocks.Number(field.key);
      if (v < 0) clocks.Fail(field.key, "negative");
      g.*field.value = v;
    }
    s.gpu_clocks = g;
  }
  if (f.Has("gpu_idle_seconds_total")) {
    s.gpu_idle_seconds = f.Number("gpu_idle_seconds_total");
    if (*s.gpu_idle_seconds < 0) f.Fail("gpu_idle_seconds_total", "negative");
  }
  if (f.Has("overlap_ratio")) s.overlap_ratio = f.Number("overlap_ratio");
  const RecordFields strag = f.Object("straggler");
  s.wait_seconds_total = strag.Number("wait_seconds_total");
  s.culprit_steps = strag.RankMap("culprit_steps");
  s.wait_by_culprit = strag.RankMap("wait_by_culprit_seconds");
  s.compute_skew_mean = strag.Number("compute_skew_seconds_mean");
  if (f.Has("collectives")) {
    const json& list = j.at("collectives");
    if (!list.is_array()) f.Fail("collectives", "expected a list");
    for (std::size_t i = 0; i < list.size(); ++i) {
      s.collectives.push_back(ParseCollective(list[i], path, i));
    }
  }
  s.expected_busbw = f.NumberMap("expected_busbw_bytes_per_second");
  return s;
}

}  // namespace ringpilot::history
