#include "trainer/phase_report.h"

#include <cmath>
#include <optional>
#include <vector>

#include "trainer/telemetry/step_stats.h"

namespace ringpilot::trainer {

PhaseReporter::PhaseReporter(step::StepPhases& phases, telemetry::TrainingMetrics& metrics,
                             comm::Communicator& device_comm, comm::MpiCommunicator& host_comm,
                             int rank, int world, double clock_offset)
    : phases_(phases),
      metrics_(metrics),
      device_comm_(device_comm),
      host_comm_(host_comm),
      rank_(rank),
      world_(world),
      clock_offset_(clock_offset) {}

void PhaseReporter::Report(bool device_idle) {
  using telemetry::Phase;
  std::optional<step::StepPhaseTimes> t = phases_.Collect(device_idle);
  if (!t) return;
  if (t->valid) {
    metrics_.OnPhase(Phase::kForward, t->forward, t->start_unix);
    metrics_.OnPhase(Phase::kBackward, t->backward, t->start_unix + t->forward);
    metrics_.OnPhase(Phase::kCommExposed, t->comm_exposed, t->ready_unix);
    metrics_.OnPhase(Phase::kOptimizer, t->optimizer, t->ready_unix + t->comm_exposed);
    if (t->replay) device_comm_.OnReplayTimed(t->marks);
  }
  if (world_ == 1) return;
  const double nan = std::nan("");
  at::Tensor mine = at::tensor({t->valid ? t->ready_unix + clock_offset_ : nan,
                                t->valid ? t->ready_unix - t->start_unix : nan},
                               at::kDouble);
  at::Tensor all = at::empty({world_, 2}, at::kDouble);
  host_comm_.AllGather(mine, all)->Wait();
  std::vector<telemetry::ArrivalSample> samples(world_);
  const double* v = all.data_ptr<double>();
  for (int r = 0; r < world_; ++r) {
    if (std::isnan(v[2 * r])) return;  // a rank lost its GPU row: no attribution this step
    samples[r] = {v[2 * r], v[2 * r + 1]};
  }
  metrics_.OnStraggler(telemetry::AttributeStraggler(samples, rank_));
}

}  // namespace ringpilot::trainer
