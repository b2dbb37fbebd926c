// RUN_DIR/logs/rank-N.nccl.json: the NCCL profiler plugin's per-rank numbers for
// `ringpilot diagnose` (docs/nccl-profiler.md), the counterpart of the trainer's
// rank-N.stats.json.
#pragma once

#include <string>
#include <vector>

#include "nccl_profiler/comm_stats.h"
#include "nccl_profiler/prometheus_export.h"

namespace ringpilot::nccl_profiler {

/// The file's JSON text: rank labels, API version, and per communicator its
/// identity, per (op, size class, algorithm, protocol) count, bytes and time, sequence
/// numbers and the oldest operation in flight.
std::string StatsJson(const RankLabels& rank, int api_version,
                      const std::vector<CommSnapshot>& comms);

/// RUN_DIR/logs/rank-RANK.nccl.json.
std::string StatsPath(const std::string& run_dir, int rank);

}  // namespace ringpilot::nccl_profiler
