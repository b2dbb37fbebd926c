#include "history/program_beat.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "history/rank_files.h"

namespace ringpilot::history {

std::string ProgramBeatPath(const std::string& logs_dir, int rank) {
  return logs_dir + "/rank-" + std::to_string(rank) + kProgramBeatSuffix;
}

std::string ProgramBeatJson(const ProgramBeat& b) {
  nlohmann::ordered_json j = {{"rank", b.rank},
                              {"pid", b.pid},
                              {"command", b.command},
                              {"state", b.state},
                              {"started_unix", b.started_unix},
                              {"unix", b.unix}};
  if (b.cpu_seconds) j["cpu_seconds"] = *b.cpu_seconds;
  if (b.rss_bytes) j["rss_bytes"] = *b.rss_bytes;
  if (b.progress) {
    nlohmann::ordered_json p = {{"step", b.progress->step}, {"unix", b.progress->unix}};
    if (b.progress->steps > 0) p["steps"] = b.progress->steps;
    if (b.progress->loss && std::isfinite(*b.progress->loss)) p["loss"] = *b.progress->loss;
    j["progress"] = p;
  }
  if (b.status) j["status"] = *b.status;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::map<int, ProgramBeat> ReadProgramBeats(const std::string& logs_dir, double since_unix) {
  std::map<int, ProgramBeat> beats;
  for (const auto& [rank, path] : RankFiles(logs_dir, kProgramBeatSuffix)) {
    const nlohmann::json j = ReadJsonObject(path);
    if (!j.is_object() || !j.contains("unix") || !j["unix"].is_number()) continue;
    ProgramBeat b;
    b.rank = rank;
    b.unix = j["unix"].get<double>();
    if (b.unix < since_unix) continue;
    const auto text = [&j](const char* key) {
      return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
    };
    b.command = text("command");
    b.state = text("state");
    if (j.contains("pid") && j["pid"].is_number_integer()) b.pid = j["pid"].get<int>();
    if (j.contains("started_unix") && j["started_unix"].is_number()) {
      b.started_unix = j["started_unix"].get<double>();
    }
    if (j.contains("cpu_seconds") && j["cpu_seconds"].is_number()) {
      b.cpu_seconds = j["cpu_seconds"].get<double>();
    }
    if (j.contains("rss_bytes") && j["rss_bytes"].is_number_integer()) {
      b.rss_bytes = j["rss_bytes"].get<int64_t>();
    }
    if (j.contains("status") && j["status"].is_number_integer()) b.status = j["status"].get<int>();
    if (j.contains("progress") && j["progress"].is_object()) {
      const nlohmann::json& p = j["progress"];
      if (p.contains("step") && p["step"].is_number_integer()) {
        ProgramProgress progress;
        progress.step = p["step"].get<int64_t>();
        if (p.contains("steps") && p["steps"].is_number_integer()) {
          progress.steps = p["steps"].get<int64_t>();
        }
        if (p.contains("loss") && p["loss"].is_number()) progress.loss = p["loss"].get<double>();
        if (p.contains("unix") && p["unix"].is_number()) progress.unix = p["unix"].get<double>();
        b.progress = progress;
      }
    }
    beats.emplace(b.rank, std::move(b));
  }
  return beats;
}

}  // namespace ringpilot::history
