#include "history/attempts.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include "base/files.h"
#include "base/time.h"

namespace ringpilot::history {
namespace {

using nlohmann::json;

// A JSON object from `path`; null when missing, unreadable or not an object (a reader of
// history must not fail on one bad file: the others still tell the story).
json ReadObject(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json(nullptr);
}

std::optional<int64_t> IntOf(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
  return j[key].get<int64_t>();
}

std::optional<double> NumberOf(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

double MtimeUnix(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
}

// Steps every rank had completed by the failure, from the trainer's heartbeats in a
// failure.json: a rank in "step" S (0-based) had completed S steps, one in "eval",
// "checkpoint" or "done" after S had completed S + 1. The ranks meet at every step's
// gradient exchange, so the most advanced rank's count was completed by all (a beat can be
// a second old: this may undercount, never overcount). 0 without trainer heartbeats.
int64_t StepsDoneAtFailure(const json& failure) {
  int64_t done = 0;
  if (!failure.contains("ranks") || !failure["ranks"].is_object()) return 0;
  for (const auto& [rank, beat] : failure["ranks"].items()) {
    // A launch.command rank's beat counts collectives, not steps.
    if (!beat.is_object() || beat.contains("comm")) continue;
    const std::optional<int64_t> step = IntOf(beat, "step");
    if (!step) continue;
    const std::string phase =
        beat.contains("phase") && beat["phase"].is_string() ? beat["phase"].get<std::string>() : "";
    done = std::max(done, *step + (phase == "step" || phase == "start" ? 0 : 1));
  }
  return done;
}

void ApplyFailure(const json& failure, AttemptRecord* a) {
  a->outcome = kFailed;
  a->last_step = std::max(a->last_step, StepsDoneAtFailure(failure));
  if (failure.contains("fatal_message") && failure["fatal_message"].is_string()) {
    a->failure = failure["fatal_message"].get<std::string>();
    if (const std::optional<int64_t> rank = IntOf(failure, "first_failing_rank"); rank) {
      a->failure = "rank " + std::to_string(*rank) + ": " + a->failure;
    }
  } else if (const std::optional<int64_t> rank = IntOf(failure, "first_failing_rank");
             rank && *rank >= 0) {
    a->failure = "rank " + std::to_string(*rank);
  }
}

}  // namespace

std::string AttemptDir(const std::string& run_dir, int attempt) {
  return run_dir + "/attempts/" + std::to_string(attempt);
}

std::string AttemptSummaryPath(const std::string& run_dir, int attempt) {
  return AttemptDir(run_dir, attempt) + "/summary.json";
}

std::string AttemptFailurePath(const std::string& run_dir, int attempt) {
  return AttemptDir(run_dir, attempt) + "/failure.json";
}

std::string AttemptRankStatsPath(const std::string& run_dir, int attempt, int rank) {
  return AttemptDir(run_dir, attempt) + "/rank-" + std::to_string(rank) + ".stats.json";
}

int64_t AttemptRecord::StepsTrained() const {
  if (!first_step) return 0;
  return std::max<int64_t>(0, last_step - *first_step + 1);
}

json AttemptProgressJson(const AttemptProgress& p) {
  const int64_t first = p.resumed_from_step + 1;
  return {{"attempt", p.attempt},
          {"outcome", p.outcome},
          {"first_step", first},
          {"last_step", p.last_step},
          {"steps_trained", std::max<int64_t>(0, p.last_step - first + 1)},
          {"steps_per_second", p.timed_steps > 0 && p.timed_seconds > 0
                                   ? json(static_cast<double>(p.timed_steps) / p.timed_seconds)
                                   : json(nullptr)},
          {"started", base::FormatLogTime(p.started_unix)},
          {"started_unix", p.started_unix},
          {"updated", base::FormatLogTime(base::UnixNow())}};
}

std::vector<AttemptRecord> ReadAttempts(const std::string& run_dir) {
  std::map<int, AttemptRecord> found;
  for (const std::string& name : base::ListDir(run_dir + "/attempts")) {
    char* end = nullptr;
    const long n = std::strtol(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || n < 1 || n > 1000000) continue;
    const int attempt = static_cast<int>(n);
    const json summary = ReadObject(AttemptSummaryPath(run_dir, attempt));
    const json failure = ReadObject(AttemptFailurePath(run_dir, attempt));
    if (summary.is_null() && failure.is_null()) continue;
    AttemptRecord a;
    a.attempt = attempt;
    if (!summary.is_null()) {
      a.first_step = IntOf(summary, "first_step");
      a.last_step = IntOf(summary, "last_step").value_or(0);
      if (summary.contains("outcome") && summary["outcome"].is_string()) {
        a.outcome = summary["outcome"].get<std::string>();
      }
      a.steps_per_second = NumberOf(summary, "steps_per_second");
      a.started_unix = NumberOf(summary, "started_unix").value_or(0);
    }
    if (!failure.is_null()) ApplyFailure(failure, &a);
    found[attempt] = a;
  }
  std::vector<AttemptRecord> out;
  for (auto& [n, a] : found) out.push_back(a);
  // The job's final failure is failure.json, not attempts/N/failure.json: it is the last
  // attempt's when it was written after that attempt began (an older one belongs to an
  // earlier run of this directory).
  const std::string final_failure = run_dir + "/failure.json";
  if (!out.empty() && out.back().outcome == kRunning && out.back().started_unix > 0) {
    const json failure = ReadObject(final_failure);
    const std::optional<int64_t> attempts = IntOf(failure, "attempts");
    if (attempts && *attempts == out.back().attempt &&
        MtimeUnix(final_failure) >= out.back().started_unix) {
      ApplyFailure(failure, &out.back());
    }
  }
  return out;
}

StepCoverage CoverageOf(const std::vector<AttemptRecord>& attempts) {
  StepCoverage c;
  std::vector<std::pair<int64_t, int64_t>> spans;  // [first, last], steps trained
  for (const AttemptRecord& a : attempts) {
    if (a.StepsTrained() == 0) continue;
    spans.emplace_back(*a.first_step, a.last_step);
    c.steps_trained += a.StepsTrained();
    c.first_step = c.first_step ? std::min(*c.first_step, *a.first_step) : *a.first_step;
    c.last_step = c.last_step ? std::max(*c.last_step, a.last_step) : a.last_step;
  }
  std::sort(spans.begin(), spans.end());
  int64_t covered_to = INT64_MIN;  // the highest step counted so far
  for (const auto& [first, last] : spans) {
    const int64_t from = std::max(first, covered_to == INT64_MIN ? first : covered_to + 1);
    if (last >= from) c.distinct += last - from + 1;
    covered_to = covered_to == INT64_MIN ? last : std::max(covered_to, last);
  }
  c.redone = c.steps_trained - c.distinct;
  return c;
}

json AttemptRowJson(const AttemptRecord& a) {
  json row = {{"attempt", a.attempt},
              {"first_step", a.first_step ? json(*a.first_step) : json(nullptr)},
              {"last_step", a.last_step},
              {"steps_trained", a.StepsTrained()},
              {"outcome", a.outcome},
              {"steps_per_second", a.steps_per_second ? json(*a.steps_per_second) : json(nullptr)}};
  if (!a.failure.empty()) row["failure"] = a.failure;
  return row;
}

json CombinedSummary(const json& last_attempt, const std::vector<AttemptRecord>& attempts) {
  json combined = last_attempt;
  // The attempt-only fields describe the last attempt; the run's are below.
  for (const char* key : {"outcome", "steps_per_second", "started", "started_unix", "updated"}) {
    combined.erase(key);
  }
  json rows = json::array();
  json failed = json::array();
  for (const AttemptRecord& a : attempts) {
    rows.push_back(AttemptRowJson(a));
    if (a.outcome == kFailed) failed.push_back(a.attempt);
  }
  const StepCoverage c = CoverageOf(attempts);
  combined["attempts"] = rows;
  combined["failed_attempts"] = failed;
  combined["steps_trained"] = c.steps_trained;
  combined["steps_redone"] = c.redone;
  combined["first_step"] = c.first_step ? json(*c.first_step) : json(nullptr);
  combined["last_step"] = c.last_step ? json(*c.last_step) : json(nullptr);
  return combined;
}

}  // namespace ringpilot::history
