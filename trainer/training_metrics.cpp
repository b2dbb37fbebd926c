#include "trainer/training_metrics.h"

#include <chrono>

namespace ringpilot::trainer {

TrainingMetrics::TrainingMetrics(const RankIdentity& id) {
  registry_ = std::make_unique<metrics::Registry>(
      metrics::Labels{{"job", id.job},
                      {"node", id.node},
                      {"rank", std::to_string(id.rank)},
                      {"local_rank", std::to_string(id.local_rank)}});
  auto& r = *registry_;
  // 1 ms .. ~65 s: CPU steps of a big model and GPU steps of a small one both resolve.
  step_seconds_ = &r.AddHistogram("ringpilot_step_seconds", "Wall time of one training step.",
                                  metrics::ExponentialBuckets(0.001, 2.0, 17))
                       .Add({});
  samples_total_ =
      &r.AddCounter("ringpilot_samples_total", "Samples processed by this rank.").Add({});
  steps_total_ = &r.AddCounter("ringpilot_steps_total", "Training steps completed.").Add({});
  loss_ = &r.AddGauge("ringpilot_loss", "Loss of the last reported step on this rank.").Add({});
  checkpoint_seconds_ =
      &r.AddHistogram("ringpilot_checkpoint_seconds", "Time to write one checkpoint (rank 0).",
                      metrics::ExponentialBuckets(0.01, 2.0, 14))
           .Add({});
  restarts_ = &r.AddGauge("ringpilot_restarts", "Restarts of this job so far.").Add({});
  r.AddGauge("ringpilot_process_start_time_seconds", "Start time of this rank, Unix seconds.")
      .Add({})
      .Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
               .count());
  auto& coll_seconds = r.AddHistogram("ringpilot_collective_seconds",
                                      "Time from issue to observed completion of a collective.",
                                      metrics::ExponentialBuckets(1e-5, 2.0, 22));
  auto& coll_bytes =
      r.AddCounter("ringpilot_collective_bytes_total", "Payload bytes of collectives, per rank.");
  for (int i = 0; i < kOps; ++i) {
    const char* op = comm::ToString(static_cast<comm::CollectiveOp>(i));
    collective_seconds_[i] = &coll_seconds.Add({{"op", op}});
    collective_bytes_[i] = &coll_bytes.Add({{"op", op}});
  }
  build_info_ =
      &r.AddGauge("ringpilot_build_info", "Versions this rank runs with (value is always 1).");
}

void TrainingMetrics::Serve(const std::string& bind, int port) {
  metrics::ExporterOptions o;
  o.bind = bind;
  o.port = port;
  exporter_ = std::make_unique<metrics::Exporter>(*registry_, o);
}

int TrainingMetrics::port() const { return exporter_ ? exporter_->port() : 0; }

void TrainingMetrics::SetBuildInfo(const std::string& torch, const std::string& mpi,
                                   const std::string& cuda, const std::string& nccl) {
  build_info_
      ->Add({{"version", "0.1.0"}, {"torch", torch}, {"mpi", mpi}, {"cuda", cuda}, {"nccl", nccl}})
      .Set(1);
}

void TrainingMetrics::SetRestarts(int restarts) { restarts_->Set(restarts); }

void TrainingMetrics::OnStep(double seconds, int64_t samples) {
  step_seconds_->Observe(seconds);
  samples_total_->Increment(static_cast<double>(samples));
  steps_total_->Increment();
}

void TrainingMetrics::SetLoss(double loss) { loss_->Set(loss); }

void TrainingMetrics::OnCheckpoint(double seconds) { checkpoint_seconds_->Observe(seconds); }

void TrainingMetrics::OnCollective(comm::CollectiveOp op, int64_t bytes, double seconds) {
  const int i = static_cast<int>(op);
  if (i < 0 || i >= kOps) return;
  collective_seconds_[i]->Observe(seconds);
  collective_bytes_[i]->Increment(static_cast<double>(bytes));
}

}  // namespace ringpilot::trainer
