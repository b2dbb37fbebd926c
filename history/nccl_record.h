// RUN_DIR/logs/rank-N.nccl.json: a user program's rank as the NCCL profiler plugin sees it
// (docs/nccl-profiler.md). The plugin (nccl_profiler/stats_file.h) rewrites it every few
// seconds while the process lives and once at exit; `ringpilot diagnose` (a program's run)
// and the launcher (a program's failure report and hang watch) read it. This file is the
// format's one definition: the plugin writes through NcclRecordJson, every reader parses
// through ReadNcclRecord.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringpilot::history {

/// logs/rank-N<this>.
inline constexpr const char* kNcclRecordSuffix = ".nccl.json";

/// One row of "operations": a communicator's operations of one (op, size class,
/// algorithm, protocol).
struct NcclOperationTotals {
  std::string op;           ///< "allreduce", ... (comm/collective_op.h names)
  std::string size_bucket;  ///< comm::SizeBucketName
  std::string algo;
  std::string proto;
  uint64_t count = 0;
  uint64_t bytes_total = 0;
  uint64_t timed_count = 0;           ///< operations with a time (GPU span)
  double seconds_total = 0;           ///< sum of their times
  double busbw_bytes_per_second = 0;  ///< timed bytes x bus factor / seconds; 0 unknown
};

/// An operation in flight when the file was written ("oldest_in_flight"), or the one a
/// communicator was stuck in when it was aborted ("abandoned_oldest").
struct NcclInFlight {
  std::string op;
  uint64_t seq = 0;
  double start_unix = 0;   ///< when it was enqueued
  double age_seconds = 0;  ///< at the time of the file (abandoned: of the abort)
};

/// One row of "recent_collectives": [seq, op, bytes, enqueue_unix, kernel_start_ns, seconds].
struct NcclRecentCollective {
  uint64_t seq = 0;
  std::string op;
  int64_t bytes = 0;
  double enqueue_unix = 0;       ///< when the rank enqueued it (host clock)
  uint64_t kernel_start_ns = 0;  ///< GPU clock of its first channel; 0 = none
  double seconds = 0;            ///< its kernel time: waiting for late ranks included
};

/// One communicator of the rank.
struct NcclCommRecord {
  std::string comm;  ///< hash, 16 hex digits: equal on every rank of the communicator
  std::string name;  ///< the user's commName; "" when none
  int comm_rank = -1;
  int comm_size = 0;
  int nodes = 0;            ///< 0 unknown (API v2/v3)
  bool gpu_timing = false;  ///< "timing": "gpu" (kernel spans, API v4/v5), else "none"
  bool finalized = false;
  double init_unix = 0;
  std::vector<NcclOperationTotals> operations;
  uint64_t collectives_started = 0, collectives_completed = 0;  ///< "collective_seq"
  uint64_t p2p_started = 0, p2p_completed = 0;                  ///< "p2p_seq"
  uint64_t in_flight = 0;
  std::optional<NcclInFlight> oldest_in_flight;
  uint64_t untracked_ops = 0;  ///< not tracked: the plugin's slot pool was full
  uint64_t abandoned_ops = 0;  ///< in flight when the communicator was finalized (abort)
  std::optional<NcclInFlight> abandoned_oldest;
  std::vector<NcclRecentCollective> recent_collectives;  ///< as written (ascending seq)
};

/// The whole file.
struct NcclRecord {
  int rank = 0;
  std::string node;
  int local_rank = -1;  ///< -1 unknown
  std::string job;
  int profiler_api_version = 0;
  double written_unix = 0;  ///< a stale file means a stopped or dead process
  std::vector<NcclCommRecord> communicators;
};

/// logs_dir/rank-N.nccl.json.
std::string NcclRecordPath(const std::string& logs_dir, int rank);

/// The file's text: one JSON object (indented by 2) and a newline.
std::string NcclRecordJson(const NcclRecord& record);

/// The record in `path`, the file of rank `file_rank` (its "rank" must agree; a missing
/// "rank" is file_rank). Missing keys keep the struct's defaults. Throws RecordError
/// (history/record_fields.h: one line naming the file and the key) when the file cannot be
/// read, is not JSON, or holds a value of the wrong type.
NcclRecord ReadNcclRecord(const std::string& path, int file_rank);

}  // namespace ringpilot::history
