// The per-rank files of a run directory's logs/ (rank-N.log, rank-N.heartbeat,
// rank-N.program.json, rank-N.nccl.json, ...): the one way their readers find them.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace ringpilot::history {

/// rank-R<this>: a rank's step statistics (trainer/telemetry's StepStats::WriteJson; diagnose
/// parses them), in logs/ and in attempts/N/ (AttemptRankStatsPath, attempts.h).
inline constexpr const char* kRankStatsSuffix = ".stats.json";

/// The files logs_dir/rank-N<suffix> (N decimal, up to 9 digits), by rank; none when the
/// folder is missing or unreadable.
std::map<int, std::string> RankFiles(const std::string& logs_dir, const std::string& suffix);

/// The JSON object in `path`; a discarded value (is_object() false) when the file is
/// missing, unreadable, not JSON or not an object. Does not throw.
nlohmann::json ReadJsonObject(const std::string& path);

}  // namespace ringpilot::history
