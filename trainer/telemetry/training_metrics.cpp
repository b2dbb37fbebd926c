#include "trainer/telemetry/training_metrics.h"

#include <chrono>

namespace ringpilot::trainer::telemetry {

TrainingMetrics::TrainingMetrics(const RankIdentity& id) {
  metrics::Labels labels{{"job", id.job},
                         {"node", id.node},
                         {"rank", std::to_string(id.rank)},
                         {"local_rank", std::to_string(id.local_rank)}};
  if (!id.gpu_uuid.empty()) labels.emplace("gpu_uuid", id.gpu_uuid);
  if (!id.pci_bus_id.empty()) labels.emplace("pci_bus_id", id.pci_bus_id);
  families_ = std::make_unique<metrics::Families>(std::move(labels));
  auto& r = *families_;
  // 1 ms .. ~65 s: CPU steps of a big model and GPU steps of a small one both resolve.
  step_seconds_ = &r.AddHistogram("ringpilot_step_seconds", "Wall time of one training step.")
                       .Add({}, metrics::ExponentialBuckets(0.001, 2.0, 17));
  samples_total_ =
      &r.AddCounter("ringpilot_samples_total", "Samples processed by this rank.").Add({});
  steps_total_ = &r.AddCounter("ringpilot_steps_total", "Training steps completed.").Add({});
  loss_ = &r.AddGauge("ringpilot_loss", "Loss of the last reported step on this rank.").Add({});
  learning_rate_ =
      &r.AddGauge("ringpilot_learning_rate", "Learning rate of the last step (train.lr_schedule).")
           .Add({});
  grad_norm_ = &r.AddGauge("ringpilot_grad_norm",
                           "Global L2 norm of the gradients before clipping, as of the last "
                           "progress line (train.max_grad_norm > 0; else 0).")
                    .Add({});
  eval_top1_ = &r.AddGauge("ringpilot_eval_top1",
                           "Top-1 accuracy of the last evaluation on data.val (0..1).")
                    .Add({});
  eval_top5_ = &r.AddGauge("ringpilot_eval_top5",
                           "Top-5 accuracy of the last evaluation on data.val (0..1).")
                    .Add({});
  eval_mlm_accuracy_ =
      &r.AddGauge("ringpilot_eval_mlm_accuracy",
                  "Masked-LM accuracy of the last evaluation on data.val (0..1): masked "
                  "positions whose top-scored id is the original token.")
           .Add({});
  eval_loss_ =
      &r.AddGauge("ringpilot_eval_loss", "Mean loss of the last evaluation on data.val.").Add({});
  eval_samples_ = &r.AddGauge("ringpilot_eval_samples",
                              "Validation samples of the last evaluation, all ranks together.")
                       .Add({});
  checkpoint_seconds_ =
      &r.AddHistogram("ringpilot_checkpoint_seconds", "Time to write one checkpoint (rank 0).")
           .Add({}, metrics::ExponentialBuckets(0.01, 2.0, 14));
  restarts_ = &r.AddGauge("ringpilot_restarts", "Restarts of this job so far.").Add({});
  images_decoded_ = &r.AddCounter("ringpilot_data_images_decoded_total",
                                  "Images the rank's input pipeline decoded (image kinds; "
                                  "substitutes of bad samples included).")
                         .Add({});
  bad_samples_ = &r.AddCounter("ringpilot_data_bad_samples_total",
                               "Training batch entries whose image could not be used and was "
                               "replaced by a substitute (image kinds).")
                      .Add({});
  prefetch_batches_ = &r.AddGauge("ringpilot_data_prefetch_batches",
                                  "Batches decoded and waiting ahead of the training step when "
                                  "it took its batch (image kinds; up to data.prefetch).")
                           .Add({});
  auto& expected = r.AddGauge("ringpilot_expected_bus_bandwidth_bytes_per_second",
                              "Bus bandwidth the topology model expects for this job's "
                              "collectives (docs/topology.md); 0 = no model.");
  for (int i = 0; i < kOps; ++i) {
    const auto op = static_cast<comm::CollectiveOp>(i);
    if (op != comm::CollectiveOp::kBarrier) {
      expected_busbw_[i] = &expected.Add({{"op", comm::ToString(op)}});
    }
  }
  r.AddGauge("ringpilot_process_start_time_seconds", "Start time of this rank, Unix seconds.")
      .Add({})
      .Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
               .count());
  auto& coll_seconds = r.AddHistogram("ringpilot_collective_seconds",
                                      "Time from issue to observed completion of a collective.");
  const std::vector<double> coll_buckets = metrics::ExponentialBuckets(1e-5, 2.0, 22);
  auto& coll_bytes =
      r.AddCounter("ringpilot_collective_bytes_total", "Payload bytes of collectives, per rank.");
  auto& busbw = r.AddGauge("ringpilot_collective_bus_bandwidth_bytes_per_second",
                           "Bus bandwidth (nccl-tests definition) of the largest message size "
                           "class of this op, over the run so far.");
  // One representative size per class, to name the label values.
  const int64_t class_sizes[kSizeBuckets] = {1, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  for (int i = 0; i < kOps; ++i) {
    const char* op = comm::ToString(static_cast<comm::CollectiveOp>(i));
    for (int b = 0; b < kSizeBuckets; ++b) {
      collective_seconds_[i][b] = &coll_seconds.Add(
          {{"op", op}, {"size_bucket", SizeBucket(class_sizes[b])}}, coll_buckets);
    }
    collective_bytes_[i] = &coll_bytes.Add({{"op", op}});
    busbw_[i] = &busbw.Add({{"op", op}});
  }
  auto& phases =
      r.AddHistogram("ringpilot_step_phase_seconds", "Host time of one phase of a training step.");
  const std::vector<double> phase_buckets = metrics::ExponentialBuckets(1e-4, 2.0, 20);
  for (int p = 0; p < kNumPhases; ++p) {
    phase_seconds_[p] = &phases.Add({{"phase", ToString(static_cast<Phase>(p))}}, phase_buckets);
  }
  straggler_wait_ = &r.AddCounter(
      "ringpilot_straggler_wait_seconds_total",
      "Time this rank waited for the slowest rank, attributed to that rank (culprit_rank).");
  skew_ = &r.AddGauge("ringpilot_rank_compute_skew_seconds",
                      "This rank's compute time minus the fastest rank's, last step.")
               .Add({});
  overlap_ = &r.AddGauge("ringpilot_comm_overlap_ratio",
                         "Share of communication time hidden behind computation, so far.")
                  .Add({});
  started_seq_ = &r.AddGauge("ringpilot_collective_last_started_seq",
                             "Sequence number of the last collective this rank issued.")
                      .Add({});
  completed_seq_ = &r.AddGauge("ringpilot_collective_last_completed_seq",
                               "Sequence number of the last collective this rank saw complete.")
                        .Add({});
  build_info_ =
      &r.AddGauge("ringpilot_build_info", "Versions this rank runs with (value is always 1).");
}

void TrainingMetrics::Serve(const std::string& bind, int port) {
  metrics::ExporterOptions o;
  o.bind = bind;
  o.port = port;
  exporter_ = std::make_unique<metrics::Exporter>(families_->registry(), o);
}

int TrainingMetrics::port() const { return exporter_ ? exporter_->port() : 0; }

void TrainingMetrics::SetBuildInfo(const std::vector<std::pair<std::string, std::string>>& labels) {
  metrics::Labels all{{"version", "0.1.0"}};
  all.insert(labels.begin(), labels.end());
  build_info_->Add(all).Set(1);
}

void TrainingMetrics::SetRestarts(int restarts) { restarts_->Set(restarts); }

void TrainingMetrics::SetExpectedBusBandwidth(double bytes_per_second) {
  for (metrics::Gauge* g : expected_busbw_) {
    if (g) g->Set(bytes_per_second);
  }
}

void TrainingMetrics::OnStep(double seconds, int64_t samples) {
  step_seconds_->Observe(seconds);
  samples_total_->Increment(static_cast<double>(samples));
  steps_total_->Increment();
  if (trace_)
    trace_->Complete("step", "step", metrics::Trace::kTrainTid, seconds, "attempt_step", steps_);
  ++steps_;
}

void TrainingMetrics::SetLoss(double loss) { loss_->Set(loss); }
void TrainingMetrics::SetLearningRate(double lr) { learning_rate_->Set(lr); }
void TrainingMetrics::SetGradNorm(double norm) { grad_norm_->Set(norm); }

void TrainingMetrics::SetEval(double top1, double top5, double loss, double samples) {
  eval_top1_->Set(top1);
  eval_top5_->Set(top5);
  eval_loss_->Set(loss);
  eval_samples_->Set(samples);
}

void TrainingMetrics::SetMlmEval(double accuracy, double loss, double samples) {
  eval_mlm_accuracy_->Set(accuracy);
  eval_loss_->Set(loss);
  eval_samples_->Set(samples);
}

void TrainingMetrics::OnCheckpoint(double seconds) { checkpoint_seconds_->Observe(seconds); }

void TrainingMetrics::OnImageInput(int64_t decoded, int64_t bad_samples, int ready_batches) {
  if (decoded > 0) images_decoded_->Increment(static_cast<double>(decoded));
  if (bad_samples > 0) bad_samples_->Increment(static_cast<double>(bad_samples));
  prefetch_batches_->Set(ready_batches);
}

void TrainingMetrics::OnCollective(comm::CollectiveOp op, int64_t bytes, double seconds,
                                   double start_unix) {
  const int i = static_cast<int>(op);
  if (i < 0 || i >= kOps) return;
  int b = 0;
  for (int64_t limit : {int64_t{64} << 10, int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20,
                        int64_t{64} << 20}) {
    if (bytes < limit) break;
    ++b;
  }
  collective_seconds_[i][b]->Observe(seconds);
  collective_bytes_[i]->Increment(static_cast<double>(bytes));
  if (stats_) stats_->AddCollective(op, bytes, seconds);
  Trace(comm::ToString(op), "collective", metrics::Trace::kCommTid, seconds, start_unix, "bytes",
        bytes);
}

void TrainingMetrics::Trace(const char* name, const char* cat, int tid, double seconds,
                            double start_unix, const char* arg_name, int64_t arg) {
  if (!trace_) return;
  if (std::isnan(start_unix)) {
    trace_->Complete(name, cat, tid, seconds, arg_name, arg);
  } else {
    trace_->CompleteAt(name, cat, tid, start_unix, seconds, arg_name, arg);
  }
}

void TrainingMetrics::OnPhase(Phase phase, double seconds, double start_unix) {
  phase_seconds_[static_cast<int>(phase)]->Observe(seconds);
  if (stats_) stats_->AddPhase(phase, seconds);
  Trace(ToString(phase), "phase", metrics::Trace::kTrainTid, seconds, start_unix);
}

void TrainingMetrics::OnStraggler(const StragglerStep& s) {
  if (s.culprit < 0) return;
  for (const auto& [r, seconds] : s.blame) {
    if (static_cast<size_t>(r) >= wait_by_culprit_.size()) wait_by_culprit_.resize(r + 1, nullptr);
    auto*& counter = wait_by_culprit_[r];
    // Created on first use only: Family::Add takes a lock.
    if (!counter) counter = &straggler_wait_->Add({{"culprit_rank", std::to_string(r)}});
    counter->Increment(seconds);
  }
  skew_->Set(s.skew_seconds);
  if (stats_) stats_->AddStraggler(s);
}

void TrainingMetrics::SetOverlapRatio(double ratio) { overlap_->Set(ratio); }

void TrainingMetrics::Refresh(const StepStats& stats) {
  for (int i = 0; i < kOps; ++i) {
    busbw_[i]->Set(stats.BusBandwidth(static_cast<comm::CollectiveOp>(i)));
  }
  overlap_->Set(stats.overlap_ratio());
}

void TrainingMetrics::WatchSequences(const comm::Communicator* comm) {
  watched_ = comm;
  if (exporter_ && comm) {
    exporter_->SetScrapeCallback([this] {
      started_seq_->Set(static_cast<double>(watched_->started_seq()));
      completed_seq_->Set(static_cast<double>(watched_->completed_seq()));
    });
  }
}

}  // namespace ringpilot::trainer::telemetry
