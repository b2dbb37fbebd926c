// The run over its attempts (see diagnose.h): which steps each attempt of each `ringpilot
// run` of the directory trained, how it ended, and every rank's steps and time summed over
// attempts, so that a job restarted after a crash, or run again after a preemption, is
// diagnosed whole, not by its last attempt alone.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/text.h"
#include "diagnose/diagnose.h"

namespace ringpilot::diagnose {
namespace {

using nlohmann::json;

std::string Steps(const history::AttemptRecord& a) {
  if (!a.first_step) return "steps unknown (no " + a.dir + "/summary.json)";
  if (a.StepsTrained() == 0) return "no step";
  return "steps " + std::to_string(*a.first_step) + "-" + std::to_string(a.last_step);
}

// "attempt N", or "run R attempt N" when the directory was run more than once (attempt
// numbers start from 1 in every run).
std::string Label(int runs, int run, int attempt) {
  return (runs > 1 ? "run " + std::to_string(run) + " " : "") + "attempt " +
         std::to_string(attempt);
}

// A (run, attempt) key of the per-rank tables: "N", or "R.N" over several runs.
std::string Key(int runs, const std::pair<int, int>& run_attempt) {
  return (runs > 1 ? std::to_string(run_attempt.first) + "." : "") +
         std::to_string(run_attempt.second);
}

// launcher.json's state, else what the attempts say.
std::string RunState(const RunData& run) {
  if (run.launcher) return history::ToString(run.launcher->state);
  if (run.attempts.empty()) return run.summary ? "finished" : run.failure ? "failed" : "";
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
    d->data.attempts.back().outcome =
        v.state == "failed" ? history::kFailed : history::kInterrupted;
  }
  const RunData& run = d->data;
  v.coverage = history::CoverageOf(run.attempts);
  v.runs = history::RunsOf(run.attempts);
  if (v.state == "failed" && run.failure) {
    FailureView f;
    f.record = *run.failure;
    f.attempt = run.failure->attempts;
    if (run.launcher && f.attempt <= 0) f.attempt = run.launcher->attempt;
    // Its record in the last run's attempts/, if it left one that says what it trained.
    const history::AttemptRecord* record = nullptr;
    for (const history::AttemptRecord& a : run.attempts) {
      if (a.run == v.runs && a.attempt == f.attempt) record = &a;
    }
    f.before_first_step = record == nullptr || record->StepsTrained() == 0;
    v.failure = f;
  }
  for (const history::AttemptRecord& a : run.attempts) {
    if (a.outcome != history::kFailed) continue;
    ++v.failed_total;
    if (a.run == v.runs) v.failed.push_back(a.attempt);
  }
  std::map<int, RankAttemptsRow> rows;
  for (const auto& [key, ranks] : run.attempt_ranks) {
    for (const RankStats& r : ranks) {
      RankAttemptsRow& row = rows[r.rank];
      row.rank = r.rank;
      row.steps += r.steps;
      row.step_seconds += r.steps * r.step_mean;
      row.steps_by_attempt[key] += r.steps;
    }
  }
  for (const auto& [rank, row] : rows) v.ranks.push_back(row);
  if (run.ranks_from_attempt > 0) {
    std::string dir;
    for (const history::AttemptRecord& a : run.attempts) {
      if (a.run == run.ranks_from_run && a.attempt == run.ranks_from_attempt) dir = a.dir;
    }
    d->warnings.push_back(
        "per-rank statistics are " + Label(v.runs, run.ranks_from_run, run.ranks_from_attempt) +
        "'s as of its last checkpoint (" + dir + "/rank-<N>.stats.json): the run has not finished");
  }
  if (v.failed_total > 0) {
    d->warnings.push_back(std::to_string(v.failed_total) + " of " +
                          std::to_string(run.attempts.size()) + " attempts failed" +
                          (v.runs > 1 ? " over " + std::to_string(v.runs) + " runs" : ""));
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
  std::ostringstream out;
  if (v.failure) {
    const FailureView& f = *v.failure;
    out << "\nfailure: attempt " << f.attempt << " failed"
        << (f.before_first_step ? " before its first step" : "") << " ("
        << history::ExitText(f.record) << "): " << history::FailureLine(f.record)
        << " (failure.json)\n";
  }
  if (run.attempts.empty()) return out.str();
  out << "\nattempts: " << run.attempts.size();
  if (v.runs > 1) out << " in " << v.runs << " runs";
  out << " (" << v.state;
  if (v.failed_total > 0) {
    std::string failed;
    for (const history::AttemptRecord& a : run.attempts) {
      if (a.outcome != history::kFailed) continue;
      failed += (failed.empty() ? " " : (v.runs > 1 ? ", " : " ")) +
                (v.runs > 1 ? Label(v.runs, a.run, a.attempt) : std::to_string(a.attempt));
    }
    out << "; failed:" << failed;
  }
  out << "); steps trained " << v.coverage.steps_trained;
  if (v.coverage.first_step) {
    out << " (steps " << *v.coverage.first_step << "-" << *v.coverage.last_step << ", "
        << v.coverage.redone << " re-done)";
  }
  out << "\n";
  for (const history::AttemptRecord& a : run.attempts) {
    out << "  " << Label(v.runs, a.run, a.attempt) << ": " << a.outcome << ", " << Steps(a);
    if (a.steps_per_second) out << ", " << base::FormatFixed(*a.steps_per_second, 2) << " steps/s";
    if (!a.failure.empty()) out << " -- " << a.failure;
    out << "\n";
  }
  if (!v.ranks.empty()) {
    out << "per-rank timed steps over all attempts ("
        << (v.runs > 1 ? "attempts/N/ and the earlier runs' attempts.prev*/N/" : "attempts/N/")
        << "rank-<R>.stats.json):\n";
    for (const RankAttemptsRow& r : v.ranks) {
      out << "  rank " << r.rank << ": " << base::FormatFixed(r.steps, 0) << " steps, "
          << base::FormatFixed(r.step_seconds, 3) << " s";
      if (r.steps > 0) out << " (mean " << base::FormatFixed(r.step_seconds / r.steps, 4) << " s)";
      std::string by;
      for (const auto& [key, steps] : r.steps_by_attempt) {
        by += (by.empty() ? "" : ", ") + Key(v.runs, key) + ": " + base::FormatFixed(steps, 0);
      }
      out << "; by " << (v.runs > 1 ? "run.attempt " : "attempt ") << by << "\n";
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
    for (const auto& [key, steps] : r.steps_by_attempt) by[Key(v.runs, key)] = steps;
    ranks.push_back({{"rank", r.rank},
                     {"steps", r.steps},
                     {"step_seconds", r.step_seconds},
                     {"steps_by_attempt", by}});
  }
  json failure = nullptr;
  if (v.failure) {
    const FailureView& f = *v.failure;
    failure = {
        {"attempt", f.attempt},
        {"before_first_step", f.before_first_step},
        {"exit", history::ExitText(f.record)},
        {"exit_code", f.record.exit_code ? json(*f.record.exit_code) : json(nullptr)},
        {"signal", f.record.signal_name.empty() ? json(nullptr) : json(f.record.signal_name)},
        {"first_failing_rank",
         f.record.first_failing_rank >= 0 ? json(f.record.first_failing_rank) : json(nullptr)},
        {"fatal_message",
         f.record.fatal_message.empty() ? json(nullptr) : json(f.record.fatal_message)},
        {"line", history::FailureLine(f.record)}};
  }
  return {{"count", d.data.attempts.size()},
          {"failure", failure},
          {"runs", v.runs},
          {"state", v.state},
          {"failed", v.failed},
          {"failed_total", v.failed_total},
          {"steps_trained", v.coverage.steps_trained},
          {"steps_redone", v.coverage.redone},
          {"first_step", v.coverage.first_step ? json(*v.coverage.first_step) : json(nullptr)},
          {"last_step", v.coverage.last_step ? json(*v.coverage.last_step) : json(nullptr)},
          {"list", rows},
          {"ranks", ranks},
          {"ranks_from_attempt", d.data.ranks_from_attempt},
          {"ranks_from_run", d.data.ranks_from_run}};
}

}  // namespace ringpilot::diagnose
