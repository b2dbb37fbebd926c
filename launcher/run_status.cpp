#include "launcher/run_status.h"

#include <algorithm>
#include <stdexcept>

#include "base/files.h"
#include "base/shell.h"
#include "base/time.h"
#include "config/job.h"
#include "history/failure.h"
#include "history/launcher_record.h"
#include "history/run_summary.h"
#include "launcher/run_dir.h"

namespace ringpilot::launcher {

RunStatus ReadRunStatus(const std::string& run_dir, double now_unix) {
  const RunDirLayout layout(run_dir);
  RunStatus s;
  s.run_dir = run_dir;
  s.logs_dir = layout.logs;
  s.launcher_log = layout.launcher_log;
  if (!base::Exists(layout.job_yaml)) {
    throw std::runtime_error(run_dir +
                             ": not a run directory (no job.yaml; `ringpilot run "
                             "--run-dir` makes one)");
  }
  config::JobConfig job;
  try {
    job = config::LoadJobConfig(layout.job_yaml);
  } catch (const config::ConfigError& e) {
    throw std::runtime_error(e.lines().front());
  }
  s.job_name = job.name;
  s.program = config::RunsCommand(job);
  s.device = config::ToString(job.world.device);
  s.nodes = job.world.nodes;
  s.procs_per_node = job.world.procs_per_node;
  s.world_size = job.world.size();
  if (s.program) {
    // The model, data and steps are the program's: known only from what it reports.
    s.command = base::ShellJoin(job.launch.command);
    s.progress_reported = false;
  } else {
    s.model = config::ToString(job.model.name);
    s.data = config::ToString(job.data.kind);
    if (!job.data.train.empty()) s.data += " " + job.data.train;
    if (job.train.epochs == 0) s.steps_target = job.train.steps;
  }
  // The store (and the protocol for programs) renames a checkpoint to its step-N name
  // only once it is complete, so the name is enough here.
  const CheckpointRef checkpoint = LatestCheckpoint(layout.checkpoints);
  s.latest_checkpoint = checkpoint.step;
  s.latest_checkpoint_path = checkpoint.path;

  s.launcher = history::ReadLauncherRecordIfValid(layout.launcher_json);
  s.lock = history::ReadRunLock(run_dir);
  // summary.json is the trainer's: a program's run finishes by its launcher's word. One
  // that is absent or cannot be read is no finished run.
  const std::optional<history::RunSummary> summary =
      s.program ? std::nullopt : history::ReadRunSummaryIfValid(layout.summary_json);
  const std::optional<history::FailureRecord> failure =
      history::ReadFailureRecord(layout.failure_json);
  const double since = 0;  // every heartbeat; those of this attempt are told by their time
  std::map<int, RankHeartbeat> beats =
      s.program ? ReadProgramBeats(layout.logs, since) : ReadHeartbeats(layout.logs, since);
  if (s.launcher) {
    // Only this attempt's beats: an earlier attempt's are older than the record's start.
    const std::optional<int64_t> started = base::ParseLogTimeNs(s.launcher->started);
    if (started) {
      for (auto it = beats.begin(); it != beats.end();) {
        it = it->second.unix * 1e9 < static_cast<double>(*started) ? beats.erase(it) : ++it;
      }
    }
  }
  s.ranks_seen = static_cast<int>(beats.size());
  for (const auto& [rank, b] : beats) {
    if (now_unix - b.unix <= kFreshHeartbeatSeconds && b.phase != "exited") ++s.ranks_fresh;
  }
  const auto zero = beats.find(0);
  if (s.program && zero != beats.end() && zero->second.progress) {
    // The program's own progress line: steps done, its target, its loss.
    const RankHeartbeat& b = zero->second;
    s.progress_reported = true;
    s.step = b.step;
    s.steps_target = b.steps;
    if (b.loss) {
      s.loss = b.loss;
      s.loss_source = "progress line";
    }
  } else if (!s.program && zero != beats.end()) {
    const RankHeartbeat& b = zero->second;
    // `step` is the step being run: done once the rank has moved on to its checkpoint,
    // evaluation or the end.
    s.step = b.step + (b.phase == "step" || b.phase == "start" ? 0 : 1);
    if (b.steps > 0) s.steps_target = b.steps;
    if (b.loss) {
      s.loss = b.loss;
      s.loss_source = "heartbeat";
    }
  }

  const bool finished = summary.has_value();
  if (LauncherStarting(s)) {
    // A launcher holds the directory and has not written its launcher.json yet (it is in
    // its start-up checks); the one there is an earlier run's.
    s.state = ToString(RunState::kRunning);
    s.detail = "starting: " + history::DescribeHolder(*s.lock.record) + " holds run.lock";
    if (s.launcher) s.liveness = CheckLauncher(*s.launcher);
  } else if (s.launcher) {
    s.state = ToString(s.launcher->state);
    s.detail = s.launcher->detail;
    s.liveness = CheckLauncher(*s.launcher);
    if (s.launcher->state == RunState::kRunning) {
      if (s.liveness == Liveness::kGone) {
        s.state = ToString(RunState::kFailed);
        s.detail = "the launcher (pid " + std::to_string(s.launcher->pid) + " on " +
                   s.launcher->host + ") is gone without recording how the job ended";
      } else if (s.liveness == Liveness::kElsewhere) {
        s.detail = "launcher pid " + std::to_string(s.launcher->pid) + " on " + s.launcher->host +
                   " (not checked from this host)";
      } else {
        s.detail = "launcher pid " + std::to_string(s.launcher->pid) + " on " + s.launcher->host;
      }
    }
  } else if (finished) {
    s.state = ToString(RunState::kFinished);
    s.detail = std::string(history::kRunSummaryFile) + " written";
  } else if (failure) {
    s.state = ToString(RunState::kFailed);
    s.detail = "failure.json written";
  } else {
    s.state = "unknown";
    s.detail = "no launcher.json, summary.json or failure.json";
  }
  if (s.state == ToString(RunState::kFinished) && finished) {
    s.step = summary->steps;
    s.steps_target = s.step;
    if (summary->final_loss) {
      s.loss = summary->final_loss;
      s.loss_source = history::kRunSummaryFile;
    }
    s.samples_per_second = summary->samples_per_second;
  } else if (s.state == ToString(RunState::kStopped) && s.latest_checkpoint > s.step &&
             !s.program) {
    s.step = s.latest_checkpoint;
  }
  if (s.state == ToString(RunState::kFailed) && failure) {
    s.first_failing_rank = failure->first_failing_rank;
    s.fatal_message = failure->fatal_message;
  }
  return s;
}

bool LauncherStarting(const RunStatus& status) {
  const history::RunLockView& lock = status.lock;
  if (lock.state != history::LockState::kHeld && lock.state != history::LockState::kElsewhere) {
    return false;
  }
  return !status.launcher || status.launcher->pid != lock.record->pid ||
         status.launcher->host != lock.record->host;
}

bool LauncherActive(const RunStatus& status) {
  if (LauncherStarting(status)) return true;
  return status.launcher && status.launcher->state == RunState::kRunning &&
         status.liveness != Liveness::kGone;
}

nlohmann::ordered_json RunStatusJson(const RunStatus& s) {
  using nlohmann::ordered_json;
  const auto or_null = [](const auto& v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
  ordered_json launcher = nullptr;
  if (s.launcher) {
    launcher = ordered_json::parse(history::LauncherJson(*s.launcher));
    launcher["liveness"] = s.liveness == Liveness::kAlive       ? "alive"
                           : s.liveness == Liveness::kElsewhere ? "elsewhere"
                                                                : "gone";
  }
  return {
      {"run_dir", s.run_dir},
      {"state", s.state},
      {"detail", s.detail},
      {"job", s.job_name},
      {"command", s.program ? ordered_json(s.command) : ordered_json(nullptr)},
      {"model", s.program ? ordered_json(nullptr) : ordered_json(s.model)},
      {"device", s.device},
      {"nodes", s.nodes},
      {"procs_per_node", s.procs_per_node},
      {"world_size", s.world_size},
      {"data", s.program ? ordered_json(nullptr) : ordered_json(s.data)},
      {"progress_reported", s.progress_reported},
      {"step", s.progress_reported ? ordered_json(s.step) : ordered_json(nullptr)},
      {"steps_target", s.steps_target > 0 ? ordered_json(s.steps_target) : ordered_json(nullptr)},
      {"loss", or_null(s.loss)},
      {"loss_source", s.loss ? ordered_json(s.loss_source) : ordered_json(nullptr)},
      {"latest_checkpoint",
       s.latest_checkpoint >= 0 ? ordered_json(s.latest_checkpoint) : ordered_json(nullptr)},
      {"latest_checkpoint_path",
       s.latest_checkpoint >= 0 ? ordered_json(s.latest_checkpoint_path) : ordered_json(nullptr)},
      {"ranks_seen", s.ranks_seen},
      {"ranks_fresh", s.ranks_fresh},
      {"samples_per_second", or_null(s.samples_per_second)},
      {"first_failing_rank",
       s.first_failing_rank >= 0 ? ordered_json(s.first_failing_rank) : ordered_json(nullptr)},
      {"fatal_message",
       s.fatal_message.empty() ? ordered_json(nullptr) : ordered_json(s.fatal_message)},
      {"launcher", launcher},
      {"lock",
       {{"state", history::ToString(s.lock.state)},
        {"holder", s.lock.record ? ordered_json(history::DescribeHolder(*s.lock.record))
                                 : ordered_json(nullptr)},
        {"pid", s.lock.record ? ordered_json(s.lock.record->pid) : ordered_json(nullptr)},
        {"host", s.lock.record ? ordered_json(s.lock.record->host) : ordered_json(nullptr)},
        {"since", s.lock.record ? ordered_json(s.lock.record->started) : ordered_json(nullptr)}}},
      {"logs_dir", s.logs_dir},
      {"launcher_log", s.launcher_log}};
}

}  // namespace ringpilot::launcher
