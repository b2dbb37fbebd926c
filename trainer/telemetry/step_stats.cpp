#include "trainer/telemetry/step_stats.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ringpilot::trainer::telemetry {

const char* ToString(Phase p) {
  switch (p) {
    case Phase::kData:
      return "data";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kCommExposed:
      return "comm_exposed";
  }
  return "unknown";
}

StragglerStep AttributeStraggler(const std::vector<ArrivalSample>& samples, int rank) {
  StragglerStep s;
  if (samples.empty() || rank < 0 || rank >= static_cast<int>(samples.size())) return s;
  double fastest = samples[0].compute_seconds;
  std::vector<int> order(samples.size());
  for (int r = 0; r < static_cast<int>(samples.size()); ++r) {
    order[r] = r;
    fastest = std::min(fastest, samples[r].compute_seconds);
  }
  // Arrival order; ties keep rank order so every rank names the same culprit.
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return samples[a].ready_unix < samples[b].ready_unix; });
  s.culprit = order.back();
  s.wait_seconds = std::max(0.0, samples[s.culprit].ready_unix - samples[rank].ready_unix);
  s.skew_seconds = samples[rank].compute_seconds - fastest;
  // Blaming the whole wait on the last arrival would also charge it with our own lead over
  // the ranks in between; each later arrival answers only for the interval it added.
  double since = samples[rank].ready_unix;
  bool after_us = false;
  for (int r : order) {
    if (r == rank) {
      after_us = true;
      continue;
    }
    if (!after_us || samples[r].ready_unix <= since) continue;
    s.blame.emplace_back(r, samples[r].ready_unix - since);
    since = samples[r].ready_unix;
  }
  return s;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

double EstimateClockOffset(int rounds) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Ranks of one host read the same CLOCK_REALTIME: their offset to a rank of the same
  // host is exactly 0, and a ping-pong between oversubscribed ranks would only add the
  // scheduler's delays to it. So only one rank per host (its lowest) measures, against
  // rank 0, and tells the others of its host.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm leaders = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, local == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
  double offset = 0;
  if (leaders != MPI_COMM_NULL) {
    // World rank 0 is its host's lowest rank, hence leader 0.
    int me = 0, hosts = 1;
    MPI_Comm_rank(leaders, &me);
    MPI_Comm_size(leaders, &hosts);
    constexpr int kTag = 7301;
    auto now = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
    for (int peer = 1; peer < hosts; ++peer) {
      double best_rtt = 1e30;
      for (int i = 0; i < rounds; ++i) {
        if (me == 0) {
          double ping = 0;
          MPI_Recv(&ping, 1, MPI_DOUBLE, peer, kTag, leaders, MPI_STATUS_IGNORE);
          const double t0 = now();
          MPI_Send(&t0, 1, MPI_DOUBLE, peer, kTag, leaders);
        } else if (me == peer) {
          const double t1 = now();
          MPI_Send(&t1, 1, MPI_DOUBLE, 0, kTag, leaders);
          double t0 = 0;
          MPI_Recv(&t0, 1, MPI_DOUBLE, 0, kTag, leaders, MPI_STATUS_IGNORE);
          const double t2 = now();
          if (t2 - t1 < best_rtt) {
            best_rtt = t2 - t1;
            offset = t0 - (t1 + t2) / 2;
          }
        }
      }
    }
    MPI_Comm_free(&leaders);
  }
  MPI_Bcast(&offset, 1, MPI_DOUBLE, 0, node);
  MPI_Comm_free(&node);
  return offset;
}

StepStats::StepStats(int rank, int world, std::string node, int local_rank)
    : rank_(rank), world_(world), local_rank_(local_rank), node_(std::move(node)) {}

void StepStats::AddStraggler(const StragglerStep& s) {
  if (s.culprit < 0) return;
  ++straggler_steps_;
  ++culprit_steps_[s.culprit];
  wait_total_ += s.wait_seconds;
  skew_sum_ += s.skew_seconds;
  for (const auto& [r, seconds] : s.blame) wait_by_culprit_[r] += seconds;
}

void StepStats::AddStep(double seconds) {
  step_total_ += seconds;
  ++steps_;
}

void StepStats::AddCollective(comm::CollectiveOp op, int64_t bytes, double seconds) {
  auto& c = coll_[{static_cast<int>(op), SizeBucket(bytes)}];
  ++c.count;
  c.bytes += bytes;
  c.seconds += seconds;
  comm_since_take_ += seconds;
  comm_total_ += seconds;
}

void StepStats::StartTimedWindow() {
  phase_total_.fill(0.0);
  input_waits_.clear();
  coll_.clear();
  comm_total_ = 0;
  gpu_idle_total_ = 0;
  gpu_idle_known_ = false;
  if (clocks_) clocks_->Start();
}

double StepStats::TakeCommSeconds() {
  const double s = comm_since_take_;
  comm_since_take_ = 0;
  return s;
}

double StepStats::BusBandwidth(comm::CollectiveOp op) const {
  const Coll* best = nullptr;
  int64_t best_avg = -1;
  for (const auto& [key, c] : coll_) {
    if (key.first != static_cast<int>(op) || c.count == 0) continue;
    if (c.bytes / c.count > best_avg) {
      best_avg = c.bytes / c.count;
      best = &c;
    }
  }
  if (!best || best->seconds <= 0) return 0;
  return best->bytes * comm::BusBandwidthFactor(op, world_) / best->seconds;
}

double StepStats::overlap_ratio() const {
  // Share of communication time hidden behind computation.
  if (comm_total_ <= 0) return 0;
  const double exposed = phase_total_[static_cast<int>(Phase::kCommExposed)];
  return std::clamp(1.0 - exposed / comm_total_, 0.0, 1.0);
}

history::RankStats StepStats::Record(int64_t steps, double p50, double p99) const {
  history::RankStats r;
  r.rank = rank_;
  r.node = node_;
  r.local_rank = local_rank_;
  r.world_size = world_;
  r.steps = static_cast<uint64_t>(std::max<int64_t>(steps, 0));
  r.step_p50 = p50;
  r.step_p99 = p99;
  r.step_mean = steps_ ? step_total_ / steps_ : 0;
  for (int i = 0; i < kNumPhases; ++i)
    r.phase_seconds_total[ToString(static_cast<Phase>(i))] = phase_total_[i];
  history::InputWaitSeconds wait;
  wait.steps = input_waits_.size();
  wait.total = phase_total_[static_cast<int>(Phase::kData)];
  wait.p50 = Percentile(input_waits_, 0.5);
  wait.p99 = Percentile(input_waits_, 0.99);
  wait.max =
      input_waits_.empty() ? 0.0 : *std::max_element(input_waits_.begin(), input_waits_.end());
  r.input_wait = wait;
  r.image_decode = image_decode_;
  if (clocks_) r.gpu_clocks = clocks_->Report();
  if (gpu_idle_known_) r.gpu_idle_seconds = gpu_idle_total_;
  r.overlap_ratio = overlap_ratio();
  r.wait_seconds_total = wait_total_;
  for (const auto& [culprit, n] : culprit_steps_) r.culprit_steps[culprit] = static_cast<double>(n);
  r.wait_by_culprit = wait_by_culprit_;
  r.compute_skew_mean = straggler_steps_ ? skew_sum_ / straggler_steps_ : 0;
  for (const auto& [key, c] : coll_) {
    const auto op = static_cast<comm::CollectiveOp>(key.first);
    history::CollectiveTotals t;
    t.op = comm::ToString(op);
    t.size_bucket = key.second;
    t.count = static_cast<uint64_t>(c.count);
    t.bytes_total = static_cast<uint64_t>(c.bytes);
    t.seconds_total = c.seconds;
    t.busbw_bytes_per_second =
        c.seconds > 0 ? c.bytes * comm::BusBandwidthFactor(op, world_) / c.seconds : 0.0;
    r.collectives.push_back(std::move(t));
  }
  // One figure for every op: busbw is normalised to the slowest link.
  for (const char* op : {"allreduce", "allgather", "broadcast"})
    r.expected_busbw[op] = expected_busbw_;
  return r;
}

}  // namespace ringpilot::trainer::telemetry
