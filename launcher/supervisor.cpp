#include "launcher/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <stdexcept>

#include "base/exit_status.h"
#include "base/files.h"
#include "base/run_variables.h"
#include "base/time.h"
#include "history/launcher_record.h"
#include "launcher/failure_report.h"
#include "launcher/mpirun_command.h"
#include "launcher/run_dir.h"

namespace ringpilot::launcher {
namespace {

// Lines of mpirun output kept per attempt for naming the failing rank and failure.json.
constexpr std::size_t kKeptOutputLines = 200;
// How often the child is checked for exit while its pipes are quiet.
constexpr int kPollIntervalMs = 100;
// After mpirun exits, output still in the pipes is relayed for at most this long (a
// process outside its group may hold the pipes open forever).
constexpr int64_t kDrainTimeoutNs = 2'000'000'000;
// How often the heartbeats are read (has a rank started? given up?), and how long mpirun
// has after SIGTERM before its process group is killed when the supervisor stops it.
constexpr int64_t kWatchIntervalNs = 1'000'000'000;
constexpr int64_t kAbortKillDelayNs = 5'000'000'000;

// A line of dashes at least this long frames one of mpirun's notices; a notice block
// longer than this many lines is not one.
constexpr std::size_t kMinRuleLength = 20;
constexpr std::size_t kMaxHeldBlockLines = 40;

}  // namespace

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {
  if (!options_.progress) {
    const int fd = options_.stderr_fd;
    options_.progress = [fd](const std::string& line) { base::WriteBestEffort(fd, line + "\n"); };
  }
  if (!options_.log_path.empty()) {
    log_fd_ = ::open(options_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd_ < 0) {
      throw std::runtime_error(options_.log_path +
                               ": cannot open for appending: " + std::strerror(errno));
    }
  }
}

Supervisor::~Supervisor() {
  if (log_fd_ >= 0) ::close(log_fd_);
}

void Supervisor::AppendToLog(const std::string& line) {
  if (log_fd_ >= 0) base::WriteBestEffort(log_fd_, base::LogTimeNow() + " " + line + "\n");
}

void Supervisor::Report(const std::string& line) {
  options_.progress(line);
  AppendToLog(line);
}

void Supervisor::Note(const std::string& line) { AppendToLog(line); }

void Supervisor::WriteRecord() {
  record_.updated = base::LogTimeNow();
  try {
    history::WriteLauncherRecord(RunDirLayout(options_.run_dir).launcher_json, record_);
  } catch (const base::FileError& e) {
    if (!record_write_failed_) Report(std::string("ringpilot: ") + e.what());
    record_write_failed_ = true;
  }
}

void Supervisor::Relay(int out_fd, const std::string& line, Attempt* attempt) {
  if (preempt_requested_) {
    // mpirun frames its notices with rules of dashes; after SIGUSR1 the one that says a
    // rank "returned a non-zero exit code" (75: checkpointed and stopped) is expected and
    // reads as a crash, so such blocks wait for the attempt's end (ReleaseHeld).
    const bool rule =
        line.size() >= kMinRuleLength && line.find_first_not_of('-') == std::string::npos;
    if (attempt->holding || rule) {
      if (!attempt->holding) attempt->block_start = attempt->held.size();
      attempt->held.emplace_back(out_fd, line);
      const std::size_t in_block = attempt->held.size() - attempt->block_start;
      if (attempt->holding && rule && in_block > 2) {
        attempt->holding = false;  // the block is complete
      } else if (in_block > kMaxHeldBlockLines) {
        // Not one of mpirun's notices: pass the lines on as they came.
        for (std::size_t i = attempt->block_start; i < attempt->held.size(); ++i) {
          Pass(attempt->held[i].first, attempt->held[i].second, attempt);
        }
        attempt->held.resize(attempt->block_start);
        attempt->holding = false;
      } else {
        attempt->holding = true;
      }
      return;
    }
  }
  Pass(out_fd, line, attempt);
}

void Supervisor::ReleaseHeld(Attempt* attempt, bool quiet) {
  for (const auto& [fd, line] : attempt->held) {
    if (quiet) {
      AppendToLog(line);
      attempt->output.push_back(line);
    } else {
      Pass(fd, line, attempt);
    }
  }
  attempt->held.clear();
  attempt->holding = false;
}

void Supervisor::Pass(int out_fd, const std::string& line, Attempt* attempt) {
  base::WriteBestEffort(out_fd, line + "\n");
  AppendToLog(line);
  attempt->output.push_back(line);
  if (attempt->output.size() > 2 * kKeptOutputLines) {
    attempt->output.erase(attempt->output.begin(), attempt->output.end() - kKeptOutputLines);
  }
}

Supervisor::Attempt Supervisor::RunAttempt(const SupervisedCommand& command, int number) {
  Attempt attempt;
  base::Environment env = command.env;
  env[base::kRunDirVar] = options_.run_dir;
  env[base::kRestartVar] = std::to_string(number - 1);
  env[base::kAttemptVar] = std::to_string(number);
  env[base::kMaxRestartsVar] = std::to_string(options_.max_restarts);
  {
    char stamp[32];
    std::snprintf(
        stamp, sizeof(stamp), "%.3f",
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    env[base::kLaunchTimeVar] = stamp;
  }
  const auto path_it = env.find("PATH");
  const std::string exe =
      command.argv.empty()
          ? std::string()
          : base::ResolveExecutable(command.argv[0],
                                    path_it == env.end() ? "/usr/bin:/bin" : path_it->second);
  if (exe.empty()) {
    Report("ringpilot: cannot execute '" + (command.argv.empty() ? "" : command.argv[0]) +
           "': not found or not executable");
    attempt.exec_failed = true;
    return attempt;
  }

  base::SpawnOptions spawn;
  spawn.argv = command.argv;
  spawn.path = exe;
  spawn.env = std::move(env);
  // Own process group: the terminal's Ctrl-C reaches only us, and we decide what mpirun
  // and every rank under it receive.
  spawn.own_process_group = true;
  // A launcher killed outright (SIGKILL) cannot stop its job: mpirun is told by the
  // kernel instead, so no rank trains on in a directory whose lock is free again.
  spawn.parent_death_signal = SIGTERM;
  spawn.stdin_from = base::ChildInput::kNull;
  spawn.stdout_to = base::ChildOutput::kPipe;
  spawn.stderr_to = base::ChildOutput::kPipe;
  spawn.default_signals = {SIGPIPE, SIGINT, SIGTERM, SIGUSR1};
  attempt.start_ns = base::UnixNowNs();
  base::Subprocess mpirun = [&] {
    try {
      return base::Subprocess::Spawn(spawn);
    } catch (const base::SpawnError& e) {
      throw std::runtime_error(std::string("ringpilot: ") + e.what());
    }
  }();
  if (mpirun.exec_errno() != 0) {
    Report("ringpilot: cannot execute '" + exe + "': " + std::strerror(mpirun.exec_errno()));
    attempt.exec_failed = true;
    return attempt;
  }

  const base::LineHandler relay = [&](base::ChildStream stream, const std::string& line) {
    Relay(stream == base::ChildStream::kStdout ? options_.stdout_fd : options_.stderr_fd, line,
          &attempt);
  };
  AttemptWatch watch;
  watch.start_ns = base::MonotonicNs();
  bool exited = false;
  bool killed = false;
  base::ProcessStatus status;
  int64_t drain_deadline = 0;
  int64_t kill_deadline = 0;
  const auto hang_period_ns = static_cast<int64_t>(options_.hang_check_period_s * 1e9);
  int64_t next_hang_check = base::MonotonicNs() + hang_period_ns;
  while (true) {
    // HasExited leaves the zombie in place, so its pid cannot be reused as a process group
    // id while we kill what is left of the group (ranks mpirun failed to reap).
    if (!exited && mpirun.HasExited()) {
      mpirun.Signal(SIGKILL);
      status = mpirun.Wait();
      exited = true;
      drain_deadline = base::MonotonicNs() + kDrainTimeoutNs;
    }
    if (exited && !mpirun.OutputOpen()) break;
    if (exited && base::MonotonicNs() > drain_deadline) break;
    if (!mpirun.RelayLines(kPollIntervalMs, {signals_->fd()}, relay)) break;

    for (const int sig : signals_->Take()) {
      if (!exited) OnSignal(sig, &mpirun, &kill_deadline);
    }
    // The heartbeat watch (start_timeout_s, abort_grace_s) and hang_check each stop the
    // attempt at most once, and not both.
    if (!exited && !killed && attempt.hang.empty()) Watch(&mpirun, &watch, &attempt, &killed);
    if (options_.hang_check && !exited && attempt.hang.empty() && attempt.stopped_because.empty() &&
        interrupt_signal_ == 0 && base::MonotonicNs() > next_hang_check) {
      next_hang_check = base::MonotonicNs() + hang_period_ns;
      attempt.hang = options_.hang_check(static_cast<double>(attempt.start_ns) * 1e-9);
      if (!attempt.hang.empty()) {
        Report("ringpilot: job hung: " + attempt.hang + "; stopping this attempt");
        kill_deadline = base::MonotonicNs() + static_cast<int64_t>(options_.kill_grace_s * 1e9);
        mpirun.Signal(SIGTERM);
      }
    }
    if ((interrupt_signal_ != 0 || !attempt.hang.empty()) && !exited && !killed &&
        base::MonotonicNs() > kill_deadline) {
      Report("ringpilot: mpirun did not stop within " + std::to_string(options_.kill_grace_s) +
             " s; killing its process group");
      mpirun.Signal(SIGKILL);
      killed = true;
    }
  }
  mpirun.FinishLines(relay);
  if (status.term_signal != 0) {
    attempt.term_signal = status.term_signal;
  } else {
    attempt.exit_code = status.exit_code;
  }
  ReleaseHeld(&attempt, attempt.term_signal == 0 && attempt.exit_code == base::kExitPreempted);
  return attempt;
}

void Supervisor::Watch(base::Subprocess* mpirun, AttemptWatch* watch, Attempt* attempt,
                       bool* killed) {
  if (interrupt_signal_ != 0) return;
  const int64_t now = base::MonotonicNs();
  if (watch->term_ns != 0) {  // told to stop: it has kAbortKillDelayNs
    if (now - watch->term_ns > kAbortKillDelayNs) {
      Report("ringpilot: mpirun did not stop after SIGTERM; killing its process group");
      mpirun->Signal(SIGKILL);
      *killed = true;
    }
    return;
  }
  const bool watch_start = options_.start_timeout_s > 0 && !watch->started;
  const bool watch_abort = options_.abort_grace_s > 0 && watch->abort_seen_ns == 0;
  if ((watch_start || watch_abort) && now >= watch->next_check_ns) {
    watch->next_check_ns = now + kWatchIntervalNs;
    const double since = static_cast<double>(attempt->start_ns - kFatalClockSlackNs) * 1e-9;
    const std::string logs = RunDirLayout(options_.run_dir).logs;
    // A launch.command rank has started once its wrapper wrote its first beat.
    if (!watch->started && !ReadProgramBeats(logs, since).empty()) watch->started = true;
    for (const auto& [rank, beat] : ReadHeartbeats(logs, since)) {
      watch->started = true;
      if (beat.phase == "abort" && watch->abort_seen_ns == 0) {
        watch->abort_seen_ns = now;
        watch->abort_rank = rank;
      }
    }
  }
  char why[256] = "";
  if (options_.start_timeout_s > 0 && !watch->started &&
      now - watch->start_ns > static_cast<int64_t>(options_.start_timeout_s * 1e9)) {
    std::snprintf(why, sizeof why,
                  "no rank had started %.0f s after launch (launch.start_timeout_s): mpirun "
                  "is waiting for a host it cannot reach (network down?) or a rank stuck in "
                  "start-up",
                  options_.start_timeout_s);
  } else if (options_.abort_grace_s > 0 && watch->abort_seen_ns != 0 &&
             now - watch->abort_seen_ns > static_cast<int64_t>(options_.abort_grace_s * 1e9)) {
    std::snprintf(why, sizeof why,
                  "mpirun had not ended the job %.0f s after rank %d gave up "
                  "(launch.abort_grace_s); a host it cannot reach (network down?) holds it",
                  options_.abort_grace_s, watch->abort_rank);
  }
  if (why[0] == '\0') return;
  attempt->stopped_because = why;
  Report(std::string("ringpilot: ") + why + "; stopping mpirun");
  mpirun->Signal(SIGTERM);
  watch->term_ns = now;
}

void Supervisor::OnSignal(int sig, base::Subprocess* mpirun, int64_t* kill_deadline) {
  if (sig == SIGUSR1) {
    if (!preempt_requested_) {
      preempt_requested_ = true;
      const std::string line =
          mpirun != nullptr ? "ringpilot: received SIGUSR1; forwarding it to mpirun: the ranks "
                              "checkpoint at the next step boundary and stop (no restart)"
                            : "ringpilot: received SIGUSR1; not starting another attempt";
      // A stop asked for with `ringpilot stop` ends with one line (StopLine); `stop` itself
      // told the user what happens meanwhile.
      if (base::Exists(RunDirLayout(options_.run_dir).stop_request)) {
        Note(line + " (ringpilot stop)");
      } else {
        Report(line);
      }
    }
    // mpirun alone: it forwards SIGUSR1 to every rank, on every host (its local ranks
    // would get it twice through the process group).
    if (mpirun != nullptr) mpirun->SignalChild(SIGUSR1);
    return;
  }
  if (interrupt_signal_ == 0) {
    interrupt_signal_ = sig;
    if (mpirun == nullptr) return;
    *kill_deadline = base::MonotonicNs() + static_cast<int64_t>(options_.kill_grace_s * 1e9);
    Report("ringpilot: received " + SignalName(sig) + "; stopping the job (no restart)");
  }
  if (mpirun != nullptr) mpirun->Signal(sig);
}

bool Supervisor::WaitForRestart() {
  const int64_t until = base::MonotonicNs() + static_cast<int64_t>(options_.restart_delay_s * 1e9);
  int64_t unused_deadline = 0;
  while (true) {
    for (const int sig : signals_->Take()) OnSignal(sig, nullptr, &unused_deadline);
    if (interrupt_signal_ != 0 || preempt_requested_) return false;
    const int64_t left_ns = until - base::MonotonicNs();
    if (left_ns <= 0) return true;
    pollfd p{signals_->fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ns / 1'000'000 + 1, 1000)));
  }
}

JobOutcome Supervisor::Run(const SupervisedCommand& command) {
  // A closed stdout (`ringpilot run ... | head`) must not kill the supervisor (SignalPipe
  // ignores SIGPIPE): the job keeps running and its lines still go to launcher.log.
  base::SignalPipe signals(options_.handle_signals ? std::vector<int>{SIGINT, SIGTERM, SIGUSR1}
                                                   : std::vector<int>{});
  signals_ = &signals;
  struct Forget {
    base::SignalPipe** pipe;
    ~Forget() { *pipe = nullptr; }
  } forget{&signals_};
  interrupt_signal_ = 0;
  preempt_requested_ = false;
  // The run before this one in this directory (a resume): its record numbers the runs.
  const std::optional<LauncherRecord> previous =
      history::ReadLauncherRecordIfValid(RunDirLayout(options_.run_dir).launcher_json);
  record_ = LauncherRecord{};
  stop_line_.clear();
  if (previous) {
    record_.run = previous->run + 1;
    record_.attempts_before = previous->attempts_before + previous->attempt;
  }
  record_.pid = static_cast<int>(::getpid());
  record_.host = base::HostName();
  record_.executable = base::SelfExecutablePath();
  record_.started = base::LogTimeNow();
  record_.max_attempts = options_.max_restarts + 1;
  record_.slurm_job_id = base::Lookup(command.env, "SLURM_JOB_ID", "");
  // A stop request of an earlier run of this directory: this run was started again.
  const std::string stop_request = RunDirLayout(options_.run_dir).stop_request;
  if (base::Exists(stop_request)) ::unlink(stop_request.c_str());
  WriteRecord();
  JobOutcome outcome;
  const auto stop = [&]() {
    outcome.interrupted = true;
    outcome.exit_status = 128 + interrupt_signal_;
    Report("ringpilot: job interrupted by " + SignalName(interrupt_signal_) + " after " +
           std::to_string(outcome.attempts) + " attempt(s); not restarting");
    WithdrawScrapeTargets();
    return Ended(outcome);
  };
  int64_t unused_deadline = 0;
  for (const int sig : signals_->Take()) OnSignal(sig, nullptr, &unused_deadline);
  if (interrupt_signal_ != 0) return stop();
  if (preempt_requested_) return Ended(Preempted(Attempt{}, outcome));
  for (int restart = 0;; ++restart) {
    record_.attempt = restart + 1;
    WriteRecord();
    const Attempt attempt = RunAttempt(command, restart + 1);
    outcome.attempts = restart + 1;
    if (interrupt_signal_ != 0) return stop();
    if (attempt.exec_failed) {
      outcome.exit_status = 127;
      return Ended(outcome);
    }
    if (attempt.term_signal == 0 && attempt.exit_code == 0 && attempt.hang.empty()) {
      if (restart > 0) {
        Report("ringpilot: job finished after " + std::to_string(restart) + " restart(s)");
      }
      outcome.exit_status = 0;
      return Ended(outcome);
    }
    // Preemption is not a failure: no failure.json, no restart here (the scheduler
    // requeues the job, and the rerun resumes from the checkpoint).
    if (preempt_requested_ ||
        (attempt.term_signal == 0 && attempt.exit_code == base::kExitPreempted)) {
      return Ended(Preempted(attempt, outcome));
    }
    outcome.exit_status = attempt.term_signal != 0 ? 128 + attempt.term_signal : attempt.exit_code;
    if (outcome.exit_status == 0) outcome.exit_status = base::kExitFailure;  // hung, stopped
    // A rank that failed on something every attempt would meet again (the job file, a
    // port in use, a checkpoint of another model, bad data) says so with its exit status:
    // restarting would only repeat it.
    const bool permanent = attempt.term_signal == 0 && attempt.exit_code == base::kExitPermanent;
    if (permanent && restart < options_.max_restarts) {
      Report("ringpilot: not restarting: the failure repeats on every attempt (exit " +
             std::to_string(base::kExitPermanent) +
             ": job file, metrics port, checkpoint or data; see the FATAL line)");
    }
    if (permanent || restart >= options_.max_restarts) {
      ReportFailure(attempt, outcome.attempts, &outcome, /*final=*/true);
      return Ended(outcome);
    }
    ReportFailure(attempt, outcome.attempts, nullptr, /*final=*/false);
    const std::string how = attempt.term_signal != 0
                                ? "killed by " + SignalName(attempt.term_signal)
                                : "exit " + std::to_string(attempt.exit_code);
    Report("ringpilot: job failed (" + how + ") on attempt " + std::to_string(restart + 1) +
           "; restarting from the last checkpoint as attempt " + std::to_string(restart + 2) +
           " (restart " + std::to_string(restart + 1) + " of " +
           std::to_string(options_.max_restarts) + ")");
    if (!WaitForRestart()) {
      return interrupt_signal_ != 0 ? stop() : Ended(Preempted(attempt, outcome));
    }
  }
}

}  // namespace ringpilot::launcher
