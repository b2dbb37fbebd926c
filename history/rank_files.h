// The per-rank files of a run directory's logs/ (rank-N.log, rank-N.heartbeat,
// rank-N.program.json, rank-N.nccl.json, rank-N.stats.json, nccl-rank-N.log, ...): the one
// way their readers find them.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace ringpilot::history {

/// The files logs_dir/rank-N<suffix> (N decimal, up to 9 digits), by rank; none when the
/// folder is missing or unreadable.
std::map<int, std::string> RankFiles(const std::string& logs_dir, const std::string& suffix);

/// logs/rank-N<this>: rank N's log (its FATAL line, progress, warnings), which the trainer's
/// RankLog or `ringpilot exec` writes; the launcher's failure report and `ringpilot logs`
/// read it.
inline constexpr const char* kRankLogSuffix = ".log";
/// logs_dir/rank-N.log.
std::string RankLogPath(const std::string& logs_dir, int rank);

/// logs/rank-N.counters.json: trainer rank N's counter journal (the counters as of its
/// last checkpoint, which a restarted attempt goes on from), written and read by
/// trainer/telemetry's TrainingMetrics.
std::string CountersJournalPath(const std::string& logs_dir, int rank);

/// dir/trace-rank-N.json: rank N's Chrome trace (metrics/trace.h), which the trainer writes
/// to RUN_DIR and to attempts/N/ (trace.enabled) and `ringpilot diagnose` merges.
std::string TracePath(const std::string& dir, int rank);
/// The files dir/trace-rank-N.json by rank, as RankFiles.
std::map<int, std::string> TraceFiles(const std::string& dir);

/// logs/topology-HOST.json: a host's topology snapshot (topology::ToJson), which `ringpilot
/// exec --bind` writes from each host's local rank 0 and `ringpilot diagnose` reads.
std::string TopologySnapshotPath(const std::string& logs_dir, const std::string& host);
/// The files logs_dir/topology-HOST.json by host; none when the folder is missing.
std::map<std::string, std::string> TopologySnapshotFiles(const std::string& logs_dir);

/// logs/nccl-rank-N.log: NCCL's own debug log of trainer rank N (NCCL_DEBUG_FILE, which
/// trainer/telemetry's PrepareNcclDebugLog sets unless the user chose NCCL_DEBUG); the
/// trainer's telemetry and `ringpilot diagnose` read each connection's transport from it.
std::string NcclDebugLogPath(const std::string& logs_dir, int rank);
/// The files logs_dir/nccl-rank-N.log by rank, as RankFiles.
std::map<int, std::string> NcclDebugLogFiles(const std::string& logs_dir);

/// The JSON object in `path`; a discarded value (is_object() false) when the file is
/// missing, unreadable, not JSON or not an object. Does not throw.
nlohmann::json ReadJsonObject(const std::string& path);

}  // namespace ringpilot::history
