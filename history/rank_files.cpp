#include "history/rank_files.h"

#include <cctype>
#include <fstream>
#include <vector>

#include "base/files.h"

namespace ringpilot::history {

namespace {

constexpr const char* kNcclDebugLogPrefix = "nccl-rank-";
constexpr const char* kNcclDebugLogSuffix = ".log";
constexpr const char* kTracePrefix = "trace-rank-";
constexpr const char* kTraceSuffix = ".json";
constexpr const char* kTopologyPrefix = "topology-";
constexpr const char* kTopologySuffix = ".json";

std::vector<std::string> NamesIn(const std::string& dir) {
  try {
    return base::ListDir(dir);
  } catch (const base::FileError&) {
    return {};
  }
}

bool Framed(const std::string& name, const std::string& prefix, const std::string& suffix) {
  return name.size() > prefix.size() + suffix.size() &&
         name.compare(0, prefix.size(), prefix) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// logs_dir/<prefix>N<suffix> by N.
std::map<int, std::string> NumberedFiles(const std::string& logs_dir, const std::string& prefix,
                                         const std::string& suffix) {
  std::map<int, std::string> files;
  for (const std::string& name : NamesIn(logs_dir)) {
    if (!Framed(name, prefix, suffix)) continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    bool decimal = digits.size() <= 9;
    for (char c : digits) decimal = decimal && std::isdigit(static_cast<unsigned char>(c));
    if (decimal) files.emplace(std::stoi(digits), logs_dir + "/" + name);
  }
  return files;
}

}  // namespace

std::map<int, std::string> RankFiles(const std::string& logs_dir, const std::string& suffix) {
  return NumberedFiles(logs_dir, "rank-", suffix);
}

std::string RankLogPath(const std::string& logs_dir, int rank) {
  return logs_dir + "/rank-" + std::to_string(rank) + kRankLogSuffix;
}

std::string CountersJournalPath(const std::string& logs_dir, int rank) {
  return logs_dir + "/rank-" + std::to_string(rank) + ".counters.json";
}

std::string TracePath(const std::string& dir, int rank) {
  return dir + "/" + kTracePrefix + std::to_string(rank) + kTraceSuffix;
}

std::map<int, std::string> TraceFiles(const std::string& dir) {
  return NumberedFiles(dir, kTracePrefix, kTraceSuffix);
}

std::string TopologySnapshotPath(const std::string& logs_dir, const std::string& host) {
  return logs_dir + "/" + kTopologyPrefix + host + kTopologySuffix;
}

std::map<std::string, std::string> TopologySnapshotFiles(const std::string& logs_dir) {
  const std::string prefix = kTopologyPrefix, suffix = kTopologySuffix;
  std::map<std::string, std::string> files;
  for (const std::string& name : NamesIn(logs_dir)) {
    if (!Framed(name, prefix, suffix)) continue;
    files[name.substr(prefix.size(), name.size() - prefix.size() - suffix.size())] =
        logs_dir + "/" + name;
  }
  return files;
}

std::string NcclDebugLogPath(const std::string& logs_dir, int rank) {
  return logs_dir + "/" + kNcclDebugLogPrefix + std::to_string(rank) + kNcclDebugLogSuffix;
}

std::map<int, std::string> NcclDebugLogFiles(const std::string& logs_dir) {
  return NumberedFiles(logs_dir, kNcclDebugLogPrefix, kNcclDebugLogSuffix);
}

nlohmann::json ReadJsonObject(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json(nlohmann::json::value_t::discarded);
}

}  // namespace ringpilot::history
