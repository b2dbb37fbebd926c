// Who reports a rank's fatal error while Trainer::Run runs: comm::AbortJob (a collective
// that timed out, NCCL's watchdog) writes the FATAL line through the rank log, which names
// this rank to the launcher, and the heartbeat's last beat ("abort"), so the rank that gives
// up leaves the newest beat (docs/faults.md).
#pragma once

#include "trainer/telemetry/heartbeat.h"
#include "trainer/telemetry/rank_log.h"

namespace ringpilot::trainer::startup {

/// Installs `log` as comm's fatal reporter for its lifetime. One at a time per process.
class FatalReporterScope {
 public:
  explicit FatalReporterScope(telemetry::RankLog& log);
  ~FatalReporterScope();
  FatalReporterScope(const FatalReporterScope&) = delete;
  FatalReporterScope& operator=(const FatalReporterScope&) = delete;
};

/// Has the fatal reporter beat `beat` first, for its lifetime (Heartbeat::BeatNow).
class FatalHeartbeatScope {
 public:
  explicit FatalHeartbeatScope(telemetry::Heartbeat& beat);
  ~FatalHeartbeatScope();
  FatalHeartbeatScope(const FatalHeartbeatScope&) = delete;
  FatalHeartbeatScope& operator=(const FatalHeartbeatScope&) = delete;
};

}  // namespace ringpilot::trainer::startup
