// The end of a supervised job (launcher/supervisor.h): how it is told (the record's state,
// the stop line, the preemption report) and the failure report of an attempt.
#include <map>
#include <string>

#include "base/exit_status.h"
#include "base/files.h"
#include "launcher/failure_report.h"
#include "launcher/run_dir.h"
#include "launcher/supervisor.h"

namespace ringpilot::launcher {
namespace {

// " of run N of this run directory (M attempts over the N runs)" after the first run, so
// that "finished after 1 attempt(s)" does not hide the resumes before it.
std::string RunsNote(const LauncherRecord& record, int attempts) {
  if (record.run <= 1) return "";
  return " of run " + std::to_string(record.run) + " of this run directory (" +
         std::to_string(record.attempts_before + attempts) + " attempt(s) over the " +
         std::to_string(record.run) + " runs)";
}

}  // namespace

JobOutcome Supervisor::Ended(JobOutcome outcome) {
  record_.exit_status = outcome.exit_status;
  if (outcome.exit_status == 0) {
    record_.state = RunState::kFinished;
    record_.detail = "finished after " + std::to_string(outcome.attempts) + " attempt(s)" +
                     RunsNote(record_, outcome.attempts);
  } else if (outcome.stopped) {
    record_.state = RunState::kStopped;
    record_.detail = stop_line_;
  } else if (outcome.preempted) {
    record_.state = RunState::kStopped;
    record_.detail = "SIGUSR1: checkpointed and stopped (exit " +
                     std::to_string(outcome.exit_status) + "); run it again to resume";
  } else if (outcome.interrupted) {
    record_.state = RunState::kStopped;
    record_.detail = "interrupted by " + SignalName(outcome.exit_status - 128) + " (exit " +
                     std::to_string(outcome.exit_status) +
                     "); no checkpoint at the stop, a rerun resumes from the last one";
  } else {
    record_.state = RunState::kFailed;
    record_.detail = "failed (exit " + std::to_string(outcome.exit_status) + ") after " +
                     std::to_string(outcome.attempts) + " attempt(s)" +
                     RunsNote(record_, outcome.attempts);
    if (outcome.first_failing_rank >= 0) {
      record_.detail += "; first failing rank " + std::to_string(outcome.first_failing_rank);
    }
  }
  WriteRecord();
  return outcome;
}

std::string Supervisor::StopLine(int64_t attempt_start_ns, bool checkpointed) const {
  const RunDirLayout layout(options_.run_dir);
  const CheckpointRef checkpoint = LatestCheckpoint(layout.checkpoints);
  // Where rank 0 was: the trainer stops at the step it checkpointed; a program's own
  // progress lines (or its checkpoint) say where it was, when it reports any.
  int64_t step = checkpointed ? checkpoint.step : -1;
  if (step < 0 && attempt_start_ns > 0) {
    const double since = static_cast<double>(attempt_start_ns - kFatalClockSlackNs) * 1e-9;
    const std::map<int, RankHeartbeat> beats = ReadProgramBeats(layout.logs, since);
    if (const auto zero = beats.find(0); zero != beats.end() && zero->second.progress) {
      step = zero->second.step;
    }
  }
  std::string line = "stopped";
  if (step >= 0) line += " at step " + std::to_string(step);
  line += " by ringpilot stop; ";
  if (checkpoint.step >= 0) {
    line += "checkpoint " + checkpoint.path;
    if (!checkpointed) line += " (the newest; none written at the stop)";
  } else {
    line += "no checkpoint in " + layout.checkpoints;
  }
  return line + "; resume with: " + ResumeCommand(options_.run_dir);
}

JobOutcome Supervisor::Preempted(const Attempt& last, JobOutcome outcome) {
  outcome.preempted = true;
  outcome.exit_status = base::kExitPreempted;
  const bool clean = last.term_signal == 0 && last.exit_code == base::kExitPreempted;
  if (base::Exists(RunDirLayout(options_.run_dir).stop_request)) {
    // Asked for: not a failure and not a preemption to requeue.
    outcome.stopped = true;
    outcome.exit_status = base::kExitStopped;
    stop_line_ = StopLine(last.start_ns, clean);
    Report("ringpilot: " + stop_line_);
    return outcome;
  }
  if (clean) {
    Report("ringpilot: job preempted: the ranks checkpointed and stopped; exit " +
           std::to_string(base::kExitPreempted) + " (run the same run directory again to resume)");
  } else {
    const std::string how = last.term_signal != 0   ? "killed by " + SignalName(last.term_signal)
                            : outcome.attempts == 0 ? "not started"
                                                    : "exit " + std::to_string(last.exit_code);
    Report("ringpilot: job stopped after SIGUSR1 (" + how +
           ") without a preemption checkpoint; not restarting; exit " +
           std::to_string(base::kExitPreempted) +
           " (a rerun resumes from the latest checkpoint, if any)");
  }
  return outcome;
}

void Supervisor::WithdrawScrapeTargets() {
  // The user stopped the job: its ranks are gone on purpose, and Prometheus should stop
  // scraping (and alerting on) them. file_sd reads "[]" as no targets.
  const std::string path = RunDirLayout(options_.run_dir).prometheus_targets;
  try {
    if (base::Exists(path)) base::WriteFileAtomically(path, "[]\n");
  } catch (const base::FileError& e) {
    Report(std::string("ringpilot: ") + e.what());
  }
}

void Supervisor::ReportFailure(const Attempt& last, int attempts, JobOutcome* outcome, bool final) {
  const RunDirLayout layout(options_.run_dir);
  FailureReport report = AnalyzeFailure(layout.logs, last.start_ns - kFatalClockSlackNs,
                                        last.output, attempts, last.exit_code, last.term_signal);
  report.mpirun_stopped_because = last.stopped_because;
  if (!last.hang.empty()) {
    // We stopped it: the ranks' own lines say "stopped", and the rank to blame is the one
    // the others waited for.
    report.hang = last.hang;
    if (report.rank_behind >= 0) {
      report.first_failing_rank = report.rank_behind;
      report.rank_source = "hang";
    } else if (report.heartbeats.size() == 1) {
      // A job of one rank: the rank that hung is the only one, and the one behind.
      report.first_failing_rank = report.heartbeats.begin()->first;
      report.rank_behind = report.first_failing_rank;
      report.rank_source = "hang";
    }
  }
  if (outcome) outcome->first_failing_rank = report.first_failing_rank;
  // Every failed attempt keeps its own report; the job's final one is failure.json.
  const std::string path = final ? layout.failure_json : layout.AttemptFailureJson(attempts);
  try {
    if (final) {
      KeepPrevious(layout.failure_json);  // a failure of an earlier run in this directory
    } else {
      base::MakeDirs(base::DirName(path));
    }
    base::WriteFileAtomically(path, FailureJson(report));
  } catch (const base::FileError& e) {
    Report(std::string("ringpilot: ") + e.what());
  }
  for (const std::string& line : FailureSummary(report, path, final)) Report(line);
}

}  // namespace ringpilot::launcher
