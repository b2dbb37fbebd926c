// Checkpoint-and-stop on SIGUSR1 (Slurm's warning before the time limit, forwarded by the
// batch script, `ringpilot run` and mpirun): the handler only sets a flag; at each step
// boundary the ranks agree on it, so that all of them checkpoint the same step and stop
// with base::kExitPreempted (docs/slurm.md).
#pragma once

#include <csignal>
#include <cstdint>

#include "comm/communicator.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer::startup {

/// Installs a SIGUSR1 handler for its lifetime (one instance per process) and restores
/// the previous disposition on destruction. The handler is async-signal-safe: it stores
/// to a lock-free atomic flag and nothing else.
/// Call first thing in main(): until PreemptionWatch and the trace install their
/// handlers (after LibTorch and MPI start, seconds later), a SIGUSR1 is remembered for
/// the first PreemptionWatch and a SIGUSR2 is ignored, instead of killing the rank.
void CatchSignalsEarly();

class PreemptionWatch {
 public:
  PreemptionWatch();
  ~PreemptionWatch();
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

  /// True once this process has received SIGUSR1 since the watch was installed.
  bool requested() const;

  /// Collective over `comm` (every rank calls it at the same step boundary): true on every
  /// rank when any rank has received SIGUSR1 (MAX all-reduce of one CPU integer).
  bool AgreeToStop(comm::Communicator& comm) const;

  /// Logs that the checkpoint of step `done` is written and returns the exit status for
  /// the rank (base::kExitPreempted).
  int Stop(telemetry::RankLog& log, int64_t done) const;

 private:
  struct sigaction previous_ {};
  bool installed_ = false;
};

}  // namespace ringpilot::trainer::startup
