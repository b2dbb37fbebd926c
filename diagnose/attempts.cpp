// The run over its attempts (see diagnose.h): which steps each attempt trained, how it
// ended, and every rank's steps and time summed over attempts, so that a job restarted
// after a crash is diagnosed whole, not by its last attempt alone.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/text.h"
#include "diagnose/diagnose.h"

namespace ringpilot::diagnose {
namespace {

using nlohmann::json;

std::string Steps(const history::AttemptRecord& a) {
  if (!a.first_step)
    return "steps unknown (no attempts/" + std::to_string(a.attempt) + "/summary.json)";
  if (a.StepsTrained() == 0) return "no step";
  return "steps " + std::to_string(*a.first_step) + "-" + std::to_string(a.last_step);
}

// launcher.json's state, else what the attempts say.
std::string RunState(const RunData& run) {
  if (run.launcher && run.launcher->contains("state") && (*run.launcher)["state"].is_string()) {
    return (*run.launcher)["state"].get<std::string>();
  }
  if (run.attempts.empty()) return run.summary ? "finished" : "";
  const history::AttemptRecord& last = run.attempts.back();
  if (last.outcome == history::kCompleted) return "finished";
  if (last.outcome == history::kRunning) return "live or interrupted";
  return last.outcome;
}

}  // namespace

void AnalyzeAttempts(Diagnosis* d) {
  AttemptsView& v = d->attempts;
  v.state = RunState(d->data);
  // The launcher has ended (stopped, or gone without a report) while the last attempt's
  // record still says running: that attempt ended with it.
  if (!d->data.attempts.empty() && d->data.launcher && v.state != "running" &&
      d->data.attempts.back().outcome == history::kRunning) {
    d->data.attempts.back().outcome = v.state == "failed" ? history::kFailed : "interrupted";
  }
  const RunData& run = d->data;
  v.coverage = history::CoverageOf(run.attempts);
  for (const history::AttemptRecord& a : run.attempts) {
    if (a.outcome == history::kFailed) v.failed.push_back(a.attempt);
  }
  std::map<int, RankAttemptsRow> rows;
  for (const auto& [attempt, ranks] : run.attempt_ranks) {
    for (const RankStats& r : ranks) {
      RankAttemptsRow& row = rows[r.rank];
      row.rank = r.rank;
      row.steps += r.steps;
      row.step_seconds += r.steps * r.step_mean;
      row.steps_by_attempt[attempt] += r.steps;
    }
  }
  for (const auto& [rank, row] : rows) v.ranks.push_back(row);
  if (run.ranks_from_attempt > 0) {
    d->warnings.push_back(
        "per-rank statistics are attempt " + std::to_string(run.ranks_from_attempt) +
        "'s as of its last checkpoint (attempts/" + std::to_string(run.ranks_from_attempt) +
        "/rank-<N>.stats.json): the run has not finished");
  }
  if (!v.failed.empty()) {
    d->warnings.push_back(std::to_string(v.failed.size()) + " of " +
                          std::to_string(run.attempts.size()) + " attempts failed");
  }
  if (v.coverage.redone > 0) {
    d->warnings.push_back(std::to_string(v.coverage.redone) +
                          " step(s) trained again after resuming from a checkpoint (a lower "
                          "checkpoint.every_steps loses less to a failure)");
  }
}

std::string RenderAttemptsText(const Diagnosis& d) {
  const RunData& run = d.data;
  const AttemptsView& v = d.attempts;
  if (run.attempts.empty()) return "";
  std::ostringstream out;
  out << "\nattempts: " << run.attempts.size() << " (" << v.state;
  if (!v.failed.empty()) {
    out << "; failed:";
    for (const int n : v.failed) out << " " << n;
  }
  out << "); steps trained " << v.coverage.steps_trained;
  if (v.coverage.first_step) {
    out << " (steps " << *v.coverage.first_step << "-" << *v.coverage.last_step << ", "
        << v.coverage.redone << " re-done)";
  }
  out << "\n";
  for (const history::AttemptRecord& a : run.attempts) {
    out << "  attempt " << a.attempt << ": " << a.outcome << ", " << Steps(a);
    if (a.steps_per_second) out << ", " << base::FormatFixed(*a.steps_per_second, 2) << " steps/s";
    if (!a.failure.empty()) out << " -- " << a.failure;
    out << "\n";
  }
  if (!v.ranks.empty()) {
    out << "per-rank timed steps over all attempts (attempts/N/rank-<R>.stats.json):\n";
    for (const RankAttemptsRow& r : v.ranks) {
      out << "  rank " << r.rank << ": " << base::FormatFixed(r.steps, 0) << " steps, "
          << base::FormatFixed(r.step_seconds, 3) << " s";
      if (r.steps > 0) out << " (mean " << base::FormatFixed(r.step_seconds / r.steps, 4) << " s)";
      std::string by;
      for (const auto& [attempt, steps] : r.steps_by_attempt) {
        by +=
            (by.empty() ? "" : ", ") + std::to_string(attempt) + ": " + base::FormatFixed(steps, 0);
      }
      out << "; by attempt " << by << "\n";
    }
  }
  return out.str();
}

json AttemptsToJson(const Diagnosis& d) {
  const AttemptsView& v = d.attempts;
  json rows = json::array();
  for (const history::AttemptRecord& a : d.data.attempts)
    rows.push_back(history::AttemptRowJson(a));
  json ranks = json::array();
  for (const RankAttemptsRow& r : v.ranks) {
    json by = json::object();
    for (const auto& [attempt, steps] : r.steps_by_attempt) by[std::to_string(attempt)] = steps;
    ranks.push_back({{"rank", r.rank},
                     {"steps", r.steps},
                     {"step_seconds", r.step_seconds},
                     {"steps_by_attempt", by}});
  }
  return {{"count", d.data.attempts.size()},
          {"state", v.state},
          {"failed", v.failed},
          {"steps_trained", v.coverage.steps_trained},
          {"steps_redone", v.coverage.redone},
          {"first_step", v.coverage.first_step ? json(*v.coverage.first_step) : json(nullptr)},
          {"last_step", v.coverage.last_step ? json(*v.coverage.last_step) : json(nullptr)},
          {"list", rows},
          {"ranks", ranks},
          {"ranks_from_attempt", d.data.ranks_from_attempt}};
}

}  // namespace ringpilot::diagnose
