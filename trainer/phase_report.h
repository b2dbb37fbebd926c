// Phases of the oldest finished step into the metrics, and straggler attribution: every
// rank shares when its gradients were ready (on rank 0's clock) and its compute time.
#pragma once

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "trainer/step/step_phases.h"
#include "trainer/telemetry/training_metrics.h"

namespace ringpilot::trainer {

/// Holds references; all must outlive it. Not thread-safe.
class PhaseReporter {
 public:
  /// `clock_offset`: this rank's clock minus rank 0's (telemetry::EstimateClockOffset).
  PhaseReporter(step::StepPhases& phases, telemetry::TrainingMetrics& metrics,
                comm::Communicator& device_comm, comm::MpiCommunicator& host_comm, int rank,
                int world, double clock_offset);

  /// Collective over the host communicator when world > 1: every rank calls it after each
  /// step (`device_idle` false: on CUDA the previous step, from GPU timestamps) and once
  /// after the last (`device_idle` true), in the same pattern.
  void Report(bool device_idle);

 private:
  step::StepPhases& phases_;
  telemetry::TrainingMetrics& metrics_;
  comm::Communicator& device_comm_;
  comm::MpiCommunicator& host_comm_;
  const int rank_;
  const int world_;
  const double clock_offset_;
};

}  // namespace ringpilot::trainer
