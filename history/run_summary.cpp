#include "history/run_summary.h"

#include <climits>
#include <cstdint>

#include "base/files.h"
#include "history/attempts.h"
#include "history/record_fields.h"

namespace ringpilot::history {
namespace {

using nlohmann::json;

// Each key once, for the writer's and the reader's side.
constexpr const char* kName = "name";
constexpr const char* kWorldSize = "world_size";
constexpr const char* kSteps = "steps";
constexpr const char* kEpochs = "epochs";
constexpr const char* kFinalLoss = "final_loss";
constexpr const char* kSamplesPerSecond = "samples_per_second";
constexpr const char* kStepSecondsP50 = "step_seconds_p50";
constexpr const char* kStepSecondsP99 = "step_seconds_p99";
constexpr const char* kRestarts = "restarts";

json OrNull(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// A whole number >= 0 that fits int64_t (steps and epochs are int64_t everywhere else).
int64_t Count(const RecordFields& f, const char* key) {
  const uint64_t v = f.Unsigned(key);
  if (v > static_cast<uint64_t>(INT64_MAX)) {
    f.Fail(key, "expected a whole number below 2^63, got " + f.raw().at(key).dump());
  }
  return static_cast<int64_t>(v);
}

std::optional<double> OptionalNumber(const RecordFields& f, const char* key) {
  if (!f.Has(key)) return std::nullopt;
  return f.Number(key);
}

}  // namespace

std::string RunSummaryPath(const std::string& run_dir) { return run_dir + "/" + kRunSummaryFile; }

json RunSummaryJson(const RunSummary& s) {
  json j = {{kName, s.name},
            {kWorldSize, s.world_size},
            {kSteps, s.steps},
            {kFinalLoss, OrNull(s.final_loss)},
            {kSamplesPerSecond, OrNull(s.samples_per_second)},
            {kStepSecondsP50, s.step_seconds_p50},
            {kStepSecondsP99, s.step_seconds_p99},
            {kRestarts, s.restarts}};
  if (s.epochs > 0) j[kEpochs] = s.epochs;
  return j;
}

void WriteRunSummary(const std::string& run_dir, const json& last_attempt) {
  const json combined = CombinedSummary(last_attempt, ReadAttempts(run_dir));
  base::WriteFileAtomically(RunSummaryPath(run_dir), combined.dump(2) + "\n");
}

std::optional<RunSummary> ReadRunSummary(const std::string& path) {
  if (!base::Exists(path)) return std::nullopt;
  RunSummary s;
  s.as_written = ReadJsonFile(path);
  const RecordFields f(s.as_written, path);
  if (!f.Has(kSteps)) f.Fail(kSteps, "missing");
  s.steps = Count(f, kSteps);
  s.name = f.String(kName);
  s.world_size = f.Int(kWorldSize, 0, 0, kMaxRecordRank + 1);
  s.epochs = Count(f, kEpochs);
  s.final_loss = OptionalNumber(f, kFinalLoss);
  s.samples_per_second = OptionalNumber(f, kSamplesPerSecond);
  s.step_seconds_p50 = f.Number(kStepSecondsP50);
  s.step_seconds_p99 = f.Number(kStepSecondsP99);
  s.restarts = f.Int(kRestarts, 0, 0, INT_MAX);
  return s;
}

std::optional<RunSummary> ReadRunSummaryIfValid(const std::string& path) {
  try {
    return ReadRunSummary(path);
  } catch (const RecordError&) {
    return std::nullopt;
  }
}

}  // namespace ringpilot::history
