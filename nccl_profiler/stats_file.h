// RUN_DIR/logs/rank-N.nccl.json: the NCCL profiler plugin's per-rank numbers for
// `ringpilot diagnose` and the launcher's hang watch (docs/nccl-profiler.md), the
// counterpart of the trainer's rank-N.stats.json. The format is history/nccl_record.h's
// (its one definition, with the readers'); this is the plugin's side: its snapshots as a
// record.
#pragma once

#include <vector>

#include "history/nccl_record.h"
#include "nccl_profiler/comm_stats.h"
#include "nccl_profiler/prometheus_export.h"

namespace ringpilot::nccl_profiler {

/// The record of this rank (history::NcclRecordJson writes it): rank labels, API version,
/// when it was written (`written_unix`: the file is rewritten every few seconds while the
/// process lives, so a stale one means a stopped or dead process), and per communicator
/// that has its identity (hash != 0) its `init_unix`, per (op, size class, algorithm,
/// protocol) count, bytes and time, sequence numbers, the oldest operation in flight (or,
/// once finalized, `abandoned_oldest`: what it was stuck in at abort) and the last timed
/// collectives.
history::NcclRecord StatsRecord(const RankLabels& rank, int api_version,
                                const std::vector<CommSnapshot>& comms, double written_unix);

}  // namespace ringpilot::nccl_profiler
