#include "history/trainer_beat.h"

#include <cmath>
#include <cstdio>

#include "history/rank_files.h"

namespace ringpilot::history {

std::string TrainerBeatPath(const std::string& logs_dir, int rank) {
  return logs_dir + "/rank-" + std::to_string(rank) + kTrainerBeatSuffix;
}

size_t FormatTrainerBeat(const TrainerBeat& beat, char* buffer, size_t size) {
  char loss[48] = "null";
  // NaN and infinities are written as null: JSON has no spelling for them.
  if (beat.loss && std::isfinite(*beat.loss)) std::snprintf(loss, sizeof loss, "%.6g", *beat.loss);
  const int n = std::snprintf(
      buffer, size,
      "{\"rank\": %d, \"step\": %lld, \"steps\": %lld, \"phase\": \"%s\", \"unix\": %.3f, "
      "\"max_silence_s\": %.3f, \"loss\": %s, "
      "\"collectives_started\": %llu, \"collectives_completed\": %llu}\n",
      beat.rank, static_cast<long long>(beat.step), static_cast<long long>(beat.steps),
      beat.phase.c_str(), beat.unix, beat.max_silence_s, loss,
      static_cast<unsigned long long>(beat.collectives_started),
      static_cast<unsigned long long>(beat.collectives_completed));
  return n > 0 && static_cast<size_t>(n) < size ? static_cast<size_t>(n) : 0;
}

std::map<int, TrainerBeat> ReadTrainerBeats(const std::string& logs_dir, double since_unix) {
  std::map<int, TrainerBeat> beats;
  for (const auto& [rank, path] : RankFiles(logs_dir, kTrainerBeatSuffix)) {
    const nlohmann::json j = ReadJsonObject(path);
    if (!j.is_object() || !j.contains("unix") || !j["unix"].is_number()) continue;
    TrainerBeat b;
    b.rank = rank;
    b.unix = j["unix"].get<double>();
    if (b.unix < since_unix) continue;
    const auto integer = [&j](const char* key) {
      return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : int64_t{0};
    };
    const auto counter = [&j](const char* key) {
      return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : uint64_t{0};
    };
    b.step = integer("step");
    b.steps = integer("steps");
    if (j.contains("phase") && j["phase"].is_string()) b.phase = j["phase"].get<std::string>();
    if (j.contains("max_silence_s") && j["max_silence_s"].is_number()) {
      b.max_silence_s = j["max_silence_s"].get<double>();
    }
    if (j.contains("loss") && j["loss"].is_number()) b.loss = j["loss"].get<double>();
    b.collectives_started = counter("collectives_started");
    b.collectives_completed = counter("collectives_completed");
    beats.emplace(rank, std::move(b));
  }
  return beats;
}

}  // namespace ringpilot::history
