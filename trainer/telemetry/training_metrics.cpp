#include "trainer/telemetry/training_metrics.h"

#include <cstdlib>
#include <set>

#include "metrics/buckets.h"

namespace ringpilot::trainer::telemetry {
namespace {

// Counters that count the job's work rather than this process's, so they continue where
// the job's earlier processes left them (docs/metrics.md, "Counters across restarts").
// Histograms, process_* and GPU counters restart with the process, as in any exporter.
const std::set<std::string> kContinuedCounters = {
    "ringpilot_steps_total",
    "ringpilot_samples_total",
    "ringpilot_restarts_total",
    "ringpilot_collective_bytes_total",
    "ringpilot_straggler_wait_seconds_total",
    "ringpilot_data_images_decoded_total",
    "ringpilot_data_bad_samples_total",
};

// Ops that move bytes: barrier has no bytes or bus bandwidth series.
bool MovesBytes(int op) {
  return static_cast<comm::CollectiveOp>(op) != comm::CollectiveOp::kBarrier;
}

}  // namespace

metrics::Labels RankLabels(const RankIdentity& id) {
  metrics::Labels labels{{"Hostname", id.node},
                         {"rank", std::to_string(id.rank)},
                         {"local_rank", std::to_string(id.local_rank)}};
  if (!id.gpu.uuid.empty()) {
    for (const auto& [name, value] : metrics::GpuLabels(id.gpu)) labels.emplace(name, value);
  }
  return labels;
}

metrics::Counter& TrainingMetrics::Continued(metrics::Family<metrics::Counter>& family,
                                             const std::string& name,
                                             const metrics::Labels& labels) {
  metrics::Counter& c = family.Add(labels);
  if (journal_) {
    if (const double seeded = journal_->Seeded(name, labels); seeded > 0) c.Increment(seeded);
  }
  return c;
}

TrainingMetrics::TrainingMetrics(const RankIdentity& id, const std::string& counters_path,
                                 int restart) {
  families_ = std::make_unique<metrics::Families>(RankLabels(id));
  auto& r = *families_;
  if (!counters_path.empty()) {
    journal_ = std::make_shared<metrics::CounterJournal>(r.registry(), counters_path,
                                                         r.const_labels(), kContinuedCounters);
  }
  r.AddGauge("ringpilot_job_info",
             "The job this rank belongs to: name (job name) and world_size (value is always 1).")
      .Add({{"name", id.job}, {"world_size", std::to_string(id.world_size)}})
      .Set(1);
  step_seconds_ = &r.AddHistogram("ringpilot_step_seconds", "Wall time of one training step.")
                       .Add({}, metrics::BucketsOf(metrics::kStepSecondsBounds));
  samples_total_ = &Continued(
      r.AddCounter("ringpilot_samples_total", "Samples processed by this rank, over the job."),
      "ringpilot_samples_total", {});
  steps_total_ = &Continued(
      r.AddCounter("ringpilot_steps_total",
                   "Training steps this rank ran, over the job (repeated steps included)."),
      "ringpilot_steps_total", {});
  step_ =
      &r.AddGauge("ringpilot_step", "Steps of the job completed (the last step's number).").Add({});
  steps_target_ =
      &r.AddGauge("ringpilot_steps_target", "Steps the job runs to (train.steps).").Add({});
  metrics::Counter& restarts = Continued(
      r.AddCounter("ringpilot_restarts_total", "Restarts of the job's ranks after a failure."),
      "ringpilot_restarts_total", {});
  if (restart > 0) restarts.Increment();
  loss_ = &r.AddGauge("ringpilot_loss", "Loss of this rank's batch, last step read back.").Add({});
  learning_rate_ =
      &r.AddGauge("ringpilot_learning_rate", "Learning rate of the last step (train.lr_schedule).")
           .Add({});
  grad_norm_family_ = &r.AddGauge("ringpilot_grad_norm",
                                  "Global L2 norm of the gradients before clipping, of the step "
                                  "of ringpilot_loss (with train.max_grad_norm > 0).");
  eval_top1_family_ = &r.AddGauge("ringpilot_eval_top1_ratio",
                                  "Top-1 accuracy of the last evaluation on data.val (0..1).");
  eval_top5_family_ = &r.AddGauge("ringpilot_eval_top5_ratio",
                                  "Top-5 accuracy of the last evaluation on data.val (0..1).");
  eval_mlm_accuracy_family_ =
      &r.AddGauge("ringpilot_eval_mlm_accuracy_ratio",
                  "Masked-LM accuracy of the last evaluation on data.val (0..1): masked "
                  "positions whose top-scored id is the original token.");
  eval_loss_family_ =
      &r.AddGauge("ringpilot_eval_loss", "Mean loss of the last evaluation on data.val.");
  eval_samples_family_ = &r.AddGauge(
      "ringpilot_eval_samples", "Validation samples of the last evaluation, all ranks together.");
  checkpoint_seconds_ =
      &r.AddHistogram("ringpilot_checkpoint_seconds",
                      "Time training paused for one checkpoint (gather, write, barrier).")
           .Add({}, metrics::BucketsOf(metrics::kCheckpointSecondsBounds));
  expected_busbw_family_ =
      &r.AddGauge("ringpilot_expected_bus_bandwidth_bytes_per_second",
                  "Bus bandwidth the topology model expects for this job's collectives "
                  "(docs/topology.md).");
  auto& coll_seconds = r.AddHistogram("ringpilot_collective_seconds",
                                      "Time from issue to observed completion of a collective.");
  auto& coll_bytes =
      r.AddCounter("ringpilot_collective_bytes_total", "Payload bytes of collectives, per rank.");
  busbw_family_ = &r.AddGauge("ringpilot_collective_bus_bandwidth_bytes_per_second",
                              "Bus bandwidth (nccl-tests definition) of the largest message "
                              "size class of this op, over the run so far.");
  for (int i = 0; i < kOps; ++i) {
    const metrics::Labels op{{"op", comm::ToString(static_cast<comm::CollectiveOp>(i))}};
    collective_seconds_[i] =
        &coll_seconds.Add(op, metrics::BucketsOf(metrics::kCollectiveSecondsBounds));
    if (!MovesBytes(i)) continue;
    collective_bytes_[i] = &Continued(coll_bytes, "ringpilot_collective_bytes_total", op);
  }
  auto& phases =
      r.AddHistogram("ringpilot_step_phase_seconds", "Time of one phase of a training step.");
  for (int p = 0; p < kNumPhases; ++p) {
    phase_seconds_[p] = &phases.Add({{"phase", ToString(static_cast<Phase>(p))}},
                                    metrics::BucketsOf(metrics::kPhaseSecondsBounds));
  }
  straggler_wait_ =
      &r.AddCounter("ringpilot_straggler_wait_seconds_total",
                    "Time this rank waited for slower ranks, attributed to them (culprit_rank).");
  if (journal_) {
    // Culprits an earlier process blamed keep their series, so their counters continue.
    for (const metrics::Labels& l :
         journal_->SeededSeries("ringpilot_straggler_wait_seconds_total")) {
      const auto it = l.find("culprit_rank");
      if (it == l.end() || l.size() != 1) continue;
      char* end = nullptr;
      const long culprit = std::strtol(it->second.c_str(), &end, 10);
      const bool numeric = !it->second.empty() && *end == '\0' && culprit >= 0;
      if (it->second == "other") {
        other_culprits_ = &Continued(*straggler_wait_, "ringpilot_straggler_wait_seconds_total", l);
      } else if (numeric && num_culprits_ < kMaxCulpritSeries) {
        culprits_[num_culprits_++] = {
            static_cast<int>(culprit),
            &Continued(*straggler_wait_, "ringpilot_straggler_wait_seconds_total", l)};
      }
    }
  }
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
  process_ = std::make_unique<metrics::ProcessMetrics>(r);
  // The restart just counted is on disk before anything can fail again.
  SaveCounters();
}

void TrainingMetrics::Serve(const metrics::ExporterOptions& options) {
  std::weak_ptr<prometheus::Collectable> served = families_->registry();
  if (journal_) served = journal_;
  exporter_ = std::make_unique<metrics::Exporter>(served, options);
  exporter_->SetScrapeCallback([this] { BeforeScrape(); });
}

void TrainingMetrics::BeforeScrape() {
  if (watched_) {
    started_seq_->Set(static_cast<double>(watched_->started_seq()));
    completed_seq_->Set(static_cast<double>(watched_->completed_seq()));
  }
  process_->Update();
}

void TrainingMetrics::SaveCounters() const {
  if (journal_) journal_->Save();
}

void TrainingMetrics::SetBuildInfo(const std::vector<std::pair<std::string, std::string>>& labels) {
  metrics::Labels all{{"version", "0.1.0"}};
  all.insert(labels.begin(), labels.end());
  build_info_->Add(all).Set(1);
}

void TrainingMetrics::SetExpectedBusBandwidth(double bytes_per_second) {
  if (!(bytes_per_second > 0)) return;  // no model: no series rather than a 0
  for (int i = 0; i < kOps; ++i) {
    if (!MovesBytes(i)) continue;
    if (!expected_busbw_[i]) {
      expected_busbw_[i] = &expected_busbw_family_->Add(
          {{"op", comm::ToString(static_cast<comm::CollectiveOp>(i))}});
    }
    expected_busbw_[i]->Set(bytes_per_second);
  }
}

void TrainingMetrics::EnableImageInput() {
  if (images_decoded_) return;
  auto& r = *families_;
  images_decoded_ = &Continued(r.AddCounter("ringpilot_data_images_decoded_total",
                                            "Images the rank's input pipeline decoded (image "
                                            "kinds; substitutes of bad samples included)."),
                               "ringpilot_data_images_decoded_total", {});
  bad_samples_ = &Continued(r.AddCounter("ringpilot_data_bad_samples_total",
                                         "Training batch entries whose image could not be used "
                                         "and was replaced by a substitute (image kinds)."),
                            "ringpilot_data_bad_samples_total", {});
  // A gauge: its series comes with the first batch taken (OnImageInput).
  prefetch_family_ = &r.AddGauge("ringpilot_data_prefetch_batches",
                                 "Batches decoded and waiting ahead of the training step when "
                                 "it took its batch (image kinds; up to data.prefetch).");
}

void TrainingMetrics::SetStepsTarget(int64_t steps) {
  steps_target_->Set(static_cast<double>(steps));
}

void TrainingMetrics::OnStep(double seconds, int64_t samples, int64_t steps_done) {
  step_seconds_->Observe(seconds);
  samples_total_->Increment(static_cast<double>(samples));
  steps_total_->Increment();
  step_->Set(static_cast<double>(steps_done));
  if (trace_)
    trace_->Complete("step", "step", metrics::Trace::kTrainTid, seconds, "attempt_step", steps_);
  ++steps_;
}

void TrainingMetrics::SetLoss(double loss) { loss_->Set(loss); }
void TrainingMetrics::SetLearningRate(double lr) { learning_rate_->Set(lr); }
// The series of `family` without labels, created the first time it has a value.
metrics::Gauge& TrainingMetrics::FirstUse(metrics::Family<metrics::Gauge>& family,
                                          metrics::Gauge*& gauge) {
  if (!gauge) gauge = &family.Add({});
  return *gauge;
}

void TrainingMetrics::SetGradNorm(double norm) {
  FirstUse(*grad_norm_family_, grad_norm_).Set(norm);
}

void TrainingMetrics::SetEval(double top1, double top5, double loss, double samples) {
  FirstUse(*eval_top1_family_, eval_top1_).Set(top1);
  FirstUse(*eval_top5_family_, eval_top5_).Set(top5);
  FirstUse(*eval_loss_family_, eval_loss_).Set(loss);
  FirstUse(*eval_samples_family_, eval_samples_).Set(samples);
}

void TrainingMetrics::SetMlmEval(double accuracy, double loss, double samples) {
  FirstUse(*eval_mlm_accuracy_family_, eval_mlm_accuracy_).Set(accuracy);
  FirstUse(*eval_loss_family_, eval_loss_).Set(loss);
  FirstUse(*eval_samples_family_, eval_samples_).Set(samples);
}

void TrainingMetrics::OnCheckpoint(double seconds) { checkpoint_seconds_->Observe(seconds); }

void TrainingMetrics::OnImageInput(int64_t decoded, int64_t bad_samples, int ready_batches) {
  if (!images_decoded_) return;
  if (decoded > 0) images_decoded_->Increment(static_cast<double>(decoded));
  if (bad_samples > 0) bad_samples_->Increment(static_cast<double>(bad_samples));
  FirstUse(*prefetch_family_, prefetch_batches_).Set(ready_batches);
}

void TrainingMetrics::OnCollective(comm::CollectiveOp op, int64_t bytes, double seconds,
                                   double start_unix) {
  const int i = static_cast<int>(op);
  if (i < 0 || i >= kOps) return;
  collective_seconds_[i]->Observe(seconds);
  if (collective_bytes_[i]) collective_bytes_[i]->Increment(static_cast<double>(bytes));
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

metrics::Counter& TrainingMetrics::CulpritCounter(int rank) {
  for (int i = 0; i < num_culprits_; ++i) {
    if (culprits_[i].first == rank) return *culprits_[i].second;
  }
  // Created on first use only (Family::Add locks and allocates), and bounded: a job of
  // thousands of ranks must not give each rank thousands of series.
  if (num_culprits_ < kMaxCulpritSeries) {
    metrics::Counter* c = &straggler_wait_->Add({{"culprit_rank", std::to_string(rank)}});
    culprits_[num_culprits_++] = {rank, c};
    return *c;
  }
  if (!other_culprits_) other_culprits_ = &straggler_wait_->Add({{"culprit_rank", "other"}});
  return *other_culprits_;
}

void TrainingMetrics::OnStraggler(const StragglerStep& s) {
  if (s.culprit < 0) return;
  for (const auto& [r, seconds] : s.blame) CulpritCounter(r).Increment(seconds);
  skew_->Set(s.skew_seconds);
  if (stats_) stats_->AddStraggler(s);
}

void TrainingMetrics::SetOverlapRatio(double ratio) { overlap_->Set(ratio); }

void TrainingMetrics::Refresh(const StepStats& stats) {
  for (int i = 0; i < kOps; ++i) {
    if (!MovesBytes(i)) continue;
    const auto op = static_cast<comm::CollectiveOp>(i);
    const double busbw = stats.BusBandwidth(op);
    // An op that has not run (or not since the warm-up) has no bandwidth, not 0 B/s.
    if (!busbw_[i] && busbw > 0) busbw_[i] = &busbw_family_->Add({{"op", comm::ToString(op)}});
    if (busbw_[i]) busbw_[i]->Set(busbw);
  }
  overlap_->Set(stats.overlap_ratio());
}

void TrainingMetrics::WatchSequences(const comm::Communicator* comm) { watched_ = comm; }

}  // namespace ringpilot::trainer::telemetry
