// The program part of the text report and of `--json` (see diagnose.h).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "diagnose/diagnose.h"

namespace ringpilot::diagnose {
using nlohmann::json;

namespace {

std::string Fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void Row(std::ostream& out, const std::vector<std::string>& cells,
         const std::vector<std::size_t>& width) {
  std::string line = "  ";
  for (std::size_t i = 0; i < cells.size(); ++i) {
    line += cells[i];
    if (i + 1 < cells.size() && width[i] > cells[i].size()) {
      line += std::string(width[i] - cells[i].size(), ' ');
    }
    if (i + 1 < cells.size()) line += "  ";
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out << line << "\n";
}

void Print(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  }
  for (const auto& row : rows) Row(out, row, width);
}

json CollectiveJson(const CollectiveRow& row) {
  return {
      {"op", row.op},
      {"size_bucket", row.size_bucket},
      {"count", row.count},
      {"bytes_total", row.bytes_total},
      {"seconds_total", row.seconds_total},
      {"busbw_bytes_per_second", row.busbw_mean},
      {"busbw_min_bytes_per_second", row.busbw_min},
      {"busbw_min_rank", row.busbw_min_rank},
      {"expected_busbw_bytes_per_second", row.expected > 0 ? json(row.expected) : json(nullptr)},
      {"ratio", row.expected > 0 ? json(row.busbw_mean / row.expected) : json(nullptr)},
      {"below_half_of_expected", row.low}};
}

}  // namespace

std::string RenderProgramText(const Diagnosis& d) {
  const ProgramDiagnosis& p = d.program;
  if (d.data.plugin_ranks.empty()) return "";
  std::ostringstream out;
  out << "\nprogram (NCCL profiler records, logs/rank-<N>.nccl.json): communication "
      << (p.comm_share ? Fmt(100 * *p.comm_share, 1) + "%" : std::string("unknown"))
      << " of the time (mean over ranks)\n";
  std::vector<std::vector<std::string>> rows = {
      {"rank", "node", "comm_s", "elapsed_s", "comm_share", "started", "completed", "heard"}};
  for (const ProgramRankRow& r : p.ranks) {
    rows.push_back({std::to_string(r.rank), r.node.empty() ? "-" : r.node, Fmt(r.comm_seconds, 3),
                    Fmt(r.elapsed_seconds, 2),
                    r.elapsed_seconds > 0 ? Fmt(100 * r.comm_share, 1) + "%" : "-",
                    std::to_string(r.started), std::to_string(r.completed),
                    Fmt(r.silent_seconds, 0) + " s ago"});
  }
  Print(out, rows);
  out << "  (comm_s: kernel time of the rank's NCCL operations, waiting for late ranks "
         "included; started/completed: collective sequence numbers on "
      << (p.comm.empty() ? "-" : p.comm) << ")\n";

  out << "\nstraggler (program): ";
  if (p.ranking.empty() || p.aligned_collectives == 0) {
    out << "unknown (no collective recorded by every rank)\n";
  } else if (p.ranking[0].caused_wait_seconds <= 0) {
    out << "none over " << p.aligned_collectives << " collectives\n";
  } else {
    const ProgramCulprit& c = p.ranking[0];
    out << "rank " << c.rank << ": arrived last at " << c.last_arrivals << " of "
        << p.aligned_collectives << " collectives; the others waited "
        << Fmt(c.caused_wait_seconds, 4) << " s for it\n";
    std::vector<std::vector<std::string>> t = {
        {"rank", "caused_wait_s", "last_arrivals", "last_enqueues"}};
    for (const ProgramCulprit& r : p.ranking) {
      t.push_back({std::to_string(r.rank), Fmt(r.caused_wait_seconds, 4),
                   std::to_string(r.last_arrivals), std::to_string(r.last_enqueues)});
    }
    Print(out, t);
    out << "  (per collective, the rank with the shortest kernel arrived last and the others' "
           "extra kernel time waited for it; last_enqueues: by the host clocks)\n";
  }

  out << "\nhang: ";
  if (!p.hang) {
    out << "none (no collective in flight for " << Fmt(kStuckSeconds, 0) << " s or more)\n";
  } else {
    const HangReport& h = *p.hang;
    if (h.rank_behind >= 0) {
      out << "rank " << h.rank_behind << " is behind: " << h.behind_completed
          << " collectives completed, " << h.behind_started << " started; ";
    } else {
      out << "no rank is behind (all stuck in the same collective); ";
    }
    std::string waiting;
    for (int r : h.waiting) waiting += (waiting.empty() ? "" : ",") + std::to_string(r);
    out << "rank(s) " << (waiting.empty() ? "-" : waiting) << " waited " << Fmt(h.waited_seconds, 0)
        << " s in " << h.op << " #" << h.seq << " on communicator " << h.comm
        << (h.aborted ? " (then aborted)" : "") << "\n";
  }

  out << "\nbus bandwidth (program, communicator " << (p.comm.empty() ? "-" : p.comm) << "):";
  if (p.collectives.empty()) {
    out << " no collectives recorded\n";
  } else {
    out << "\n";
    std::vector<std::vector<std::string>> t = {
        {"op", "size", "count", "busbw_GB/s", "min_GB/s(rank)", "expected_GB/s", "ratio", ""}};
    for (const CollectiveRow& row : p.collectives) {
      t.push_back({row.op, row.size_bucket, Fmt(row.count, 0), Fmt(row.busbw_mean / 1e9, 3),
                   Fmt(row.busbw_min / 1e9, 3) + "(" + std::to_string(row.busbw_min_rank) + ")",
                   row.expected > 0 ? Fmt(row.expected / 1e9, 3) : "unknown",
                   row.expected > 0 ? Fmt(100 * row.busbw_mean / row.expected, 1) + "%" : "-",
                   row.low ? "LOW" : ""});
    }
    Print(out, t);
    out << "  expected: " << (p.expected_source.empty() ? "-" : p.expected_source) << "\n";
  }
  return out.str();
}

json ProgramToJson(const Diagnosis& d) {
  const ProgramDiagnosis& p = d.program;
  if (d.data.plugin_ranks.empty()) return nullptr;
  json ranks = json::array();
  for (const ProgramRankRow& r : p.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"node", r.node},
                     {"comm_seconds", r.comm_seconds},
                     {"elapsed_seconds", r.elapsed_seconds},
                     {"comm_share", r.elapsed_seconds > 0 ? json(r.comm_share) : json(nullptr)},
                     {"collectives_started", r.started},
                     {"collectives_completed", r.completed},
                     {"silent_seconds", r.silent_seconds}});
  }
  json ranking = json::array();
  for (const ProgramCulprit& c : p.ranking) {
    ranking.push_back({{"rank", c.rank},
                       {"caused_wait_seconds", c.caused_wait_seconds},
                       {"last_arrivals", c.last_arrivals},
                       {"last_enqueues", c.last_enqueues}});
  }
  json straggler = nullptr;
  if (!p.ranking.empty() && p.ranking[0].caused_wait_seconds > 0) straggler = ranking[0];
  json hang = nullptr;
  if (p.hang) {
    const HangReport& h = *p.hang;
    hang = {{"comm", h.comm},
            {"rank_behind", h.rank_behind >= 0 ? json(h.rank_behind) : json(nullptr)},
            {"behind_completed", h.behind_completed},
            {"behind_started", h.behind_started},
            {"op", h.op},
            {"seq", h.seq},
            {"waiting_ranks", h.waiting},
            {"waited_seconds", h.waited_seconds},
            {"aborted", h.aborted},
            {"silent_ranks", h.silent}};
  }
  json collectives = json::array();
  for (const CollectiveRow& row : p.collectives) collectives.push_back(CollectiveJson(row));
  return {{"comm", p.comm},
          {"comm_share", p.comm_share ? json(*p.comm_share) : json(nullptr)},
          {"ranks", ranks},
          {"aligned_collectives", p.aligned_collectives},
          {"straggler", straggler},
          {"straggler_ranking", ranking},
          {"hang", hang},
          {"collectives", collectives},
          {"expected_source", p.expected_source}};
}

}  // namespace ringpilot::diagnose
