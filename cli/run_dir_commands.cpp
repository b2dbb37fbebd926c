#include "cli/run_dir_commands.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "base/environment.h"
#include "base/exit_status.h"
#include "base/files.h"
#include "base/text.h"
#include "base/time.h"
#include "history/launcher_record.h"
#include "history/run_lock.h"
#include "history/run_summary.h"
#include "launcher/run_dir.h"
#include "launcher/run_status.h"

namespace ringpilot::cli {
namespace {

using launcher::Liveness;
using launcher::RunState;
using launcher::RunStatus;

// How often `stop` looks at the launcher while it waits, and reports that it still waits.
constexpr double kStopPollS = 0.2;
constexpr double kStopReportS = 15.0;

std::string Absolute(const std::string& path) {
  return std::filesystem::absolute(std::filesystem::path(path)).lexically_normal().string();
}

std::string ResumeCommand(const RunStatus& s) { return launcher::ResumeCommand(s.run_dir); }

std::string StepText(const RunStatus& s) {
  if (!s.progress_reported) {
    return "no progress reported (a program reports it with lines like `step 120/600 loss "
           "0.41`: docs/programs.md)";
  }
  std::string text = std::to_string(s.step);
  if (s.steps_target > 0) text += "/" + std::to_string(s.steps_target);
  if (s.loss) {
    text += " | loss " + base::FormatFixed(*s.loss, 4);
    if (s.loss_source == "heartbeat") text += " (rank 0's last progress line)";
    if (s.loss_source == "progress line") text += " (rank 0's last progress line)";
    if (s.loss_source == history::kRunSummaryFile) text += " (summary.json final_loss)";
  }
  return text;
}

void PrintStatus(const RunStatus& s, std::ostream& out) {
  const auto row = [&out](const std::string& name, const std::string& value) {
    out << name << std::string(name.size() < 12 ? 12 - name.size() : 1, ' ') << value << "\n";
  };
  row("run", s.run_dir);
  const std::string ranks = std::to_string(s.world_size) + " rank(s) (" + std::to_string(s.nodes) +
                            " node(s) x " + std::to_string(s.procs_per_node) + ", device " +
                            s.device + ")";
  if (s.program) {
    row("job", s.job_name + ": " + ranks);
    row("command", s.command);
  } else {
    row("job", s.job_name + ": " + s.model + ", " + ranks + ", data " + s.data);
  }
  row("state", s.state + (s.detail.empty() ? "" : " (" + s.detail + ")"));
  if (s.launcher && s.launcher->attempt > 0) {
    std::string attempt = std::to_string(s.launcher->attempt) + " of at most " +
                          std::to_string(s.launcher->max_attempts);
    if (s.launcher->run > 1) {
      // Each `ringpilot run` of the directory numbers its attempts from 1.
      attempt += " in run " + std::to_string(s.launcher->run) + " of this directory (" +
                 std::to_string(s.launcher->attempts_before + s.launcher->attempt) +
                 " attempt(s) over the " + std::to_string(s.launcher->run) + " runs)";
    }
    row("attempt", attempt);
  }
  row("step", StepText(s));
  if (s.samples_per_second)
    row("throughput", base::FormatFixed(*s.samples_per_second, 1) + " samples/s");
  row("checkpoint", s.latest_checkpoint >= 0 ? "step " + std::to_string(s.latest_checkpoint) +
                                                   " (" + s.latest_checkpoint_path + ")"
                                             : "none yet");
  if (s.state == "running") {
    const std::string recent =
        " in the last " + base::FormatFixed(launcher::kFreshHeartbeatSeconds, 0) + " s";
    row("ranks",
        std::to_string(s.ranks_fresh) + " of " + std::to_string(s.world_size) +
            (s.program ? " running (their processes, as `ringpilot exec` sees them" + recent + ")"
                       : " heartbeating (beat" + recent + ")"));
  }
  switch (s.lock.state) {
    case history::LockState::kFree:
      row("lock", "free (run.lock: no launcher holds the directory)");
      break;
    case history::LockState::kHeld:
    case history::LockState::kElsewhere:
      row("lock", "held by " + history::DescribeHolder(*s.lock.record) + " (run.lock)");
      break;
    case history::LockState::kStale:
      row("lock", "stale: " + history::DescribeHolder(*s.lock.record) +
                      " no longer runs; the next `ringpilot run` takes it over (run.lock)");
      break;
  }
  if (s.launcher) {
    row("started", s.launcher->started);
    if (s.state != "running") row("ended", s.launcher->updated);
  }
  if (s.first_failing_rank >= 0) {
    row("failure", "rank " + std::to_string(s.first_failing_rank) +
                       (s.fatal_message.empty() ? "" : ": " + s.fatal_message) + " (failure.json)");
  }
  if (s.state == "stopped" || s.state == "failed") row("resume", ResumeCommand(s));
  row("logs", s.logs_dir + " (ringpilot logs " + s.run_dir + " [--rank N | --launcher] [-f])");
}

int Status(const std::string& run_dir, bool json) {
  RunStatus s;
  try {
    s = launcher::ReadRunStatus(Absolute(run_dir), base::UnixNow());
  } catch (const std::runtime_error& e) {
    std::cerr << "ringpilot status: " << e.what() << "\n";
    return base::kExitUsage;
  }
  if (json) {
    std::cout << launcher::RunStatusJson(s).dump(2) << "\n";
  } else {
    PrintStatus(s, std::cout);
  }
  return base::kExitOk;
}

struct StopArgs {
  std::string run_dir;
  bool force = false;
  double timeout_s = 600;
};

int Stop(const StopArgs& args) {
  const std::string dir = Absolute(args.run_dir);
  RunStatus s;
  try {
    s = launcher::ReadRunStatus(dir, base::UnixNow());
  } catch (const std::runtime_error& e) {
    std::cerr << "ringpilot stop: " << e.what() << "\n";
    return base::kExitUsage;
  }
  if (launcher::LauncherStarting(s)) {
    // Nothing to signal yet: it installs its handlers once it supervises (launcher.json).
    std::cerr << "ringpilot stop: " << dir << ": its launcher, "
              << history::DescribeHolder(*s.lock.record)
              << ", is still in its start-up checks; run `ringpilot stop " << dir
              << "` again in a moment\n";
    return base::kExitFailure;
  }
  if (!s.launcher) {
    std::cerr << "ringpilot stop: " << dir << ": no launcher.json: no launcher of this "
              << "ringpilot version runs it (state " << s.state << ")\n";
    return base::kExitFailure;
  }
  const launcher::LauncherRecord& rec = *s.launcher;
  if (!launcher::LauncherActive(s)) {
    std::cout << "ringpilot stop: " << dir << " is not running: " << s.state
              << (s.detail.empty() ? "" : " (" + s.detail + ")") << "\n";
    return s.state == "failed" ? base::kExitFailure : base::kExitOk;
  }
  if (s.liveness == Liveness::kElsewhere) {
    std::cerr << "ringpilot stop: the launcher runs on " << rec.host << " (pid " << rec.pid
              << "); run `ringpilot stop " << dir << "` there";
    if (!rec.slurm_job_id.empty()) {
      std::cerr << ", or `scancel --signal=USR1 --batch " << rec.slurm_job_id
                << "` (checkpoint and requeue) / `scancel " << rec.slurm_job_id << "`";
    }
    std::cerr << "\n";
    return base::kExitFailure;
  }
  // The request first: the launcher and the Slurm script tell a stop from a preemption by it.
  try {
    base::WriteFileAtomically(launcher::RunDirLayout(dir).stop_request,
                              base::LogTimeNow() + " " + (args.force ? "force" : "checkpoint") +
                                  " by pid " + std::to_string(::getpid()) + " on " +
                                  base::HostName() + "\n");
  } catch (const base::FileError& e) {
    std::cerr << "ringpilot stop: " << e.what() << "\n";
    return base::kExitFailure;
  }
  const int sig = args.force ? SIGTERM : SIGUSR1;
  if (::kill(rec.pid, sig) != 0) {
    std::cerr << "ringpilot stop: cannot signal the launcher (pid " << rec.pid
              << "): " << std::strerror(errno) << "\n";
    return base::kExitFailure;
  }
  std::cout << "ringpilot stop: sent " << (args.force ? "SIGTERM" : "SIGUSR1")
            << " to the launcher (pid " << rec.pid << "): "
            << (args.force ? "the ranks are stopped now, without a checkpoint"
                           : "the ranks checkpoint at the next step boundary and stop")
            << std::endl;

  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  while (true) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kStopPollS));
    const std::optional<launcher::LauncherRecord> now =
        history::ReadLauncherRecordIfValid(launcher::RunDirLayout(dir).launcher_json);
    const bool ended = !now || now->state != RunState::kRunning ||
                       launcher::CheckLauncher(*now) == Liveness::kGone;
    if (ended) break;
    const auto t = std::chrono::steady_clock::now();
    const double waited = std::chrono::duration<double>(t - start).count();
    if (waited > args.timeout_s) {
      std::cerr << "ringpilot stop: " << dir << " still runs after " << base::FormatFixed(waited, 0)
                << " s; `ringpilot stop --force " << dir << "` stops it without a checkpoint\n";
      return base::kExitFailure;
    }
    if (std::chrono::duration<double>(t - last_report).count() >= kStopReportS) {
      last_report = t;
      std::cout << "ringpilot stop: waiting for the launcher (" << base::FormatFixed(waited, 0)
                << " s)" << std::endl;
    }
  }
  const RunStatus after = launcher::ReadRunStatus(dir, base::UnixNow());
  const bool clean_stop = after.launcher && after.launcher->exit_status &&
                          *after.launcher->exit_status == base::kExitStopped;
  if (clean_stop) {
    // The launcher's one line: "stopped at step N by ringpilot stop; checkpoint ...;
    // resume with: ...".
    std::cout << "ringpilot stop: " << after.detail << "\n";
  } else {
    std::cout << "ringpilot stop: " << after.state
              << (after.detail.empty() ? "" : " (" + after.detail + ")") << "\n";
  }
  return after.state == "failed" ? base::kExitFailure : base::kExitOk;
}

}  // namespace

void AddRunDirCommands(CLI::App& app) {
  auto status_dir = std::make_shared<std::string>();
  auto status_json = std::make_shared<bool>(false);
  CLI::App* status = app.add_subcommand(
      "status", "How a run stands: running/finished/failed/stopped, step, loss, attempt, logs");
  status->add_option("RUN_DIR", *status_dir, "Run directory")->required();
  status->add_flag("--json", *status_json, "One JSON object instead of text");
  status->callback([status_dir, status_json] {
    const int rc = Status(*status_dir, *status_json);
    std::cout.flush();
    std::exit(rc);
  });

  auto logs_args = std::make_shared<LogsArgs>();
  CLI::App* logs = app.add_subcommand(
      "logs", "Print a rank's log (default rank 0) or the launcher's; -f follows it");
  logs->add_option("RUN_DIR", logs_args->run_dir, "Run directory")->required();
  CLI::Option* rank = logs->add_option("--rank", logs_args->rank, "Rank whose log to print")
                          ->check(CLI::NonNegativeNumber);
  logs->add_flag("--launcher", logs_args->launcher, "logs/launcher.log instead")->excludes(rank);
  logs->add_flag("-f,--follow", logs_args->follow,
                 "Keep printing what is appended (later attempts too) until the job ends");
  logs->add_option("-n,--lines", logs_args->lines, "Print only the last N lines first")
      ->check(CLI::NonNegativeNumber);
  logs->callback([logs_args] {
    const int rc = RunLogs(*logs_args);
    std::cout.flush();
    std::exit(rc);
  });

  auto stop_args = std::make_shared<StopArgs>();
  CLI::App* stop = app.add_subcommand(
      "stop",
      "Stop a running job: the ranks checkpoint and exit (--force: at once, no checkpoint)");
  stop->add_option("RUN_DIR", stop_args->run_dir, "Run directory")->required();
  stop->add_flag("--force", stop_args->force,
                 "SIGTERM instead of SIGUSR1: stop now without a checkpoint");
  stop->add_option("--timeout", stop_args->timeout_s,
                   "Seconds to wait for the job to stop (default 600)")
      ->check(CLI::PositiveNumber);
  stop->callback([stop_args] {
    const int rc = Stop(*stop_args);
    std::cout.flush();
    std::exit(rc);
  });
}

}  // namespace ringpilot::cli
