// The program part of the text report and of `--json` (see diagnose.h).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "diagnose/diagnose.h"
#include "diagnose/report_format.h"

namespace ringpilot::diagnose {
using detail::CollectiveJson;
using detail::Fmt;
using nlohmann::json;

namespace {

// The processes as `ringpilot exec` saw them, and the progress the program reported.
void RenderProcesses(const Diagnosis& d, std::ostream& out) {
  const auto& beats = d.data.program_beats;
  if (beats.empty()) return;
  out << "\nprogram: " << beats.begin()->second.command << "\n";
  const auto zero = beats.find(0);
  if (zero != beats.end() && zero->second.progress) {
    const history::ProgramProgress& p = *zero->second.progress;
    out << "progress: step " << p.step
        << (p.steps > 0 ? "/" + std::to_string(p.steps) : std::string())
        << (p.loss ? " loss " + Fmt(*p.loss, 4) : std::string())
        << " (rank 0's last progress line, " << Fmt(d.data.now_unix - p.unix, 0) << " s ago)\n";
  } else {
    out << "progress: no progress reported (a program reports it with lines like "
           "`step 120/600 loss 0.41`: docs/programs.md)\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"rank", "pid", "state", "cpu_s", "rss_mib", "elapsed_s", "step", "heard"}};
  for (const auto& [rank, b] : beats) {
    const double end = b.state == "exited" ? b.unix : d.data.now_unix;
    rows.push_back({std::to_string(rank), std::to_string(b.pid),
                    b.state + (b.status ? " (" + std::to_string(*b.status) + ")" : std::string()),
                    b.cpu_seconds ? Fmt(*b.cpu_seconds, 1) : "-",
                    b.rss_bytes ? Fmt(static_cast<double>(*b.rss_bytes) / (1 << 20), 0) : "-",
                    b.started_unix > 0 ? Fmt(end - b.started_unix, 1) : "-",
                    b.progress ? std::to_string(b.progress->step) : "-",
                    Fmt(d.data.now_unix - b.unix, 0) + " s ago"});
  }
  detail::PrintTable(out, rows);
  out << "  (logs/rank-<N>.program.json: each rank's process as `ringpilot exec` saw it; "
         "cpu_s: user + system CPU time)\n";
  if (d.data.plugin_ranks.empty()) {
    out << "communication: no NCCL records (logs/rank-<N>.nccl.json): the program used no "
           "NCCL (gloo, or CPU tensors), so there is no per-collective analysis\n";
  }
}

}  // namespace

std::string RenderProgramText(const Diagnosis& d) {
  const ProgramDiagnosis& p = d.program;
  std::ostringstream out;
  RenderProcesses(d, out);
  if (d.data.plugin_ranks.empty()) return out.str();
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
  detail::PrintTable(out, rows);
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
    detail::PrintTable(out, t);
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
    detail::PrintTable(out, t);
    out << "  expected: " << (p.expected_source.empty() ? "-" : p.expected_source) << "\n";
  }
  return out.str();
}

namespace {

json ProcessesJson(const Diagnosis& d) {
  json ranks = json::array();
  for (const auto& [rank, b] : d.data.program_beats) {
    json progress = nullptr;
    if (b.progress) {
      progress = {{"step", b.progress->step},
                  {"steps", b.progress->steps > 0 ? json(b.progress->steps) : json(nullptr)},
                  {"loss", b.progress->loss ? json(*b.progress->loss) : json(nullptr)},
                  {"unix", b.progress->unix}};
    }
    ranks.push_back({{"rank", rank},
                     {"pid", b.pid},
                     {"state", b.state},
                     {"status", b.status ? json(*b.status) : json(nullptr)},
                     {"cpu_seconds", b.cpu_seconds ? json(*b.cpu_seconds) : json(nullptr)},
                     {"rss_bytes", b.rss_bytes ? json(*b.rss_bytes) : json(nullptr)},
                     {"started_unix", b.started_unix},
                     {"unix", b.unix},
                     {"progress", progress}});
  }
  return ranks;
}

}  // namespace

json ProgramToJson(const Diagnosis& d) {
  const ProgramDiagnosis& p = d.program;
  if (d.data.plugin_ranks.empty() && d.data.program_beats.empty()) return nullptr;
  if (d.data.plugin_ranks.empty()) {
    return {{"command", d.data.program_beats.begin()->second.command},
            {"processes", ProcessesJson(d)},
            {"nccl", false}};
  }
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
  return {{"command", d.data.program_beats.empty()
                          ? json(nullptr)
                          : json(d.data.program_beats.begin()->second.command)},
          {"processes", ProcessesJson(d)},
          {"nccl", true},
          {"comm", p.comm},
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
