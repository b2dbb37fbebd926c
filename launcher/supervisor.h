// The front end's supervision of one MPI job: start mpirun, relay and log its output,
// forward Ctrl-C/SIGTERM, restart the whole job from the last checkpoint on failure, and
// leave a root-cause report when it fails for good. SIGUSR1 (preemption, e.g. Slurm's
// warning before the time limit) is forwarded to mpirun, which passes it to every rank:
// the ranks checkpoint at the next step boundary and stop, and the job ends "preempted"
// (base::kExitPreempted), never restarted here (docs/slurm.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/environment.h"
#include "base/signal_pipe.h"
#include "base/subprocess.h"
#include "launcher/run_state.h"

namespace ringpilot::launcher {

struct SupervisorOptions {
  static constexpr int kDefaultMaxRestarts = 2;
  static constexpr double kDefaultRestartDelayS = 1.0;
  static constexpr double kDefaultKillGraceS = 30.0;

  /// Whole-job restarts after a failure (attempts = 1 + max_restarts at most).
  int max_restarts = kDefaultMaxRestarts;
  /// Exported as RINGPILOT_RUN_DIR; its logs/rank-N.log files are searched for FATAL lines,
  /// failure.json is written there, and launcher.json (launcher/run_state.h) says how the
  /// job stands. Required.
  std::string run_dir;
  /// Every relayed line and every message of ours is appended here (never truncated), each
  /// after the time it was written (base::FormatLogTime). Empty: no log.
  std::string log_path;
  /// Receives ringpilot's own messages (one line each, no newline). Default: written to
  /// stderr_fd.
  std::function<void(const std::string&)> progress;
  int stdout_fd = 1;  ///< where the job's stdout lines go
  int stderr_fd = 2;  ///< where the job's stderr lines go
  /// Pause between a failed attempt and the next, so ports and GPU memory are released.
  double restart_delay_s = kDefaultRestartDelayS;
  /// After forwarding SIGINT/SIGTERM, how long mpirun may take to stop before its process
  /// group is killed.
  double kill_grace_s = kDefaultKillGraceS;
  /// mpirun waits for the daemon of every host, and one it cannot reach (a cut link, a
  /// dead switch) holds it until TCP gives up, many minutes, or for good when the daemon
  /// started and cannot call back. So the supervisor reads the ranks' heartbeats
  /// (RUN_DIR/logs/rank-N.heartbeat, or a launch.command rank's logs/rank-N.program.json)
  /// once a second and stops mpirun (SIGTERM, then SIGKILL
  /// 5 s later; the attempt is then reported and restarted like any failure) when
  ///   start_timeout_s  passed since the launch and no rank has written a heartbeat, or
  ///   abort_grace_s    passed since a rank gave up (heartbeat phase "abort": it called
  ///                    MPI_Abort) and mpirun has still not ended the job.
  /// 0 (the default here; `ringpilot run` takes launch.start_timeout_s and
  /// launch.abort_grace_s): wait for mpirun however long it takes.
  double start_timeout_s = 0;
  double abort_grace_s = 0;
  /// Catch SIGINT/SIGTERM/SIGUSR1 while running (and forward them). A signal the process
  /// started with ignored stays ignored (a background job of a script).
  bool handle_signals = true;
  /// Called every hang_check_period_s while an attempt runs, with the attempt's start (Unix
  /// seconds). A non-empty answer (one line: why the job is stuck) stops the attempt as
  /// failed: SIGTERM to mpirun's process group, SIGKILL after kill_grace_s; its failure
  /// report is a hang naming the rank behind, and the usual restarts follow. Empty: never.
  std::function<std::string(double attempt_start_unix)> hang_check;
  double hang_check_period_s = 5.0;
};

/// The command of every attempt. The Supervisor adds RINGPILOT_RUN_DIR, RINGPILOT_RESTART
/// (0 for the first attempt, then 1, 2, ...), RINGPILOT_ATTEMPT (1, 2, ...: the attempt's
/// number everywhere, attempts/N/ included), RINGPILOT_MAX_RESTARTS and
/// RINGPILOT_LAUNCH_UNIX to `env`.
struct SupervisedCommand {
  std::vector<std::string> argv;  ///< argv[0] is resolved on env's PATH; no shell
  base::Environment env;
};

/// How the supervised job ended.
struct JobOutcome {
  /// What `ringpilot run` exits with: 0 on success; mpirun's exit code after the last
  /// failure (128 + N when killed by signal N); 128 + SIGINT/SIGTERM (130/143) when we were
  /// interrupted; base::kExitPreempted (75) when preempted; base::kExitStopped (79) when
  /// `ringpilot stop` stopped it; 127 when mpirun could not be executed.
  int exit_status = 0;
  int attempts = 0;
  bool interrupted = false;
  /// The job stopped for preemption: SIGUSR1 came in and the attempt did not succeed, or
  /// mpirun exited with base::kExitPreempted (the ranks checkpointed and stopped). No
  /// failure.json is written and no restart is made; rerunning the run directory resumes.
  bool preempted = false;
  /// ... and the SIGUSR1 came from `ringpilot stop` (RUN_DIR/stop-request): exit_status is
  /// base::kExitStopped, and the scheduler must not requeue it.
  bool stopped = false;
  int first_failing_rank = -1;  ///< after a failure for good; -1 when unknown
};

/// Runs a job's attempts one after another. One Supervisor runs at a time per process (the
/// signal handlers it installs are process-wide).
class Supervisor {
 public:
  /// Throws std::runtime_error (one line) when the log cannot be opened.
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Prints one message of ours to the progress sink and appends it to the log.
  void Report(const std::string& line);
  /// Appends one message of ours to the log only (detail the terminal does without).
  void Note(const std::string& line);

  /// Launches `command` and supervises it until it succeeds, fails with no restarts left
  /// (then failure.json is written and a summary printed) or is interrupted (no restart
  /// after a signal). The job's output lines are relayed as they arrive.
  JobOutcome Run(const SupervisedCommand& command);

 private:
  struct Attempt {
    int exit_code = -1;   // when it exited
    int term_signal = 0;  // when a signal killed it
    bool exec_failed = false;
    std::string hang;  // hang_check's reason, when it stopped the attempt
    int64_t start_ns = 0;
    std::vector<std::string> output;  // the last lines mpirun printed (both streams)
    /// Why ringpilot stopped mpirun itself (start_timeout_s or abort_grace_s ran out);
    /// empty otherwise.
    std::string stopped_because;
    /// After SIGUSR1, mpirun's rule-framed notice blocks ("Primary job terminated
    /// normally, but 1 process returned a non-zero exit code ..."), held back until the
    /// attempt ends: a clean stop (every rank exited base::kExitPreempted) keeps them in
    /// the log only; any other end relays them. (fd, line) pairs.
    std::vector<std::pair<int, std::string>> held;
    bool holding = false;         // inside such a block
    std::size_t block_start = 0;  // index in held of the open block's first line
  };

  // What the heartbeats said about the running attempt (monotonic clock).
  struct AttemptWatch {
    int64_t start_ns = 0;       // launch
    int64_t next_check_ns = 0;  // next heartbeat read
    bool started = false;       // a rank of this attempt has beaten
    int64_t abort_seen_ns = 0;  // when a rank's "abort" beat was first seen
    int abort_rank = -1;
    int64_t term_ns = 0;  // when mpirun was sent SIGTERM
  };

  // FATAL lines this much older than an attempt's start still count for it: ranks on
  // other hosts stamp them with their own clocks.
  static constexpr int64_t kFatalClockSlackNs = 1'000'000'000;

  Attempt RunAttempt(const SupervisedCommand& command, int attempt);
  // Stops mpirun (SIGTERM, then SIGKILL setting *killed) when start_timeout_s or
  // abort_grace_s ran out.
  void Watch(base::Subprocess* mpirun, AttemptWatch* watch, Attempt* attempt, bool* killed);
  void Relay(int out_fd, const std::string& line, Attempt* attempt);
  void Pass(int out_fd, const std::string& line, Attempt* attempt);
  // After the attempt: the held mpirun blocks to the log only (`quiet`) or relayed.
  void ReleaseHeld(Attempt* attempt, bool quiet);
  // One line for a stop that `ringpilot stop` asked for: the step, the checkpoint, the
  // command that resumes (the ranks' heartbeats of the attempt that began at start_ns).
  std::string StopLine(int64_t attempt_start_ns, bool checkpointed) const;
  void AppendToLog(const std::string& line);
  bool WaitForRestart();  // false when a signal came in during the pause
  // mpirun nullptr: no job running.
  void OnSignal(int sig, base::Subprocess* mpirun, int64_t* kill_deadline);
  JobOutcome Preempted(const Attempt& last, JobOutcome outcome);
  // Analyses the attempt that just failed and writes its report: failure.json when the job
  // failed for good (`final`), else attempts/N/failure.json before the restart.
  void ReportFailure(const Attempt& last, int attempts, JobOutcome* outcome, bool final);
  // RUN_DIR/prometheus-targets.json, when there is one, becomes an empty list.
  void WithdrawScrapeTargets();
  // Rewrites RUN_DIR/launcher.json with the record's state; a failed write is reported
  // once and otherwise ignored (the job matters more than its status file).
  void WriteRecord();
  // The record's final state for `outcome`, written; returns `outcome`.
  JobOutcome Ended(JobOutcome outcome);

  SupervisorOptions options_;
  LauncherRecord record_;
  bool record_write_failed_ = false;
  int log_fd_ = -1;
  // SIGINT/SIGTERM/SIGUSR1 during Run() (with handle_signals): the handler only writes the
  // signal to this pipe, which the supervision loop polls with the job's output pipes.
  base::SignalPipe* signals_ = nullptr;
  int interrupt_signal_ = 0;        // first SIGINT/SIGTERM received
  bool preempt_requested_ = false;  // SIGUSR1 received
  std::string stop_line_;           // StopLine of a stop `ringpilot stop` asked for
};

}  // namespace ringpilot::launcher
