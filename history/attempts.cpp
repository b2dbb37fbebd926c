#include "history/attempts.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include "base/files.h"
#include "base/time.h"
#include "history/rank_stats.h"

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

// The attempts of one run: `dir`/N/ with a summary.json or a failure.json, by N; `rel` is
// `dir` relative to the run directory.
std::vector<AttemptRecord> ReadRun(const std::string& dir, const std::string& rel) {
  std::map<int, AttemptRecord> found;
  for (const std::string& name : base::ListDir(dir)) {
    char* end = nullptr;
    const long n = std::strtol(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || n < 1 || n > 1000000) continue;
    const json summary = ReadObject(dir + "/" + name + "/summary.json");
    const json failure = ReadObject(dir + "/" + name + "/failure.json");
    if (summary.is_null() && failure.is_null()) continue;
    AttemptRecord a;
    a.attempt = static_cast<int>(n);
    a.dir = rel + "/" + std::to_string(n);
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
    found[a.attempt] = a;
  }
  std::vector<AttemptRecord> out;
  for (auto& [n, a] : found) out.push_back(std::move(a));
  return out;
}

}  // namespace

std::string PrevPath(const std::string& path) { return path + ".prev"; }

std::vector<std::string> PrevPaths(const std::string& path) {
  const std::string prev = PrevPath(path);
  const size_t slash = prev.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : prev.substr(0, slash);
  const std::string prefix = (slash == std::string::npos ? prev : prev.substr(slash + 1)) + ".";
  std::map<long, std::string> older;
  for (const std::string& name : base::ListDir(dir)) {
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    older[std::stol(digits)] = prev + "." + digits;
  }
  std::vector<std::string> out;
  for (const auto& [n, p] : older) out.push_back(p);
  if (base::Exists(prev)) out.push_back(prev);
  return out;
}

std::string NextOlderPath(const std::string& path) {
  long highest = 0;
  const std::string prefix = PrevPath(path) + ".";
  for (const std::string& p : PrevPaths(path)) {
    if (p.size() > prefix.size()) highest = std::max(highest, std::stol(p.substr(prefix.size())));
  }
  return prefix + std::to_string(highest + 1);
}

std::string AttemptsDir(const std::string& run_dir) { return run_dir + "/attempts"; }

std::vector<std::string> RunAttemptsDirs(const std::string& run_dir) {
  std::vector<std::string> dirs = PrevPaths(AttemptsDir(run_dir));
  if (base::IsDirectory(AttemptsDir(run_dir))) dirs.push_back(AttemptsDir(run_dir));
  return dirs;
}

std::string AttemptDir(const std::string& run_dir, int attempt) {
  return AttemptsDir(run_dir) + "/" + std::to_string(attempt);
}

std::string AttemptSummaryPath(const std::string& run_dir, int attempt) {
  return AttemptDir(run_dir, attempt) + "/summary.json";
}

std::string AttemptFailurePath(const std::string& run_dir, int attempt) {
  return AttemptDir(run_dir, attempt) + "/failure.json";
}

std::string AttemptRankStatsPath(const std::string& run_dir, int attempt, int rank) {
  return RankStatsPath(AttemptDir(run_dir, attempt), rank);
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
  std::vector<AttemptRecord> out;
  const std::vector<std::string> dirs = RunAttemptsDirs(run_dir);
  for (size_t i = 0; i < dirs.size(); ++i) {
    for (AttemptRecord& a : ReadRun(dirs[i], dirs[i].substr(run_dir.size() + 1))) {
      a.run = static_cast<int>(i) + 1;
      out.push_back(std::move(a));
    }
  }
  // A run's final failure is not in its attempts/ but at the root: failure.json, set aside
  // as failure.json.prev[.N] when a later run also failed for good (a rerun itself moves
  // nothing). Which run it ended is told by time: it was written after its attempt began
  // and before the next one did.
  std::vector<std::string> finals = PrevPaths(run_dir + "/failure.json");
  finals.push_back(run_dir + "/failure.json");
  for (const std::string& path : finals) {
    const double written = MtimeUnix(path);
    if (written <= 0) continue;
    AttemptRecord* latest = nullptr;
    size_t index = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].started_unix > 0 && out[i].started_unix <= written &&
          (!latest || out[i].started_unix >= latest->started_unix)) {
        latest = &out[i];
        index = i;
      }
    }
    if (!latest || latest->outcome != kRunning) continue;
    const bool last_of_run = index + 1 == out.size() || out[index + 1].run != latest->run;
    const json failure = ReadObject(path);
    const std::optional<int64_t> attempts = IntOf(failure, "attempts");
    if (last_of_run && attempts && *attempts == latest->attempt) ApplyFailure(failure, latest);
  }
  // Only the very last attempt can still be running: the others' processes were followed
  // by another attempt's.
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i].outcome == kRunning) out[i].outcome = kInterrupted;
  }
  return out;
}

int RunsOf(const std::vector<AttemptRecord>& attempts) {
  return attempts.empty() ? 0 : attempts.back().run;
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
  json row = {{"run", a.run},
              {"attempt", a.attempt},
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
  const int runs = RunsOf(attempts);
  for (const AttemptRecord& a : attempts) {
    rows.push_back(AttemptRowJson(a));
    // Attempt numbers repeat across runs: the list stays this run's, like `restarts`.
    if (a.outcome == kFailed && a.run == runs) failed.push_back(a.attempt);
  }
  const StepCoverage c = CoverageOf(attempts);
  combined["attempts"] = rows;
  combined["runs"] = runs;
  combined["failed_attempts"] = failed;
  combined["steps_trained"] = c.steps_trained;
  combined["steps_redone"] = c.redone;
  combined["first_step"] = c.first_step ? json(*c.first_step) : json(nullptr);
  combined["last_step"] = c.last_step ? json(*c.last_step) : json(nullptr);
  return combined;
}

}  // namespace ringpilot::history
