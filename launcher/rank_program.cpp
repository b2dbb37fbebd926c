#include "launcher/rank_program.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iterator>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "base/exit_status.h"
#include "base/files.h"
#include "base/shell.h"
#include "base/signal_pipe.h"
#include "base/subprocess.h"
#include "base/time.h"
#include "history/program_beat.h"
#include "launcher/failure_report.h"

namespace ringpilot::launcher {
namespace {

// The last stderr line quoted in a FATAL line is cut to this many bytes.
constexpr std::size_t kQuotedLineBytes = 300;

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

bool IsStopSignal(int sig) {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

// CPU seconds (user + system) and resident bytes of a process, from /proc/PID/stat;
// nullopt when it cannot be read (gone, or not Linux).
struct ProcUsage {
  double cpu_seconds = 0;
  int64_t rss_bytes = 0;
};
std::optional<ProcUsage> ReadProcUsage(pid_t pid) {
  std::string text;
  try {
    text = base::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  } catch (const base::FileError&) {
    return std::nullopt;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count after it.
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string f; in >> f;) fields.push_back(f);
  if (fields.size() < 22) return std::nullopt;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  ProcUsage u;
  try {
    u.cpu_seconds = (std::stod(fields[11]) + std::stod(fields[12])) / (tick > 0 ? tick : 100);
    u.rss_bytes = static_cast<int64_t>(std::stod(fields[21]) * page);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return u;
}

// history/program_beat.h's beat. A failed write is ignored: the beat is for `status` and
// diagnosis, and the program must not stop for it.
void WriteBeat(const RankProgramOptions& options, pid_t pid, const std::string& state,
               double started_unix, const std::optional<history::ProgramProgress>& progress,
               const std::optional<int>& status) {
  if (options.beat_path.empty()) return;
  history::ProgramBeat b;
  b.rank = options.rank;
  b.pid = pid;
  b.command = base::ShellJoin(options.argv);
  b.state = state;
  b.started_unix = started_unix;
  b.unix = base::UnixNow();
  if (const std::optional<ProcUsage> u = ReadProcUsage(pid)) {
    b.cpu_seconds = u->cpu_seconds;
    b.rss_bytes = u->rss_bytes;
  }
  b.progress = progress;
  b.status = status;
  try {
    base::WriteFileAtomically(options.beat_path, history::ProgramBeatJson(b));
  } catch (const base::FileError&) {
  }
}

}  // namespace

std::optional<ProgramProgress> ParseProgressLine(const std::string& line) {
  // "step 12", "step 12/600", "step=12", "Step: 12 / 600" at the start; then "loss X".
  static const std::regex kStep(R"(^\s*[Ss]tep\s*[=:]?\s*(\d{1,15})(?:\s*/\s*(\d{1,15}))?\b)");
  static const std::regex kLoss(
      R"(\b[Ll]oss\s*[=:]?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)\b)");
  std::smatch m;
  if (!std::regex_search(line, m, kStep)) return std::nullopt;
  ProgramProgress p;
  p.step = std::stoll(m[1].str());
  if (m[2].matched) p.steps = std::stoll(m[2].str());
  const std::string rest = m.suffix().str();
  std::smatch l;
  if (std::regex_search(rest, l, kLoss)) {
    try {
      p.loss = std::stod(l[1].str());
    } catch (const std::exception&) {
    }
  }
  return p;
}

int ShellStatus(const RankProgramEnd& end) {
  if (end.exec_failed) {
    return end.exec_errno == ENOENT ? base::kExitNotFound : base::kExitNotExecutable;
  }
  if (end.term_signal != 0) return 128 + end.term_signal;
  return end.exit_code;
}

std::string ClosingLogLine(const RankProgramEnd& end, const std::string& program, int64_t now_ns) {
  const std::string stamp = base::FormatLogTime(static_cast<double>(now_ns) / 1e9);
  const std::string fatal = stamp + " FATAL ";
  const std::string info = stamp + " INFO ";
  if (end.exec_failed) {
    return fatal + "cannot execute " + program + ": " + std::strerror(end.exec_errno);
  }
  std::string how = end.term_signal != 0 ? "killed by " + SignalName(end.term_signal)
                                         : "exited with status " + std::to_string(end.exit_code);
  if (end.stop_signal != 0) {
    // The launcher stopped it (mpirun tears the job down after another rank failed, or
    // the user pressed Ctrl-C): not this rank's failure.
    return info + "ringpilot exec: " + program + " " + how + " after " +
           SignalName(end.stop_signal) + " from the launcher";
  }
  if (end.term_signal == 0 && end.exit_code == 0) {
    return info + "ringpilot exec: " + program + " finished";
  }
  if (end.term_signal == 0 && end.exit_code == base::kExitPreempted) {
    return info + "ringpilot exec: " + program + " stopped with status " +
           std::to_string(base::kExitPreempted) + " (checkpointed for preemption)";
  }
  std::string line = fatal + program + " " + how;
  if (!end.last_error_line.empty()) {
    std::string quoted = end.last_error_line.substr(0, kQuotedLineBytes);
    if (end.last_error_line.size() > kQuotedLineBytes) quoted += "...";
    line += " (last error line: " + quoted + ")";
  }
  return line;
}

int RunRankProgram(const RankProgramOptions& options) {
  base::MakeDirs(base::DirName(options.log_path));
  const int log_fd =
      ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    throw std::runtime_error("ringpilot exec: " + options.log_path +
                             ": cannot open for appending: " + std::strerror(errno));
  }
  struct LogCloser {
    int fd;
    ~LogCloser() { ::close(fd); }
  } log_closer{log_fd};
  for (const std::string& line : options.header) {
    base::WriteBestEffort(log_fd, base::LogTimeNow() + " INFO " + line + "\n");
  }

  // Signals (SIGCHLD included, so that a child's death wakes the loop at once) arrive on a
  // pipe that the loop polls with the program's output. SIGCHLD is caught even when it
  // started ignored: the loop needs it.
  base::SignalPipe signals({SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD},
                           {SIGCHLD});
  base::SpawnOptions spawn;
  spawn.path = options.path;
  spawn.argv = options.argv;
  spawn.env = options.env;
  spawn.own_process_group = true;
  spawn.parent_death_signal = SIGKILL;
  spawn.stdout_to = base::ChildOutput::kPipe;
  spawn.stderr_to = base::ChildOutput::kPipe;
  spawn.default_signals.assign(std::begin(kForwarded), std::end(kForwarded));
  spawn.default_signals.insert(spawn.default_signals.end(), {SIGCHLD, SIGPIPE});
  base::Subprocess child = [&] {
    try {
      return base::Subprocess::Spawn(spawn);
    } catch (const base::SpawnError& e) {
      throw std::runtime_error(std::string("ringpilot exec: ") + e.what());
    }
  }();
  const pid_t pid = child.pid();

  RankProgramEnd end;
  const std::string program = options.argv.empty() ? options.path : options.argv[0];
  if (child.exec_errno() != 0) {
    end.exec_failed = true;
    end.exec_errno = child.exec_errno();
    base::WriteBestEffort(options.stderr_fd, "ringpilot exec: cannot execute " + options.path +
                                                 ": " + std::strerror(end.exec_errno) + "\n");
    base::WriteBestEffort(log_fd, ClosingLogLine(end, program, base::UnixNowNs()) + "\n");
    return ShellStatus(end);
  }

  if (options.on_start) options.on_start(static_cast<int>(pid));
  const double started_unix = base::UnixNow();
  std::optional<history::ProgramProgress> progress;
  constexpr int64_t kBeatPeriodNs = 1'000'000'000;
  int64_t next_beat_ns = base::MonotonicNs() + kBeatPeriodNs;
  WriteBeat(options, pid, "running", started_unix, progress, std::nullopt);
  const base::LineHandler emit = [&](base::ChildStream stream, const std::string& line) {
    const bool is_stderr = stream == base::ChildStream::kStderr;
    if (const std::optional<ProgramProgress> p = ParseProgressLine(line)) {
      progress = history::ProgramProgress{p->step, p->steps, p->loss, base::UnixNow()};
    }
    base::WriteBestEffort(is_stderr ? options.stderr_fd : options.stdout_fd, line + "\n");
    base::WriteBestEffort(log_fd,
                          base::LogTimeNow() + (is_stderr ? " ERR " : " OUT ") + line + "\n");
    if (is_stderr && line.find_first_not_of(" \t\r") != std::string::npos) {
      end.last_error_line = line;
    }
  };
  bool exited = false;
  base::ProcessStatus status;
  int64_t drain_deadline = 0;
  int64_t died_ns = 0;
  while (true) {
    if (!exited) {
      if (const std::optional<base::ProcessStatus> s = child.TryWait()) {
        status = *s;
        exited = true;
        died_ns = base::UnixNowNs();
        drain_deadline = base::MonotonicNs() + static_cast<int64_t>(options.drain_timeout_s * 1e9);
      }
    }
    if (exited && !child.OutputOpen()) break;
    if (exited && base::MonotonicNs() > drain_deadline) break;
    if (!child.RelayLines(exited ? 20 : 200, {signals.fd()}, emit)) break;
    if (!exited && base::MonotonicNs() >= next_beat_ns) {
      next_beat_ns = base::MonotonicNs() + kBeatPeriodNs;
      WriteBeat(options, pid, "running", started_unix, progress, std::nullopt);
    }
    for (const int sig : signals.Take()) {
      if (sig == SIGCHLD || exited) continue;
      if (IsStopSignal(sig) && end.stop_signal == 0) end.stop_signal = sig;
      child.Signal(sig);
    }
  }
  child.FinishLines(emit);
  if (status.term_signal != 0) {
    end.term_signal = status.term_signal;
  } else {
    end.exit_code = status.exit_code;
  }
  WriteBeat(options, pid, "exited", started_unix, progress, ShellStatus(end));
  const std::string closing = ClosingLogLine(end, program, died_ns);
  base::WriteBestEffort(log_fd, closing + "\n");
  if (const std::optional<FatalLine> fatal = ParseFatalLine(closing)) {
    // The terminal gets the same news without the time stamp.
    base::WriteBestEffort(options.stderr_fd, "ringpilot exec: rank " +
                                                 base::Lookup(options.env, "RANK", "?") + ": " +
                                                 fatal->message + "\n");
  }
  return ShellStatus(end);
}

}  // namespace ringpilot::launcher
