// One rank of a `launch.command` job: `ringpilot exec --log-dir` runs the user's program
// as a child, copies its output into RUN_DIR/logs/rank-N.log (and on to mpirun), forwards
// the signals mpirun sends, and says in the log how the program ended -- a `FATAL` line
// (launcher/failure_report.h) when it failed on its own, so that the front end's failure
// report names the rank that failed first, as it does for the built-in trainer. Every line
// of the log is `TIME LEVEL text` as the trainer's are (base::FormatLogTime): INFO for the
// wrapper's own lines, OUT and ERR for the program's stdout and stderr, FATAL.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/environment.h"

namespace ringpilot::launcher {

struct RankProgramOptions {
  std::string path;               ///< the program, resolved (base::ResolveExecutable)
  std::vector<std::string> argv;  ///< argv[0] as the user wrote it, then the arguments
  base::Environment env;          ///< the program's whole environment
  /// Appended (never truncated): the header lines, every output line of the program (both
  /// streams, as they arrive) and the closing line, each after its time and level. Its
  /// directory is created when missing.
  std::string log_path;
  std::vector<std::string> header;  ///< lines written to the log before the program starts
  int stdout_fd = 1;                ///< where the program's stdout lines are relayed
  int stderr_fd = 2;                ///< where its stderr lines are relayed
  /// Rewritten (atomically) about once a second while the program runs, and once when it
  /// ended: the launcher's view of the process (RUN_DIR/logs/rank-N.program.json, read by
  /// ReadProgramBeats): pid, state, CPU seconds, resident bytes, and the last progress line
  /// it printed (ParseProgressLine). "" = none.
  std::string beat_path;
  int rank = 0;  ///< named in the beat
  /// Called with the program's pid once it runs (exec succeeded); may be empty.
  std::function<void(int pid)> on_start;
  /// After the program exited, output still in its pipes (a child of the program that kept
  /// them open) is copied for at most this long.
  double drain_timeout_s = 2.0;
};

/// How the program ended, for the log and the exit status.
struct RankProgramEnd {
  int exit_code = -1;   ///< when it exited
  int term_signal = 0;  ///< when a signal killed it
  int stop_signal = 0;  ///< SIGTERM/SIGINT/SIGHUP/SIGQUIT we forwarded to it, if any
  bool exec_failed = false;
  int exec_errno = 0;
  std::string last_error_line;  ///< its last non-empty stderr line
};

/// What a program reports of its progress with a line on stdout or stderr (the minimal
/// protocol of docs/programs.md): `step N`, `step N/M`, `step=N` ... at the start of the
/// line, and optionally `loss X` / `loss=X` / `loss: X` later in it, as the trainer's own
/// progress lines read (`step 600/600 loss 0.3012 (41.2 steps/s)`).
struct ProgramProgress {
  int64_t step = 0;   ///< steps done
  int64_t steps = 0;  ///< the target; 0 when the line gives none
  std::optional<double> loss;
};
std::optional<ProgramProgress> ParseProgressLine(const std::string& line);

/// The status `ringpilot exec` exits with, as a shell reports a command: the exit code,
/// 128 + N after signal N, 126 (not executable) or 127 (not found) when exec failed.
int ShellStatus(const RankProgramEnd& end);

/// The closing line for the rank log: `TIME FATAL <what>` when the program failed on its own
/// (a non-zero exit other than base::kExitPreempted, or a signal we did not forward), else
/// `TIME INFO ringpilot exec: ...`; TIME is `now_ns` (Unix ns) as base::FormatLogTime
/// writes it. `program` names it (argv[0]).
std::string ClosingLogLine(const RankProgramEnd& end, const std::string& program, int64_t now_ns);

/// Runs the program as described above and returns ShellStatus of its end. The child runs
/// in its own process group, which receives SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and
/// SIGUSR2 sent to this process (mpirun signals the process it started), and dies with
/// SIGKILL if this process dies first (PR_SET_PDEATHSIG), so a rank never outlives its
/// launcher. Installs process-wide signal handlers while it runs: one call at a time.
/// Throws std::runtime_error (one line) when the log cannot be opened or a pipe or fork
/// fails; nothing has been started then.
int RunRankProgram(const RankProgramOptions& options);

}  // namespace ringpilot::launcher
