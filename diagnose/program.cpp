// A user's program (launch.command, `ringpilot exec`): its ranks' NCCL profiler records
// (logs/rank-<N>.nccl.json) read and analysed: time in communication, bus bandwidth against
// the topology's, the rank the others wait for, and a hang (see diagnose.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "diagnose/diagnose.h"
#include "history/nccl_record.h"
#include "history/rank_files.h"
#include "history/record_fields.h"
#include "topology/bandwidth.h"
#include "topology/node_topology.h"

namespace ringpilot::diagnose {
namespace fs = std::filesystem;

namespace {

// A collective whose kernel times differ by less than this across the ranks had no rank
// arriving noticeably last.
constexpr double kArrivalSpreadSeconds = 10e-6;
// The collectives whose bus bandwidth follows the ring model of topology/bandwidth.h.
const std::set<std::string> kRingOps = {"allreduce", "allgather", "reduce_scatter", "broadcast"};

std::optional<InFlightOp> InFlightOf(const std::optional<history::NcclInFlight>& o,
                                     bool abandoned) {
  if (!o) return std::nullopt;
  return InFlightOp{o->op, o->seq, o->start_unix, o->age_seconds, abandoned};
}

PluginComm CommOf(const history::NcclCommRecord& c) {
  PluginComm comm;
  comm.comm = c.comm;
  comm.name = c.name;
  comm.comm_rank = c.comm_rank;
  comm.comm_size = c.comm_size;
  comm.nodes = c.nodes;
  comm.gpu_timing = c.gpu_timing;
  comm.finalized = c.finalized;
  comm.init_unix = c.init_unix;
  comm.coll_started = c.collectives_started;
  comm.coll_completed = c.collectives_completed;
  std::map<std::pair<std::string, std::string>, CollectiveTotals> ops;
  std::map<std::pair<std::string, std::string>, double> weighted_bw;
  for (const history::NcclOperationTotals& o : c.operations) {
    const std::pair<std::string, std::string> key{o.op, o.size_bucket};
    CollectiveTotals& s = ops[key];
    s.op = key.first;
    s.size_bucket = key.second;
    s.count += o.count;
    s.bytes_total += o.bytes_total;
    s.seconds_total += o.seconds_total;
    // Over algorithms and protocols: timed bytes x factor / seconds, summed as such.
    weighted_bw[key] += o.busbw_bytes_per_second * o.seconds_total;
  }
  for (auto& [key, s] : ops) {
    s.busbw_bytes_per_second = s.seconds_total > 0 ? weighted_bw[key] / s.seconds_total : 0;
    comm.ops.push_back(s);
  }
  comm.in_flight = InFlightOf(c.oldest_in_flight, false);
  if (!comm.in_flight) comm.in_flight = InFlightOf(c.abandoned_oldest, true);
  for (const history::NcclRecentCollective& r : c.recent_collectives) {
    comm.recent.push_back({r.seq, r.op, static_cast<double>(r.bytes), r.enqueue_unix,
                           static_cast<double>(r.kernel_start_ns), r.seconds});
  }
  std::sort(comm.recent.begin(), comm.recent.end(),
            [](const RecentCollective& a, const RecentCollective& b) { return a.seq < b.seq; });
  return comm;
}

PluginRank PluginRankOf(const history::NcclRecord& record, const std::string& file) {
  PluginRank r;
  r.file = file;
  r.rank = record.rank;
  r.node = record.node;
  r.local_rank = record.local_rank;
  r.written_unix = record.written_unix;
  for (const history::NcclCommRecord& c : record.communicators) r.comms.push_back(CommOf(c));
  return r;
}

const PluginComm* FindComm(const PluginRank& r, const std::string& comm) {
  for (const PluginComm& c : r.comms) {
    if (c.comm == comm) return &c;
  }
  return nullptr;
}

// The communicator most ranks have (the world's, normally); ties: the larger.
std::string MainComm(const std::vector<PluginRank>& ranks) {
  std::map<std::string, std::pair<int, int>> seen;  // comm -> (ranks, size)
  for (const PluginRank& r : ranks) {
    for (const PluginComm& c : r.comms) {
      auto& s = seen[c.comm];
      ++s.first;
      s.second = std::max(s.second, c.comm_size);
    }
  }
  std::string best;
  std::pair<int, int> best_key{-1, -1};
  for (const auto& [comm, key] : seen) {
    if (key > best_key) {
      best_key = key;
      best = comm;
    }
  }
  return best;
}

std::string Gb(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_second / 1e9);
  return buf;
}

// The expected bus bandwidth of `comm` from the snapshots of its ranks' nodes: the slowest.
double Expected(const RunData& run, const std::string& comm, std::string* source) {
  int size = 0, nodes = 0;
  bool gpu = false;
  std::set<std::string> hosts;
  for (const PluginRank& r : run.plugin_ranks) {
    if (const PluginComm* c = FindComm(r, comm)) {
      size = std::max(size, c->comm_size);
      nodes = std::max(nodes, c->nodes);
      gpu = gpu || c->gpu_timing;
      hosts.insert(r.node);
    }
  }
  if (nodes <= 0) nodes = static_cast<int>(std::max<std::size_t>(hosts.size(), 1));
  double best = 0;
  bool first = true;
  for (const std::string& host : hosts) {
    const auto it = run.topology_files.find(host);
    if (it == run.topology_files.end()) {
      *source = "unknown: no logs/topology-" + host +
                ".json (written by `ringpilot run`, or `ringpilot exec --bind`)";
      return 0;
    }
    topology::NodeTopology node;
    try {
      node = topology::LoadSnapshot(it->second);
    } catch (const topology::SnapshotError& e) {
      throw DiagnoseError(e.what());
    }
    const topology::JobBusBandwidth bw = topology::ExpectedJobBusBandwidth(
        node, gpu && !node.gpus.empty(), std::max(size / std::max(nodes, 1), 1), nodes);
    if (first || bw.bytes_per_second < best) {
      best = bw.bytes_per_second;
      *source = host + ": " + bw.source;
      first = false;
    }
  }
  return best;
}

void Straggler(const RunData& run, const std::string& comm, ProgramDiagnosis* p) {
  // seq -> rank -> its record of that collective
  std::map<uint64_t, std::map<int, const RecentCollective*>> by_seq;
  int present = 0;
  for (const PluginRank& r : run.plugin_ranks) {
    const PluginComm* c = FindComm(r, comm);
    if (c == nullptr) continue;
    ++present;
    for (const RecentCollective& rc : c->recent) by_seq[rc.seq][r.rank] = &rc;
  }
  if (present < 2) return;
  std::map<int, ProgramCulprit> culprits;
  for (const auto& [seq, ranks] : by_seq) {
    if (static_cast<int>(ranks.size()) != present) continue;  // not every rank has it (yet)
    ++p->aligned_collectives;
    const auto shortest = std::min_element(ranks.begin(), ranks.end(), [](auto& a, auto& b) {
      return a.second->seconds < b.second->seconds;
    });
    const auto longest = std::max_element(ranks.begin(), ranks.end(), [](auto& a, auto& b) {
      return a.second->seconds < b.second->seconds;
    });
    if (longest->second->seconds - shortest->second->seconds > kArrivalSpreadSeconds) {
      ProgramCulprit& c = culprits[shortest->first];
      c.rank = shortest->first;
      ++c.last_arrivals;
      for (const auto& [rank, rc] : ranks)
        c.caused_wait_seconds += rc->seconds - shortest->second->seconds;
    }
    const auto last_in = std::max_element(ranks.begin(), ranks.end(), [](auto& a, auto& b) {
      return a.second->enqueue_unix < b.second->enqueue_unix;
    });
    ProgramCulprit& e = culprits[last_in->first];
    e.rank = last_in->first;
    ++e.last_enqueues;
  }
  for (const auto& [rank, c] : culprits) p->ranking.push_back(c);
  std::sort(p->ranking.begin(), p->ranking.end(),
            [](const ProgramCulprit& a, const ProgramCulprit& b) {
              if (a.caused_wait_seconds != b.caused_wait_seconds) {
                return a.caused_wait_seconds > b.caused_wait_seconds;
              }
              if (a.last_arrivals != b.last_arrivals) return a.last_arrivals > b.last_arrivals;
              return a.rank < b.rank;
            });
}

void Hang(const RunData& run, const std::string& comm, ProgramDiagnosis* p) {
  struct View {
    int rank;
    const PluginComm* c;
    double written;
  };
  std::vector<View> views;
  double newest = 0;
  for (const PluginRank& r : run.plugin_ranks) {
    if (const PluginComm* c = FindComm(r, comm)) views.push_back({r.rank, c, r.written_unix});
    newest = std::max(newest, r.written_unix);
  }
  HangReport h;
  h.comm = comm;
  for (const View& v : views) {
    if (!v.c->in_flight) continue;
    const InFlightOp& op = *v.c->in_flight;
    // Live: still in it now, as far as anyone knows; aborted: as long as it was then.
    const double waited =
        op.abandoned ? op.age_seconds : op.age_seconds + std::max(0.0, run.now_unix - v.written);
    if (!op.abandoned && waited < kStuckSeconds) continue;
    h.aborted = h.aborted || op.abandoned;
    h.waiting.push_back(v.rank);
    if (waited > h.waited_seconds) {
      h.waited_seconds = waited;
      h.seq = op.seq;
      h.op = op.op;
    }
  }
  if (h.waiting.empty()) return;
  // Behind: the fewest collectives completed, then begun.
  const View* behind = nullptr;
  for (const View& v : views) {
    if (behind == nullptr ||
        std::make_pair(v.c->coll_completed, v.c->coll_started) <
            std::make_pair(behind->c->coll_completed, behind->c->coll_started)) {
      behind = &v;
    }
  }
  bool level = true;
  for (const View& v : views) {
    level = level && v.c->coll_completed == behind->c->coll_completed &&
            v.c->coll_started == behind->c->coll_started;
  }
  if (!level) {
    h.rank_behind = behind->rank;
    h.behind_completed = behind->c->coll_completed;
    h.behind_started = behind->c->coll_started;
    h.waiting.erase(std::remove(h.waiting.begin(), h.waiting.end(), h.rank_behind),
                    h.waiting.end());
  }
  for (const PluginRank& r : run.plugin_ranks) {
    if (newest - r.written_unix > kSilentSeconds) h.silent.push_back(r.rank);
  }
  p->hang = h;
}

}  // namespace

void LoadPluginRanks(const std::string& run_dir, RunData* data) {
  const fs::path logs = fs::path(run_dir) / "logs";
  std::map<int, std::string> files = history::RankFiles(logs.string(), history::kNcclRecordSuffix);
  files.erase(files.upper_bound(history::kMaxRecordRank), files.end());  // as the files' "rank"
  for (const auto& [rank, path] : files) {
    data->plugin_ranks.push_back(PluginRankOf(history::ReadNcclRecord(path, rank), path));
  }
  data->topology_files = history::TopologySnapshotFiles(logs.string());
}

void AnalyzeProgram(Diagnosis* d) {
  const RunData& run = d->data;
  ProgramDiagnosis& p = d->program;
  if (run.plugin_ranks.empty()) return;
  p.comm = MainComm(run.plugin_ranks);

  double share_sum = 0;
  int share_n = 0;
  for (const PluginRank& r : run.plugin_ranks) {
    ProgramRankRow row;
    row.rank = r.rank;
    row.node = r.node;
    double first_init = 0;
    for (const PluginComm& c : r.comms) {
      for (const CollectiveTotals& s : c.ops) row.comm_seconds += s.seconds_total;
      if (c.init_unix > 0 && (first_init == 0 || c.init_unix < first_init))
        first_init = c.init_unix;
    }
    if (first_init > 0 && r.written_unix > first_init) {
      row.elapsed_seconds = r.written_unix - first_init;
      row.comm_share = row.comm_seconds / row.elapsed_seconds;
      share_sum += row.comm_share;
      ++share_n;
    }
    if (const PluginComm* c = FindComm(r, p.comm)) {
      row.started = c->coll_started;
      row.completed = c->coll_completed;
    }
    row.silent_seconds = std::max(0.0, run.now_unix - r.written_unix);
    p.ranks.push_back(row);
  }
  if (share_n > 0) p.comm_share = share_sum / share_n;

  Straggler(run, p.comm, &p);
  Hang(run, p.comm, &p);

  // Bus bandwidth per op and size over the ranks, against the topology's figure.
  const double expected = Expected(run, p.comm, &p.expected_source);
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<int, CollectiveTotals>>>
      groups;
  for (const PluginRank& r : run.plugin_ranks) {
    for (const PluginComm& c : r.comms) {
      if (c.comm != p.comm) continue;
      for (const CollectiveTotals& s : c.ops) groups[{s.op, s.size_bucket}].push_back({r.rank, s});
    }
  }
  for (const auto& [key, list] : groups) {
    CollectiveRow row;
    row.op = key.first;
    row.size_bucket = key.second;
    double bw_sum = 0;
    int bw_n = 0;
    row.busbw_min = -1;
    for (const auto& [rank, s] : list) {
      row.count += s.count;
      row.bytes_total += s.bytes_total;
      row.seconds_total += s.seconds_total;
      if (s.busbw_bytes_per_second <= 0) continue;
      bw_sum += s.busbw_bytes_per_second;
      ++bw_n;
      if (row.busbw_min < 0 || s.busbw_bytes_per_second < row.busbw_min) {
        row.busbw_min = s.busbw_bytes_per_second;
        row.busbw_min_rank = rank;
      }
    }
    row.busbw_mean = bw_n > 0 ? bw_sum / bw_n : 0;
    if (row.busbw_min < 0) row.busbw_min = 0;
    row.expected = kRingOps.count(row.op) ? expected : 0;
    row.low = row.expected > 0 && row.busbw_mean > 0 && row.busbw_mean < 0.5 * row.expected;
    p.collectives.push_back(row);
  }
  std::stable_sort(p.collectives.begin(), p.collectives.end(),
                   [](const CollectiveRow& a, const CollectiveRow& b) {
                     if (a.op != b.op) return a.op < b.op;
                     const auto sa = ParseSizeBucket(a.size_bucket);
                     const auto sb = ParseSizeBucket(b.size_bucket);
                     return std::max(sa.first, sa.second) < std::max(sb.first, sb.second);
                   });

  // Warnings, the hang first.
  if (p.hang) {
    const HangReport& h = *p.hang;
    std::string line = "hang: ";
    if (h.rank_behind >= 0) {
      line += "rank " + std::to_string(h.rank_behind) + " is behind (" +
              std::to_string(h.behind_completed) + " collectives completed): ";
    }
    std::string waiting;
    for (int r : h.waiting) waiting += (waiting.empty() ? "" : ",") + std::to_string(r);
    line += "rank(s) " + (waiting.empty() ? std::string("-") : waiting) + " waited " +
            std::to_string(static_cast<long long>(h.waited_seconds)) + " s in " + h.op + " #" +
            std::to_string(h.seq) + " on communicator " + h.comm + (h.aborted ? " (aborted)" : "");
    d->warnings.push_back(line);
  }
  for (int r : p.hang ? p.hang->silent : std::vector<int>{}) {
    d->warnings.push_back("rank " + std::to_string(r) +
                          " stopped reporting (its nccl.json is older than the others' by over " +
                          std::to_string(static_cast<int>(kSilentSeconds)) +
                          " s): stopped or dead");
  }
  if (!p.ranking.empty() && p.aligned_collectives > 0 && p.ranking[0].caused_wait_seconds > 0 &&
      2 * p.ranking[0].last_arrivals > p.aligned_collectives) {
    const ProgramCulprit& c = p.ranking[0];
    char text[256];
    std::snprintf(text, sizeof text,
                  "straggler: rank %d arrived last at %d of %d collectives; the others waited "
                  "%.3f s for it",
                  c.rank, c.last_arrivals, p.aligned_collectives, c.caused_wait_seconds);
    d->warnings.push_back(text);
  }
  for (const CollectiveRow& row : p.collectives) {
    if (!row.low) continue;
    d->warnings.push_back(row.op + " " + row.size_bucket + ": bus bandwidth " + Gb(row.busbw_mean) +
                          " is under half of the expected " + Gb(row.expected) + " (" +
                          p.expected_source + ")");
  }
}

}  // namespace ringpilot::diagnose
