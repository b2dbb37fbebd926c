// Root cause of a job that failed for good: which rank failed first, how, and its last
// log lines -- written as RUN_DIR/failure.json and summarised in a few printed lines.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "history/trainer_beat.h"

namespace ringpilot::launcher {

/// Lines of each rank log kept in failure.json.
inline constexpr int kFailureTailLines = 10;

/// A trainer's last word before it exits on error, one line in logs/rank-N.log:
/// `TIME FATAL <message>`, TIME as every log line's (base::FormatLogTime, milliseconds).
struct FatalLine {
  int rank = -1;
  int64_t time_ns = 0;
  std::string message;
};

/// Parses one log line; nullopt unless it is `TIME FATAL message` (TIME exactly as
/// base::FormatLogTime writes it), or, as rank logs of earlier versions wrote it,
/// `FATAL <unix ns> message`. `rank` is left at -1.
std::optional<FatalLine> ParseFatalLine(const std::string& line);

/// The earliest FATAL line at or after `since_ns` over every `rank-N.log` in `logs_dir`;
/// lines before `since_ns` belong to an earlier attempt and are ignored.
std::optional<FatalLine> FindFirstFatal(const std::string& logs_dir, int64_t since_ns);

/// Each rank's first FATAL line at or after `since_ns`, by rank (ranks without one absent).
std::map<int, FatalLine> FindFatals(const std::string& logs_dir, int64_t since_ns);

/// The failing rank named in mpirun's own output: OpenMPI's "Process name: [[J,S],R]"
/// first, else the first "rank R" phrase (e.g. "MPI_ABORT was invoked on rank R",
/// "process rank R ... exited on signal"); -1 when neither occurs.
int RankFromMpirunOutput(const std::vector<std::string>& lines);

/// The last `n` lines of a text file (fewer when it is shorter; empty when unreadable).
std::vector<std::string> TailLines(const std::string& path, int n);

/// Last lines of every rank-N.log in `logs_dir`, by rank.
std::map<int, std::vector<std::string>> RankLogTails(const std::string& logs_dir, int n);

/// A rank's last heartbeat: where it was when the job failed. A trainer rank's is its
/// RUN_DIR/logs/rank-N.heartbeat (history/trainer_beat.h, written once a second); a
/// launch.command rank's fills the same fields from the files below, and these.
struct RankHeartbeat : history::TrainerBeat {
  /// A launch.command rank's beat comes from its NCCL profiler file (ReadNcclHeartbeats):
  /// its largest communicator, and the collective it was in, if any.
  std::string comm = {};      ///< communicator hash; "" for the trainer's heartbeat
  std::string stuck_op = {};  ///< "" when no collective was in flight
  uint64_t stuck_seq = 0;     ///< that collective's sequence number
  double stuck_seconds = 0;   ///< how long it had been in flight when the file was written
  /// A launch.command rank's beat written by `ringpilot exec` (ReadProgramBeats): true when
  /// the program reported progress (a progress line, docs/programs.md); `step` is then the
  /// steps done that it reported, `steps` its target (0 when it gave none), `loss` its loss.
  bool progress = false;
};

/// Every rank's heartbeat in `logs_dir` written at or after `since_unix` (older ones are
/// an earlier attempt's), by rank. Unreadable or malformed files are left out.
std::map<int, RankHeartbeat> ReadHeartbeats(const std::string& logs_dir, double since_unix);

/// The heartbeat of each rank of a launch.command job: its logs/rank-N.nccl.json
/// (history/nccl_record.h: the NCCL profiler plugin rewrites it every few seconds while the
/// process lives) written at or
/// after `since_unix`: the collective sequence numbers of its largest communicator, `unix`
/// = when the file was written, and the collective in flight there (or, after an abort,
/// the one it was stuck in). Unreadable or malformed files are left out.
std::map<int, RankHeartbeat> ReadNcclHeartbeats(const std::string& logs_dir, double since_unix);

/// Every launch.command rank's beat (logs/rank-N.program.json, history/program_beat.h: the
/// launcher's view of the process, where the program sends no heartbeat) written at or after
/// `since_unix`, by rank: `unix` when it was written, `phase` "running" or "exited",
/// `progress` (and `step`, `steps`, `loss`) when the program printed a progress line.
/// Unreadable or malformed files are left out.
std::map<int, RankHeartbeat> ReadProgramBeats(const std::string& logs_dir, double since_unix);

/// The rank the others waited for, from heartbeats: one that fell silent (max_silence_s
/// above kStoppedSilenceSeconds: stopped, then revived by mpirun's SIGCONT), the longest
/// silence first; else the fewest collectives completed, then begun, then the fewest steps,
/// then a beat older than the others' by over kStoppedSilenceSeconds (a host gone quiet);
/// -1 with fewer than two heartbeats or when no rank is behind another.
inline constexpr double kStoppedSilenceSeconds = 3.0;
int RankBehind(const std::map<int, RankHeartbeat>& heartbeats);

/// How a job ended for good.
struct FailureReport {
  int attempts = 0;
  int exit_code = -1;   ///< mpirun's exit status; -1 when it was killed by a signal
  int term_signal = 0;  ///< signal that killed mpirun; 0 when it exited
  int first_failing_rank = -1;
  std::string rank_source;  ///< "fatal_line", "mpirun_output" or "unknown"
  std::optional<FatalLine> fatal;
  std::map<int, std::vector<std::string>> last_lines;  ///< rank -> last log lines
  std::vector<std::string> mpirun_last_lines;
  std::map<int, RankHeartbeat> heartbeats;  ///< what every rank was doing
  /// After a hang (a FATAL line naming comm.timeout_s; for a launch.command job, a
  /// collective still in flight on some rank): the rank behind, else -1.
  int rank_behind = -1;
  /// Ranks whose FATAL line says a collective timed out (comm.timeout_s), in rank order.
  std::vector<int> timed_out_ranks;
  /// Several ranks timed out waiting for each other and none was behind (every one kept
  /// beating and had started and completed as many collectives): they lost contact, which
  /// points at the network between their hosts rather than at a rank.
  bool lost_contact = false;
  /// Set by the Supervisor when it stopped mpirun itself (launch's abort grace ran out).
  std::string mpirun_stopped_because;
  /// The supervisor stopped the attempt as hung (SupervisorOptions::hang_check): why.
  std::string hang;
};

/// SupervisorOptions::hang_check for a launch.command job: from ReadNcclHeartbeats (beats
/// since `since_unix`), the rank that has waited longest in one collective, when that is
/// more than `timeout_s` by `now_unix`: "rank R has waited S s in OP #SEQ (comm.timeout_s
/// T)"; else "".
std::string NcclHangReason(const std::string& logs_dir, double since_unix, double timeout_s,
                           double now_unix);

/// SupervisorOptions::hang_check for a trainer job. Each rank's heartbeat thread writes its
/// beat once a second whatever the rank is doing (a long step, a checkpoint, a wait in a
/// collective), so a beat older than `timeout_s` (comm.timeout_s) + kSilentRankGraceSeconds
/// by `now_unix` means the
/// process is stopped (SIGSTOP, a debugger) or frozen. That is the one hang no collective
/// timeout reports when the rank is alone (a job of one rank) or stopped before its peers
/// reach a collective. Returns "rank R wrote no heartbeat for S s (comm.timeout_s T):
/// stopped or frozen" for the longest-silent such rank, else "". Only beats since
/// `since_unix` count (earlier ones are an earlier attempt's); ranks that finished or gave up
/// (phase "done" / "abort") are left out; the launcher's clock is compared with each host's,
/// so `timeout_s` should exceed the clock skew between hosts.
inline constexpr double kSilentRankGraceSeconds = 5.0;
std::string SilentRankReason(const std::string& logs_dir, double since_unix, double timeout_s,
                             double now_unix);

/// Finds the first failing rank (FATAL lines since `attempt_start_ns`, else mpirun's
/// output, else -1), collects the log tails and heartbeats (the trainer's, else the NCCL
/// profiler's), and after a hang names the rank behind.
FailureReport AnalyzeFailure(const std::string& logs_dir, int64_t attempt_start_ns,
                             const std::vector<std::string>& mpirun_output, int attempts,
                             int exit_code, int term_signal);

/// failure.json: {attempts, exit_code | signal + signal_name, first_failing_rank,
/// first_failing_rank_source, fatal_message, fatal_time_ns and fatal_time (the same time as
/// base::FormatLogTime), hang (when the supervisor stopped it), rank_behind (after a hang),
/// timed_out_ranks and lost_contact (after a hang), mpirun_stopped_because (when set),
/// ranks: {"R": heartbeat}, last_lines: {"R": [...]}, mpirun_last_lines}.
std::string FailureJson(const FailureReport& report);

/// A few `ringpilot: ...` lines for the terminal; `failure_json_path` is where the
/// details are; `final`: the job failed for good (else this attempt failed and the job
/// restarts).
std::vector<std::string> FailureSummary(const FailureReport& report,
                                        const std::string& failure_json_path, bool final = true);

/// "SIGKILL" for 9 etc.; "signal N" when unnamed.
std::string SignalName(int sig);

}  // namespace ringpilot::launcher
