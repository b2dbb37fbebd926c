#include "nccl_profiler/prometheus_export.h"

#include <algorithm>
#include <cstdio>

namespace ringpilot::nccl_profiler {
namespace {

metrics::Labels ConstLabels(const RankLabels& l) {
  // As the trainer's (trainer/telemetry/training_metrics.h RankLabels), less the GPU's.
  metrics::Labels labels{{"Hostname", l.node}, {"rank", std::to_string(l.rank)}};
  if (l.local_rank >= 0) labels.emplace("local_rank", std::to_string(l.local_rank));
  return labels;
}

std::vector<double> HistogramBounds() {
  std::vector<double> b;
  for (int i = 0; i < kHistogramBounds; ++i) b.push_back(HistogramBound(i));
  return b;
}

}  // namespace

std::string CommLabel(uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

PrometheusExport::PrometheusExport(const RankLabels& labels, int api_version)
    : families_(ConstLabels(labels)), api_version_(api_version) {
  auto& r = families_;
  coll_seconds_ = &r.AddHistogram(
      "ringpilot_collective_seconds",
      "GPU time of one NCCL operation: first kernel channel start to last channel stop.");
  coll_bytes_ =
      &r.AddCounter("ringpilot_collective_bytes_total", "Payload bytes of collectives, per rank.");
  coll_busbw_ = &r.AddGauge("ringpilot_collective_bus_bandwidth_bytes_per_second",
                            "Bus bandwidth (nccl-tests definition) of the message size class "
                            "that carried most of this op's timed bytes, over the run so far.");
  started_seq_ = &r.AddGauge("ringpilot_collective_last_started_seq",
                             "Sequence number of the last collective this rank issued.");
  completed_seq_ = &r.AddGauge("ringpilot_collective_last_completed_seq",
                               "Sequence number of the last collective this rank saw complete.");
  ops_ = &r.AddCounter("ringpilot_nccl_ops_total",
                       "NCCL operations completed, by op, size class, algorithm and protocol.");
  bytes_ = &r.AddCounter("ringpilot_nccl_bytes_total",
                         "Bytes of completed NCCL operations (nccl-tests message size).");
  seconds_ = &r.AddCounter("ringpilot_nccl_seconds_total",
                           "GPU time of completed NCCL operations (kernel channel span).");
  busbw_ = &r.AddGauge("ringpilot_nccl_bus_bandwidth_bytes_per_second",
                       "Bus bandwidth of timed NCCL operations so far (nccl-tests factors).");
  p2p_started_ = &r.AddGauge("ringpilot_nccl_p2p_last_started_seq",
                             "Sequence number of the last send/recv this rank issued.");
  p2p_completed_ = &r.AddGauge("ringpilot_nccl_p2p_last_completed_seq",
                               "Sequence number of the last send/recv this rank saw complete.");
  in_flight_ = &r.AddGauge("ringpilot_nccl_inflight_ops",
                           "NCCL operations enqueued on this communicator and not completed.");
  oldest_age_ = &r.AddGauge("ringpilot_nccl_oldest_inflight_seconds",
                            "Age of the oldest NCCL operation in flight (op label: its kind).");
  oldest_seq_ = &r.AddGauge("ringpilot_nccl_oldest_inflight_seq",
                            "Sequence number of the oldest NCCL operation in flight; 0 = none.");
  oldest_start_ = &r.AddGauge("ringpilot_nccl_oldest_inflight_start_time_seconds",
                              "When the oldest NCCL operation in flight was enqueued, Unix "
                              "seconds; 0 = none.");
  info_ = &r.AddGauge("ringpilot_nccl_communicator_info",
                      "A communicator NCCL reported to the profiler plugin (value is always 1).");
  dropped_ = &r.AddCounter("ringpilot_nccl_untracked_ops_total",
                           "NCCL operations not tracked because too many were in flight.");
  abandoned_ = &r.AddGauge("ringpilot_nccl_abandoned_ops",
                           "Operations still in flight when the communicator was finalized.");
  r.AddGauge("ringpilot_job_info",
             "The job this process belongs to: name (RINGPILOT_JOB_NAME; value is always 1).")
      .Add({{"name", labels.job}})
      .Set(1);
  process_ = std::make_unique<metrics::ProcessMetrics>(families_);
}

PrometheusExport::~PrometheusExport() = default;

void PrometheusExport::Advance(metrics::Counter& c, double value) {
  double& last = counted_[&c];
  if (value > last) {
    c.Increment(value - last);
    last = value;
  }
}

void PrometheusExport::Refresh(const std::vector<CommSnapshot>& comms) {
  process_->Update();
  for (const CommSnapshot& s : comms) {
    if (s.id.hash == 0) continue;  // v2/v3 before its first operation: no name yet
    RefreshComm(s);
  }
}

void PrometheusExport::RefreshComm(const CommSnapshot& s) {
  const std::string comm = CommLabel(s.id.hash);
  info_
      ->Add({{"comm", comm},
             {"name", s.id.name},
             {"comm_rank", std::to_string(s.id.rank)},
             {"comm_size", std::to_string(s.id.nranks)},
             {"nodes", std::to_string(s.id.nnodes)},
             {"api_version", std::to_string(api_version_)},
             {"timing", s.timing == Timing::kKernelChannels ? "gpu" : "none"}})
      .Set(1);

  // Per op: bytes, and the bus bandwidth of the size class that carried the most timed
  // bytes. Not simply the largest class: a program's one-off large operation (DDP's first
  // step reduces all gradients at once, timed with the peers still arriving) would
  // otherwise stand for its steady traffic for the rest of the run.
  std::map<int, double> op_bytes;
  std::map<int, std::pair<uint64_t, double>> op_busbw;  // op -> (class's timed bytes, busbw)
  std::map<std::pair<int, int>, std::pair<uint64_t, double>> class_time;  // bytes, seconds
  for (const CellSnapshot& c : s.cells) {
    const metrics::Labels labels{{"comm", comm},
                                 {"op", OpLabel(c.op)},
                                 {"size_bucket", comm::SizeBucketName(c.size_bucket)},
                                 {"algo", AlgoLabel(c.algo)},
                                 {"proto", ProtoLabel(c.proto)}};
    Advance(ops_->Add(labels), static_cast<double>(c.count));
    Advance(bytes_->Add(labels), static_cast<double>(c.bytes));
    if (c.timed_count > 0) {
      Advance(seconds_->Add(labels), c.seconds);
      busbw_->Add(labels).Set(c.busbw);
    }
    op_bytes[static_cast<int>(c.op)] += static_cast<double>(c.bytes);
    auto& t = class_time[{static_cast<int>(c.op), c.size_bucket}];
    t.first += c.timed_bytes;
    t.second += c.seconds;
  }
  for (const auto& [key, t] : class_time) {
    if (t.second <= 0) continue;
    const double busbw =
        t.first * BusBandwidthFactor(static_cast<NcclOp>(key.first), s.id.nranks) / t.second;
    // Classes come in increasing order: on equal bytes the larger class wins.
    auto it = op_busbw.find(key.first);
    if (it == op_busbw.end() || it->second.first <= t.first) {
      op_busbw[key.first] = {t.first, busbw};
    }
  }
  for (const auto& [op, bytes] : op_bytes) {
    Advance(coll_bytes_->Add({{"comm", comm}, {"op", OpLabel(static_cast<NcclOp>(op))}}), bytes);
  }
  for (const auto& [op, v] : op_busbw) {
    coll_busbw_->Add({{"comm", comm}, {"op", OpLabel(static_cast<NcclOp>(op))}}).Set(v.second);
  }
  // One time histogram per op, as the trainer's: the plugin keeps one per size class, whose
  // counts add up (the size classes stay in ringpilot_nccl_*_total).
  std::map<int, HistogramSnapshot> by_op;
  for (const HistogramSnapshot& h : s.histograms) {
    HistogramSnapshot& sum = by_op[static_cast<int>(h.op)];
    sum.op = h.op;
    for (int i = 0; i <= kHistogramBounds; ++i) sum.buckets[i] += h.buckets[i];
    sum.count += h.count;
    sum.sum_seconds += h.sum_seconds;
  }
  for (const auto& [op, h] : by_op) {
    metrics::Histogram& series =
        coll_seconds_->Add({{"comm", comm}, {"op", OpLabel(h.op)}},
                           metrics::Histogram::BucketBoundaries(HistogramBounds()));
    HistogramSnapshot& last = observed_[&series];
    std::vector<double> increments(kHistogramBounds + 1, 0.0);
    bool any = false;
    for (int i = 0; i <= kHistogramBounds; ++i) {
      if (h.buckets[i] > last.buckets[i]) {
        increments[i] = static_cast<double>(h.buckets[i] - last.buckets[i]);
        any = true;
      }
    }
    if (any) {
      series.ObserveMultiple(increments, std::max(0.0, h.sum_seconds - last.sum_seconds));
      last = h;
    }
  }

  const metrics::Labels by_comm{{"comm", comm}};
  started_seq_->Add(by_comm).Set(static_cast<double>(s.coll_started));
  completed_seq_->Add(by_comm).Set(static_cast<double>(s.coll_completed));
  if (s.p2p_started > 0) {
    p2p_started_->Add(by_comm).Set(static_cast<double>(s.p2p_started));
    p2p_completed_->Add(by_comm).Set(static_cast<double>(s.p2p_completed));
  }
  in_flight_->Add(by_comm).Set(static_cast<double>(s.in_flight));
  oldest_seq_->Add(by_comm).Set(s.has_oldest ? static_cast<double>(s.oldest.seq) : 0.0);
  oldest_start_->Add(by_comm).Set(s.has_oldest ? s.oldest.start_unix : 0.0);
  // The age series names the op in flight; it is replaced when that changes and removed
  // when nothing is in flight, so an alert on it names what the rank is stuck in.
  Oldest& o = oldest_[comm];
  const std::string op = s.has_oldest ? OpLabel(s.oldest.op) : "";
  if (o.age != nullptr && o.op != op) {
    oldest_age_->Remove(o.age);
    o.age = nullptr;
  }
  if (s.has_oldest) {
    if (o.age == nullptr) o.age = &oldest_age_->Add({{"comm", comm}, {"op", op}});
    o.op = op;
    o.age->Set(s.oldest.age_seconds);
  }
  Advance(dropped_->Add(by_comm), static_cast<double>(s.dropped));
  if (s.finalized) abandoned_->Add(by_comm).Set(static_cast<double>(s.abandoned));
}

}  // namespace ringpilot::nccl_profiler
