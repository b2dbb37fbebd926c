// Loading a run directory and analysing it (see diagnose.h).
#include "diagnose/diagnose.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "base/text.h"
#include "history/launcher_record.h"
#include "history/rank_files.h"
#include "history/rank_stats.h"
#include "history/record_fields.h"
#include "history/run_summary.h"
#include "metrics/nccl_log.h"

namespace ringpilot::diagnose {
namespace fs = std::filesystem;
constexpr int kMaxRank = history::kMaxRecordRank;
using nlohmann::json;

namespace {

std::vector<std::string> InfinibandPorts(const std::string& dir) {
  std::vector<std::string> ports;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return ports;
  for (const auto& dev : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    for (const auto& port : fs::directory_iterator(dev.path() / "ports", ec2)) {
      ports.push_back(dev.path().filename().string() + "/" + port.path().filename().string());
    }
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

// What an input-bound rank's input was held by, and what would help. Image ranks record
// how they decode (history::ImageDecode): at a full rank's cores more data.workers cannot
// help, so say which decoder set the pace and how many images a second it made.
std::string InputBoundCause(const history::RankStats& r) {
  if (!r.image_decode) {
    return " (more data.workers or data.prefetch, faster storage, or smaller images would help)";
  }
  const history::ImageDecode& d = *r.image_decode;
  std::string text;
  // Input-bound, the rank trains as fast as its input comes. (The step time less the wait
  // is not the step's own pace: on CUDA the host waits while the GPU runs the step before.)
  if (d.batch > 0 && r.step_mean > 0) {
    text += "; its input made " + base::FormatFixed(static_cast<double>(d.batch) / r.step_mean, 0) +
            " images/s";
  }
  text += "; " + d.decision;
  if (d.where == history::kDecodeOnGpu) {
    return text +
           ". nvJPEG beside the step sets the pace: data.gpu_decode false on a rank with many "
           "cores, or smaller files (ringpilot data pack --max-side 400 --quality 90; "
           "docs/data.md)";
  }
  return text +
         ". The host's decode threads set the pace: more cores per rank, data.gpu_decode true "
         "where the GPU has JPEG engines, or smaller files (ringpilot data pack --max-side 400 "
         "--quality 90; docs/data.md)";
}

}  // namespace

std::string ClassifyTransport(const std::string& via) {
  return metrics::ClassifyNcclTransport(via);
}

bool ParseNcclChannelLine(const std::string& line, int* from, int* to, std::string* transport) {
  return metrics::ParseNcclChannelLine(line, from, to, transport);
}

std::pair<double, double> ParseSizeBucket(const std::string& label) {
  static const std::regex kSize(R"((\d{1,15}(?:\.\d{1,15})?)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)?)");
  std::vector<double> sizes;
  for (std::sregex_iterator it(label.begin(), label.end(), kSize), end; it != end; ++it) {
    double v = std::stod((*it)[1].str());
    const std::string unit = (*it)[2].str();
    if (unit == "KiB") v *= 1024.0;
    if (unit == "MiB") v *= 1024.0 * 1024;
    if (unit == "GiB") v *= 1024.0 * 1024 * 1024;
    if (unit == "TiB") v *= 1024.0 * 1024 * 1024 * 1024;
    if (unit == "KB") v *= 1e3;
    if (unit == "MB") v *= 1e6;
    if (unit == "GB") v *= 1e9;
    if (unit == "TB") v *= 1e12;
    sizes.push_back(v);
  }
  if (sizes.empty()) return {-1, -1};
  if (sizes.size() >= 2) return {sizes[0], sizes[1]};
  if (label[0] == '<') return {-1, sizes[0]};
  return {sizes[0], -1};
}

RunData LoadRun(const std::string& run_dir, const std::string& infiniband_dir) {
  std::error_code ec;
  if (!fs::exists(run_dir, ec)) throw DiagnoseError(run_dir + ": no such run directory");
  if (!fs::is_directory(run_dir, ec)) throw DiagnoseError(run_dir + ": not a directory");
  RunData data;
  data.run_dir = run_dir;
  const fs::path root(run_dir);
  data.summary = history::ReadRunSummary(history::RunSummaryPath(run_dir));
  const fs::path logs = root / "logs";
  const std::map<int, std::string> stats_files = history::RankStatsFiles(logs.string());
  LoadPluginRanks(run_dir, &data);
  data.program_beats = history::ReadProgramBeats(logs.string(), 0);
  data.attempts = history::ReadAttempts(run_dir);
  for (const history::AttemptRecord& a : data.attempts) {
    for (const auto& [rank, path] : history::RankStatsFiles((root / a.dir).string())) {
      data.attempt_ranks[{a.run, a.attempt}].push_back(history::ReadRankStats(path, rank));
    }
  }
  data.launcher = history::ReadLauncherRecord(history::LauncherRecordPath(run_dir));
  data.failure = history::ReadFailureRecord((root / "failure.json").string());
  // A run that failed before its first step has only job.yaml, launcher.json and
  // failure.json: it is a run directory all the same (`ringpilot status` reads it).
  const bool job = fs::exists(root / "job.yaml", ec);
  if (!data.summary && stats_files.empty() && data.plugin_ranks.empty() && data.attempts.empty() &&
      data.program_beats.empty() && !job && !data.launcher && !data.failure) {
    throw DiagnoseError(run_dir +
                        ": not a run directory (no job.yaml, summary.json, "
                        "logs/rank-<N>.stats.json, logs/rank-<N>.nccl.json, "
                        "logs/rank-<N>.program.json or attempts/)");
  }
  data.now_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& [rank, path] : stats_files) {
    data.ranks.push_back(history::ReadRankStats(path, rank));
  }
  // logs/ has the statistics of the last attempt that finished; a run that has not (live,
  // interrupted, failed) still has its attempts' records as of their last checkpoint.
  if (!data.summary && !data.attempt_ranks.empty()) {
    data.ranks = data.attempt_ranks.rbegin()->second;
    data.ranks_from_run = data.attempt_ranks.rbegin()->first.first;
    data.ranks_from_attempt = data.attempt_ranks.rbegin()->first.second;
  }
  for (const auto& [rank, path] : history::NcclDebugLogFiles(logs.string())) {
    // The ranks the other records may name (kMaxRecordRank).
    if (rank > kMaxRank) continue;
    std::ifstream in(path);
    if (!in) throw DiagnoseError(path + ": cannot be read");
    std::map<int, std::set<std::string>> peers = metrics::NcclPeerTransports(in, rank);
    for (auto& [peer, ts] : peers) data.transports.push_back({rank, peer, std::move(ts)});
  }
  data.ib_ports = InfinibandPorts(infiniband_dir);
  return data;
}

Diagnosis Analyze(RunData data) {
  Diagnosis d;
  d.data = std::move(data);
  const RunData& run = d.data;
  int world = run.summary ? run.summary->world_size : 0;
  // A program's run has neither: its records are the plugin's.
  const bool program = !run.plugin_ranks.empty() || !run.program_beats.empty();
  if (!run.summary && !program) {
    d.missing.push_back(run.attempts.empty()
                            ? "summary.json (the run did not finish, or rank 0 died)"
                            : "summary.json (the run has not finished: see attempts)");
  }
  AnalyzeAttempts(&d);
  if (run.ranks.empty()) {
    if (!program) {
      d.missing.push_back(
          "logs/rank-<N>.stats.json (a run from before per-rank statistics, or its ranks did "
          "not reach the end): no straggler ranking, per-rank step times, exposed communication "
          "or bus bandwidth");
    }
  } else {
    world = std::max(world, run.ranks.front().world_size);
    std::set<int> have;
    for (const RankStats& r : run.ranks) have.insert(r.rank);
    std::vector<std::string> absent;
    for (int r = 0; r < world; ++r) {
      if (!have.count(r)) absent.push_back(std::to_string(r));
    }
    if (!absent.empty()) {
      std::string list;
      for (const std::string& a : absent) list += (list.empty() ? "" : ",") + a;
      d.missing.push_back("logs/rank-<N>.stats.json of rank(s) " + list);
      d.warnings.push_back("statistics missing for rank(s) " + list + " of " +
                           std::to_string(world) + ": the report covers the others only");
    }
  }

  // Straggler ranking: every rank's wait attributed to each culprit, summed.
  std::map<int, CulpritTotal> totals;
  for (const RankStats& r : run.ranks) {
    for (const auto& [c, w] : r.wait_by_culprit) {
      totals[c].rank = c;
      totals[c].wait_seconds += w;
    }
    for (const auto& [c, n] : r.culprit_steps) {
      totals[c].rank = c;
      totals[c].culprit_steps += n;
    }
  }
  for (const auto& [c, t] : totals) d.ranking.push_back(t);
  std::sort(d.ranking.begin(), d.ranking.end(), [](const CulpritTotal& a, const CulpritTotal& b) {
    if (a.wait_seconds != b.wait_seconds) return a.wait_seconds > b.wait_seconds;
    if (a.culprit_steps != b.culprit_steps) return a.culprit_steps > b.culprit_steps;
    return a.rank < b.rank;
  });
  if (!d.ranking.empty() && (d.ranking[0].wait_seconds > 0 || d.ranking[0].culprit_steps > 0)) {
    d.straggler = d.ranking[0];
    double other_steps = 0;
    for (const RankStats& r : run.ranks) {
      if (r.rank != d.straggler->rank) other_steps += r.steps;
    }
    if (other_steps > 0) d.wait_per_rank_step = d.straggler->wait_seconds / other_steps;
  }

  // Exposed communication and overlap.
  double exposed_sum = 0, step_sum = 0, overlap_sum = 0;
  int overlap_n = 0;
  std::vector<double> p50s;
  for (const RankStats& r : run.ranks) {
    double step_total = r.step_mean * r.steps;
    if (step_total <= 0) {
      for (const auto& [phase, s] : r.phase_seconds_total) step_total += s;
    }
    // A step's time runs from its begin event to its end event, which the host records
    // after waiting for the next batch: the GPU's idle time is inside the steps' time.
    if (r.gpu_idle_seconds && step_total > 0) {
      d.gpu_idle_share[r.rank] = std::clamp(*r.gpu_idle_seconds / step_total, 0.0, 1.0);
    }
    const auto data_it = r.phase_seconds_total.find("data");
    if (data_it != r.phase_seconds_total.end() && step_total > 0) {
      d.input_share[r.rank] = data_it->second / step_total;
      // Input made on the host reaches the GPU as a copy queued with the step: a late batch
      // leaves the GPU idle between steps. nvJPEG's batches are made on the GPU, and the
      // step's stream also waits for them inside the step, which the idle time between
      // steps does not see: there the host's wait stays the measure.
      const auto idle = d.gpu_idle_share.find(r.rank);
      const bool decoded_on_gpu = r.image_decode && r.image_decode->where == history::kDecodeOnGpu;
      const bool gpu_waited = idle == d.gpu_idle_share.end() || decoded_on_gpu ||
                              idle->second >= kInputBoundGpuIdleShare;
      if (data_it->second / step_total > kInputBoundShare && gpu_waited) {
        d.input_bound_ranks.push_back(r.rank);
      }
    }
    const auto it = r.phase_seconds_total.find("comm_exposed");
    if (it != r.phase_seconds_total.end() && step_total > 0) {
      d.exposed_share[r.rank] = it->second / step_total;
      exposed_sum += it->second;
      step_sum += step_total;
    }
    if (r.overlap_ratio) {
      overlap_sum += *r.overlap_ratio;
      ++overlap_n;
    }
    if (r.step_p50 > 0) p50s.push_back(r.step_p50);
  }
  if (step_sum > 0) d.mean_exposed_share = exposed_sum / step_sum;
  if (overlap_n > 0) d.mean_overlap = overlap_sum / overlap_n;

  // Bus bandwidth per op and size bucket, over the ranks.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<int, CollectiveTotals>>>
      groups;
  for (const RankStats& r : run.ranks) {
    for (const CollectiveTotals& c : r.collectives)
      groups[{c.op, c.size_bucket}].push_back({r.rank, c});
  }
  for (const auto& [key, list] : groups) {
    CollectiveRow row;
    row.op = key.first;
    row.size_bucket = key.second;
    double bw_sum = 0;
    row.busbw_min = list.front().second.busbw_bytes_per_second;
    row.busbw_min_rank = list.front().first;
    for (const auto& [rank, c] : list) {
      row.count += c.count;
      row.bytes_total += c.bytes_total;
      row.seconds_total += c.seconds_total;
      bw_sum += c.busbw_bytes_per_second;
      if (c.busbw_bytes_per_second < row.busbw_min) {
        row.busbw_min = c.busbw_bytes_per_second;
        row.busbw_min_rank = rank;
      }
    }
    row.busbw_mean = bw_sum / static_cast<double>(list.size());
    for (const RankStats& r : run.ranks) {
      const auto e = r.expected_busbw.find(row.op);
      if (e != r.expected_busbw.end()) row.expected = std::max(row.expected, e->second);
    }
    row.low = row.expected > 0 && row.busbw_mean < 0.5 * row.expected;
    d.collectives.push_back(row);
  }
  std::stable_sort(d.collectives.begin(), d.collectives.end(),
                   [](const CollectiveRow& a, const CollectiveRow& b) {
                     if (a.op != b.op) return a.op < b.op;
                     const auto sa = ParseSizeBucket(a.size_bucket);
                     const auto sb = ParseSizeBucket(b.size_bucket);
                     return std::max(sa.first, sa.second) < std::max(sb.first, sb.second);
                   });

  // Warnings, most actionable first.
  for (const PeerTransport& t : run.transports) {
    if (t.transports.count("NET_Socket") && !run.ib_ports.empty()) {
      std::string ports;
      for (const std::string& p : run.ib_ports) ports += (ports.empty() ? "" : ",") + p;
      d.warnings.push_back("rank " + std::to_string(t.rank) + " reaches rank " +
                           std::to_string(t.peer) +
                           " via NET/Socket although this machine has InfiniBand ports (" + ports +
                           "): check NCCL_IB_DISABLE, NCCL_IB_HCA and NCCL_SOCKET_IFNAME");
    }
  }
  if (d.straggler && d.straggler->wait_seconds > 0 && !p50s.empty()) {
    std::sort(p50s.begin(), p50s.end());
    const double median_p50 = p50s[p50s.size() / 2];
    if (d.wait_per_rank_step > 0.05 * median_p50) {
      d.warnings.push_back("straggler: rank " + std::to_string(d.straggler->rank) +
                           " keeps the others waiting " +
                           base::FormatFixed(d.wait_per_rank_step, 4) + " s per step (" +
                           base::FormatFixed(100 * d.wait_per_rank_step / median_p50, 1) +
                           "% of the median step time)");
    }
  }
  // A collective overlapped with backward runs as slowly as its share of the GPU lets it;
  // that costs nothing while it stays hidden. Unknown exposure (a program's NCCL records)
  // still warns.
  const bool comm_hidden = CommunicationHidden(d);
  for (const CollectiveRow& row : d.collectives) {
    if (!row.low || comm_hidden) continue;
    d.warnings.push_back(row.op + " " + row.size_bucket + ": bus bandwidth " +
                         base::FormatFixed(row.busbw_mean / 1e9, 3) + " GB/s is " +
                         base::FormatFixed(100 * row.busbw_mean / row.expected, 1) +
                         "% of the expected " + base::FormatFixed(row.expected / 1e9, 3) +
                         " GB/s (under 50%)");
  }
  for (int rank : d.input_bound_ranks) {
    const RankStats& r = *std::find_if(run.ranks.begin(), run.ranks.end(),
                                       [rank](const RankStats& x) { return x.rank == rank; });
    std::string per_step;
    if (r.input_wait) {
      per_step = "; per step p50 " + base::FormatFixed(r.input_wait->p50, 4) + " s, p99 " +
                 base::FormatFixed(r.input_wait->p99, 4) + " s";
    }
    std::string gpu_idle;
    if (const auto idle = d.gpu_idle_share.find(rank); idle != d.gpu_idle_share.end()) {
      gpu_idle = "; its GPU sat idle " + base::FormatFixed(100 * idle->second, 1) +
                 "% of the time, waiting for the next step";
    }
    d.warnings.push_back("input-bound on rank " + std::to_string(rank) + ": waiting for input is " +
                         base::FormatFixed(100 * d.input_share[rank], 1) + "% of its step time" +
                         per_step + gpu_idle + InputBoundCause(r));
  }
  AnalyzeGpuClocks(&d);
  if (d.mean_exposed_share && *d.mean_exposed_share > 0.3) {
    d.warnings.push_back("exposed communication is " +
                         base::FormatFixed(100 * *d.mean_exposed_share, 1) +
                         "% of the step time: larger buckets or more overlap would help");
  }
  if (run.summary && run.summary->restarts > 0) {
    d.warnings.push_back("the job restarted " + std::to_string(run.summary->restarts) +
                         " time(s): see logs/launcher.log for the failures");
  }
  AnalyzeProgram(&d);
  return d;
}

}  // namespace ringpilot::diagnose
