// The text report and the `--json` object of `ringpilot diagnose` (see diagnose.h).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "diagnose/diagnose.h"
#include "diagnose/report_format.h"

namespace ringpilot::diagnose {
using detail::Fmt;
using nlohmann::json;

namespace {

std::string Percent(double share) { return Fmt(100 * share, 1) + "%"; }

std::string Gbps(double bytes_per_second) { return Fmt(bytes_per_second / 1e9, 3); }

// A left-aligned table with a header row, two spaces between columns.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const { detail::PrintTable(out, rows_); }

 private:
  std::vector<std::vector<std::string>> rows_;
};

const RankStats* FindRank(const RunData& run, int rank) {
  for (const RankStats& r : run.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

// A number as JSON writes it (the shortest form that reads back the same).
std::string Plain(double v) { return json(v).dump(); }

// "summary: name=... world_size=... ...": what summary.json says of the run, the numbers
// that are unknown (no step measured) left out.
std::string SummaryLine(const history::RunSummary& s) {
  std::string line = "summary:";
  const auto add = [&line](const char* key, const std::string& value) {
    line += std::string(" ") + key + "=" + value;
  };
  if (!s.name.empty()) add("name", s.name);
  add("world_size", std::to_string(s.world_size));
  add("steps", std::to_string(s.steps));
  if (s.final_loss) add("final_loss", Plain(*s.final_loss));
  if (s.samples_per_second) add("samples_per_second", Plain(*s.samples_per_second));
  add("step_seconds_p50", Plain(s.step_seconds_p50));
  add("step_seconds_p99", Plain(s.step_seconds_p99));
  add("restarts", std::to_string(s.restarts));
  return line;
}

}  // namespace

std::string RenderDiagnosisText(const Diagnosis& d) {
  const RunData& run = d.data;
  std::ostringstream out;
  out << "run: " << run.run_dir << "\n";
  if (run.summary) out << SummaryLine(*run.summary) << "\n";
  for (const std::string& m : d.missing) out << "missing: " << m << "\n";
  out << RenderAttemptsText(d);

  if (!run.ranks.empty()) {
    out << "\nstraggler: ";
    if (!d.straggler) {
      out << "none (no rank kept the others waiting)\n";
    } else {
      const RankStats* r = FindRank(run, d.straggler->rank);
      out << "rank " << d.straggler->rank
          << (r && !r->node.empty() ? " (" + r->node + ")" : std::string())
          << ": the others waited " << Fmt(d.straggler->wait_seconds, 3) << " s on it in total ("
          << Fmt(d.wait_per_rank_step, 4) << " s per rank and step); last to be ready on "
          << Fmt(d.straggler->culprit_steps / static_cast<double>(run.ranks.size()), 1) << " of "
          << Fmt(r ? r->steps : 0, 0) << " steps (mean over the ranks' views)\n";
      Table t({"culprit", "wait_s", "last_ready_steps(sum over ranks)"});
      for (const CulpritTotal& c : d.ranking) {
        t.Add({std::to_string(c.rank), Fmt(c.wait_seconds, 3), Fmt(c.culprit_steps, 0)});
      }
      t.Print(out);
    }

    out << "\nper-rank step time (s):\n";
    Table t({"rank", "node", "local", "steps", "p50", "p99", "mean", "data", "forward", "backward",
             "optimizer", "comm_exposed", "exposed", "overlap", "waited", "skew"});
    for (const RankStats& r : run.ranks) {
      auto phase = [&](const char* name) {
        const auto it = r.phase_seconds_total.find(name);
        return it == r.phase_seconds_total.end() ? std::string("-") : Fmt(it->second, 3);
      };
      const auto share = d.exposed_share.find(r.rank);
      t.Add({std::to_string(r.rank), r.node.empty() ? "-" : r.node,
             r.local_rank < 0 ? "-" : std::to_string(r.local_rank), Fmt(r.steps, 0),
             Fmt(r.step_p50, 4), Fmt(r.step_p99, 4), Fmt(r.step_mean, 4), phase("data"),
             phase("forward"), phase("backward"), phase("optimizer"), phase("comm_exposed"),
             share == d.exposed_share.end() ? "-" : Percent(share->second),
             r.overlap_ratio ? Fmt(*r.overlap_ratio, 2) : "-", Fmt(r.wait_seconds_total, 3),
             Fmt(r.compute_skew_mean, 4)});
    }
    t.Print(out);
    out << "  (phases are totals over the run; exposed = comm_exposed / step time; waited = time "
           "spent waiting for the last rank; skew = mean compute skew per step)\n";

    out << RenderGpuClocksText(d);

    out << "\ncommunication: exposed "
        << (d.mean_exposed_share ? Percent(*d.mean_exposed_share) : std::string("unknown"))
        << " of the step time, overlap ratio "
        << (d.mean_overlap ? Fmt(*d.mean_overlap, 2) : std::string("unknown"))
        << " (mean over ranks)\n";
    if (d.collectives.empty()) {
      out << "  no collectives recorded\n";
    } else {
      Table c({"op", "size", "count", "bytes", "busbw_GB/s", "min_GB/s(rank)", "expected_GB/s",
               "ratio", ""});
      for (const CollectiveRow& row : d.collectives) {
        c.Add({row.op, row.size_bucket, Fmt(row.count, 0), Fmt(row.bytes_total, 0),
               Gbps(row.busbw_mean),
               Gbps(row.busbw_min) + "(" + std::to_string(row.busbw_min_rank) + ")",
               row.expected > 0 ? Gbps(row.expected) : "unknown",
               row.expected > 0 ? Percent(row.busbw_mean / row.expected) : "-",
               row.low ? "LOW" : ""});
      }
      c.Print(out);
      const bool any_low = std::any_of(d.collectives.begin(), d.collectives.end(),
                                       [](const CollectiveRow& row) { return row.low; });
      if (any_low && CommunicationHidden(d)) {
        out << "  (LOW: under half the expected bus bandwidth; these collectives run beside "
               "backward and stay hidden, so they do not set the step time)\n";
      }
    }
  }

  out << RenderProgramText(d);

  out << "\ntransports (NCCL):";
  if (run.transports.empty()) {
    out << " no logs/nccl-rank-<N>.log with channel lines\n";
  } else {
    out << "\n";
    Table t({"rank", "peer", "transport"});
    for (const PeerTransport& p : run.transports) {
      std::string list;
      for (const std::string& s : p.transports) list += (list.empty() ? "" : ",") + s;
      t.Add({std::to_string(p.rank), std::to_string(p.peer), list});
    }
    t.Print(out);
  }

  out << "\nwarnings:";
  if (d.warnings.empty()) {
    out << " none\n";
  } else {
    out << "\n";
    for (const std::string& w : d.warnings) out << "  - " << w << "\n";
  }
  return out.str();
}

json DiagnosisToJson(const Diagnosis& d) {
  const RunData& run = d.data;
  json j;
  j["run_dir"] = run.run_dir;
  j["summary"] = run.summary ? run.summary->as_written : json(nullptr);
  j["restarts"] = run.summary ? json(run.summary->restarts) : json(nullptr);
  j["attempts"] = AttemptsToJson(d);
  json straggler = {{"rank", nullptr}, {"wait_seconds", nullptr}};
  if (d.straggler) {
    const RankStats* r = FindRank(run, d.straggler->rank);
    straggler = {{"rank", d.straggler->rank},
                 {"wait_seconds", d.straggler->wait_seconds},
                 {"wait_seconds_per_rank_step", d.wait_per_rank_step},
                 {"culprit_steps", d.straggler->culprit_steps},
                 {"node", r ? json(r->node) : json(nullptr)}};
  } else if (!run.ranks.empty()) {
    straggler["wait_seconds"] = 0.0;
  }
  j["straggler"] = straggler;
  j["straggler_ranking"] = json::array();
  for (const CulpritTotal& c : d.ranking) {
    j["straggler_ranking"].push_back(
        {{"rank", c.rank}, {"wait_seconds", c.wait_seconds}, {"culprit_steps", c.culprit_steps}});
  }
  j["ranks"] = json::array();
  for (const RankStats& r : run.ranks) {
    const auto share = d.exposed_share.find(r.rank);
    j["ranks"].push_back({
        {"rank", r.rank},
        {"node", r.node},
        {"local_rank", r.local_rank},
        {"steps", r.steps},
        {"step_seconds", {{"p50", r.step_p50}, {"p99", r.step_p99}, {"mean", r.step_mean}}},
        {"phase_seconds_total", r.phase_seconds_total},
        {"comm_exposed_share",
         share == d.exposed_share.end() ? json(nullptr) : json(share->second)},
        {"input_wait_share",
         d.input_share.count(r.rank) ? json(d.input_share.at(r.rank)) : json(nullptr)},
        {"gpu_idle_share",
         d.gpu_idle_share.count(r.rank) ? json(d.gpu_idle_share.at(r.rank)) : json(nullptr)},
        {"overlap_ratio", r.overlap_ratio ? json(*r.overlap_ratio) : json(nullptr)},
        {"wait_seconds_total", r.wait_seconds_total},
        {"compute_skew_seconds_mean", r.compute_skew_mean},
        {"gpu_clocks", GpuClocksJson(r)},
    });
  }
  json collectives = json::array();
  for (const CollectiveRow& row : d.collectives) {
    collectives.push_back(detail::CollectiveJson(row));
  }
  j["input_bound_ranks"] = d.input_bound_ranks;
  j["clock_limited_ranks"] = json::array();
  for (const ClockLimitedRank& c : d.clock_limited) {
    j["clock_limited_ranks"].push_back({{"rank", c.rank}, {"cause", c.cause}, {"share", c.share}});
  }
  j["comm"] = {
      {"exposed_share", d.mean_exposed_share ? json(*d.mean_exposed_share) : json(nullptr)},
      {"overlap_ratio", d.mean_overlap ? json(*d.mean_overlap) : json(nullptr)},
      {"collectives", collectives},
  };
  j["transports"] = json::array();
  for (const PeerTransport& p : run.transports) {
    j["transports"].push_back(
        {{"rank", p.rank}, {"peer", p.peer}, {"transports", json(p.transports)}});
  }
  j["program"] = ProgramToJson(d);
  j["infiniband_ports"] = run.ib_ports;
  j["warnings"] = d.warnings;
  j["missing"] = d.missing;
  return j;
}

}  // namespace ringpilot::diagnose
