// RUN_DIR/logs/rank-N.nccl.json: the NCCL profiler plugin's per-rank numbers for
// `ringpilot diagnose` (docs/nccl-profiler.md), the counterpart of the trainer's
// rank-N.stats.json.
#pragma once

#include <string>
#include <vector>

#include "nccl_profiler/comm_stats.h"
#include "nccl_profiler/prometheus_export.h"

namespace ringpilot::nccl_profiler {

/// The file's JSON text: rank labels, API version, when it was written (`written_unix`:
/// the file is rewritten every few seconds while the process lives, so a stale one means
/// a stopped or dead process), and per communicator its identity and `init_unix`, per
/// (op, size class, algorithm, protocol) count, bytes and time, sequence numbers, the
/// oldest operation in flight (or, once finalized, `abandoned_oldest`: what it was stuck
/// in at abort) and `recent_collectives`: rows of [seq, op, bytes, enqueue_unix,
/// kernel_start_ns, seconds] of the last timed collectives (docs/nccl-profiler.md).
std::string StatsJson(const RankLabels& rank, int api_version,
                      const std::vector<CommSnapshot>& comms, double written_unix);

/// RUN_DIR/logs/rank-RANK.nccl.json.
std::string StatsPath(const std::string& run_dir, int rank);

}  // namespace ringpilot::nccl_profiler
