#include "launcher/failure_report.h"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <regex>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/time.h"
#include "history/nccl_record.h"
#include "history/program_beat.h"
#include "history/rank_files.h"
#include "history/record_fields.h"
#include "history/trainer_beat.h"

namespace ringpilot::launcher {
namespace {

// FATAL lines sit at the end of a log, but tails are read from at most this many final
// bytes so that a huge log does not cost a full read.
constexpr std::streamoff kTailReadBytes = 256 * 1024;
// mpirun lines and rank lines kept in the printed summary.
constexpr int kSummaryLines = 5;

// rank-N.log files of `logs_dir` by rank; none in an unreadable logs dir (the report then
// says what mpirun said).
std::map<int, std::string> RankLogs(const std::string& logs_dir) {
  return history::RankFiles(logs_dir, history::kRankLogSuffix);
}

}  // namespace

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::optional<FatalLine> ParseFatalLine(const std::string& line) {
  if (const std::optional<int64_t> ns = base::ParseLogTimeNs(line)) {
    // TIME FATAL message
    static const std::string kLevel = " FATAL";
    const std::size_t at = base::kLogTimeLength;
    if (line.compare(at, kLevel.size(), kLevel) != 0) return std::nullopt;
    const std::size_t end = at + kLevel.size();
    if (end < line.size() && line[end] != ' ') return std::nullopt;
    FatalLine fatal;
    fatal.time_ns = *ns;
    if (end < line.size()) fatal.message = line.substr(end + 1);
    while (!fatal.message.empty() &&
           (fatal.message.back() == '\r' || fatal.message.back() == '\n')) {
      fatal.message.pop_back();
    }
    return fatal;
  }
  // `FATAL <unix ns> message`: rank logs written before the one time format.
  if (line.rfind("FATAL ", 0) != 0) return std::nullopt;
  std::size_t pos = 6;
  const std::size_t digits_start = pos;
  while (pos < line.size() && std::isdigit(static_cast<unsigned char>(line[pos]))) ++pos;
  const std::size_t digits = pos - digits_start;
  // Unix time in ns has 19 digits until 2286; more than int64 holds is not a time.
  if (digits == 0 || digits > 19 || (pos < line.size() && line[pos] != ' ')) {
    return std::nullopt;
  }
  FatalLine fatal;
  try {
    fatal.time_ns = std::stoll(line.substr(digits_start, digits));
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
  if (pos < line.size()) fatal.message = line.substr(pos + 1);
  while (!fatal.message.empty() && (fatal.message.back() == '\r' || fatal.message.back() == '\n')) {
    fatal.message.pop_back();
  }
  return fatal;
}

std::map<int, FatalLine> FindFatals(const std::string& logs_dir, int64_t since_ns) {
  std::map<int, FatalLine> fatals;
  for (const auto& [rank, path] : RankLogs(logs_dir)) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::optional<FatalLine> fatal = ParseFatalLine(line);
      if (!fatal || fatal->time_ns < since_ns) continue;
      fatal->rank = rank;
      fatals.emplace(rank, std::move(*fatal));  // a rank's first one stays
    }
  }
  return fatals;
}

std::optional<FatalLine> FindFirstFatal(const std::string& logs_dir, int64_t since_ns) {
  std::optional<FatalLine> first;
  // Ties go to the lower rank (map order), which keeps the answer deterministic.
  for (auto& [rank, fatal] : FindFatals(logs_dir, since_ns)) {
    if (!first || fatal.time_ns < first->time_ns) first = fatal;
  }
  return first;
}

int RankFromMpirunOutput(const std::vector<std::string>& lines) {
  static const std::regex kProcessName(R"(Process name:\s*\[\[\d+,\d+\],(\d{1,9})\])");
  static const std::regex kRankPhrase(R"(\brank (\d{1,9})\b)");
  for (const std::regex* re : {&kProcessName, &kRankPhrase}) {
    for (const std::string& line : lines) {
      std::smatch m;
      if (std::regex_search(line, m, *re)) return std::stoi(m[1].str());
    }
  }
  return -1;
}

std::vector<std::string> TailLines(const std::string& path, int n) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || n <= 0) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - kTailReadBytes);
  in.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  // A read that started mid-file begins with a partial line.
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());
  if (lines.size() > static_cast<std::size_t>(n)) {
    lines.erase(lines.begin(), lines.end() - n);
  }
  return lines;
}

std::map<int, std::vector<std::string>> RankLogTails(const std::string& logs_dir, int n) {
  std::map<int, std::vector<std::string>> tails;
  for (const auto& [rank, path] : RankLogs(logs_dir)) tails[rank] = TailLines(path, n);
  return tails;
}

std::map<int, RankHeartbeat> ReadHeartbeats(const std::string& logs_dir, double since_unix) {
  std::map<int, RankHeartbeat> beats;
  for (auto& [rank, trainer_beat] : history::ReadTrainerBeats(logs_dir, since_unix)) {
    RankHeartbeat b;
    static_cast<history::TrainerBeat&>(b) = std::move(trainer_beat);
    beats.emplace(rank, std::move(b));
  }
  return beats;
}

std::map<int, RankHeartbeat> ReadProgramBeats(const std::string& logs_dir, double since_unix) {
  std::map<int, RankHeartbeat> beats;
  for (const auto& [rank, p] : history::ReadProgramBeats(logs_dir, since_unix)) {
    RankHeartbeat b;
    b.rank = rank;
    b.unix = p.unix;
    b.phase = p.state.empty() ? "running" : p.state;
    if (p.progress) {
      b.progress = true;
      b.step = p.progress->step;
      b.steps = p.progress->steps;
      b.loss = p.progress->loss;
    }
    beats.emplace(rank, b);
  }
  return beats;
}

std::map<int, RankHeartbeat> ReadNcclHeartbeats(const std::string& logs_dir, double since_unix) {
  std::map<int, RankHeartbeat> beats;
  for (const auto& [rank, path] : history::RankFiles(logs_dir, history::kNcclRecordSuffix)) {
    history::NcclRecord record;
    try {
      record = history::ReadNcclRecord(path, rank);
    } catch (const history::RecordError&) {
      continue;  // unreadable, half written or foreign: no beat
    }
    RankHeartbeat b;
    b.rank = rank;
    b.phase = "nccl";
    b.unix = record.written_unix;
    // The largest communicator (the world's, normally) is the one every rank shares.
    const history::NcclCommRecord* best = nullptr;
    for (const history::NcclCommRecord& c : record.communicators) {
      if (best == nullptr || c.comm_size > best->comm_size) best = &c;
    }
    if (best != nullptr) {
      b.comm = best->comm;
      b.collectives_started = best->collectives_started;
      b.collectives_completed = best->collectives_completed;
      for (const auto* stuck : {&best->oldest_in_flight, &best->abandoned_oldest}) {
        if (!*stuck) continue;
        b.stuck_op = (*stuck)->op;
        b.stuck_seq = (*stuck)->seq;
        b.stuck_seconds = (*stuck)->age_seconds;
        break;
      }
    }
    if (b.unix >= since_unix) beats.emplace(b.rank, b);
  }
  return beats;
}

std::string NcclHangReason(const std::string& logs_dir, double since_unix, double timeout_s,
                           double now_unix) {
  std::string reason;
  double longest = timeout_s;
  for (const auto& [rank, beat] : ReadNcclHeartbeats(logs_dir, since_unix)) {
    if (beat.stuck_op.empty()) continue;
    // In flight since the file's time minus its age then; still in it now (a stuck
    // rank's file is rewritten while its process lives, but it may be a few seconds old).
    const double waited = now_unix - (beat.unix - beat.stuck_seconds);
    if (waited > longest) {
      longest = waited;
      char text[256];
      std::snprintf(text, sizeof text, "rank %d has waited %.0f s in %s #%llu (comm.timeout_s %g)",
                    rank, waited, beat.stuck_op.c_str(),
                    static_cast<unsigned long long>(beat.stuck_seq), timeout_s);
      reason = text;
    }
  }
  return reason;
}

std::string SilentRankReason(const std::string& logs_dir, double since_unix, double timeout_s,
                             double now_unix) {
  std::string reason;
  // Past comm.timeout_s by a margin: when peers wait for the stopped rank in a collective,
  // their own timeout fires first and names the collective in a better report.
  double longest = timeout_s + kSilentRankGraceSeconds;
  for (const auto& [rank, beat] : ReadHeartbeats(logs_dir, since_unix)) {
    if (beat.phase == "done" || beat.phase == "abort") continue;
    const double silent = now_unix - beat.unix;
    if (silent > longest) {
      longest = silent;
      char text[192];
      std::snprintf(text, sizeof text,
                    "rank %d wrote no heartbeat for %.0f s (comm.timeout_s %g): stopped or frozen",
                    rank, silent, timeout_s);
      reason = text;
    }
  }
  return reason;
}

int RankBehind(const std::map<int, RankHeartbeat>& heartbeats) {
  if (heartbeats.size() < 2) return -1;
  // Fewer collectives done, then fewer begun (the others wait in one it never reached),
  // then fewer steps, then silence (a stopped rank's heartbeat thread stops too).
  const auto behind = [](const RankHeartbeat& a, const RankHeartbeat& b) {
    const bool a_silent = a.max_silence_s > kStoppedSilenceSeconds;
    const bool b_silent = b.max_silence_s > kStoppedSilenceSeconds;
    if (a_silent != b_silent) return a_silent;
    if (a_silent && a.max_silence_s != b.max_silence_s) return a.max_silence_s > b.max_silence_s;
    if (a.collectives_completed != b.collectives_completed) {
      return a.collectives_completed < b.collectives_completed;
    }
    if (a.collectives_started != b.collectives_started) {
      return a.collectives_started < b.collectives_started;
    }
    if (a.step != b.step) return a.step < b.step;
    // Beats a moment apart say nothing (each rank writes once a second, the one that gave
    // up once more); a rank whose beats stopped well before the others' is behind.
    return a.unix + kStoppedSilenceSeconds < b.unix;
  };
  const RankHeartbeat* last = nullptr;
  for (const auto& [rank, beat] : heartbeats) {
    if (!last || behind(beat, *last)) last = &beat;
  }
  // Everyone level: nobody is behind.
  for (const auto& [rank, beat] : heartbeats) {
    if (rank != last->rank && behind(*last, beat)) return last->rank;
  }
  return -1;
}

FailureReport AnalyzeFailure(const std::string& logs_dir, int64_t attempt_start_ns,
                             const std::vector<std::string>& mpirun_output, int attempts,
                             int exit_code, int term_signal) {
  FailureReport report;
  report.attempts = attempts;
  report.exit_code = exit_code;
  report.term_signal = term_signal;
  const std::map<int, FatalLine> fatals = FindFatals(logs_dir, attempt_start_ns);
  for (const auto& [rank, fatal] : fatals) {
    if (!report.fatal || fatal.time_ns < report.fatal->time_ns) report.fatal = fatal;
  }
  if (report.fatal) {
    report.first_failing_rank = report.fatal->rank;
    report.rank_source = "fatal_line";
  } else {
    report.first_failing_rank = RankFromMpirunOutput(mpirun_output);
    report.rank_source = report.first_failing_rank >= 0 ? "mpirun_output" : "unknown";
  }
  report.last_lines = RankLogTails(logs_dir, kFailureTailLines);
  const double since = static_cast<double>(attempt_start_ns) * 1e-9;
  report.heartbeats = ReadHeartbeats(logs_dir, since);
  bool stuck = false;
  if (report.heartbeats.empty()) {
    report.heartbeats = ReadNcclHeartbeats(logs_dir, since);
    for (const auto& [rank, beat] : report.heartbeats) stuck = stuck || !beat.stuck_op.empty();
  }
  // A rank that gave up waiting (its collective timed out) is not the one to blame: the
  // heartbeats say which rank the others waited for.
  if (stuck ||
      (report.fatal && report.fatal->message.find("comm.timeout_s") != std::string::npos)) {
    report.rank_behind = RankBehind(report.heartbeats);
    for (const auto& [rank, fatal] : fatals) {
      if (fatal.message.find("comm.timeout_s") != std::string::npos) {
        report.timed_out_ranks.push_back(rank);
      }
    }
    // Every rank gave up waiting in a collective, none fell silent and all beat until the
    // end: no rank stopped, the messages between them were lost. One may have started a
    // collective or two more than another (a cut lands mid-step), which alone would make
    // the other look behind; but a rank truly behind does not time out waiting itself.
    bool all_waited = report.timed_out_ranks.size() >= 2 &&
                      report.timed_out_ranks.size() == report.heartbeats.size();
    double newest = 0;
    for (const auto& [rank, beat] : report.heartbeats) newest = std::max(newest, beat.unix);
    for (const auto& [rank, beat] : report.heartbeats) {
      const bool timed_out = std::find(report.timed_out_ranks.begin(), report.timed_out_ranks.end(),
                                       rank) != report.timed_out_ranks.end();
      if (!timed_out || beat.max_silence_s > kStoppedSilenceSeconds ||
          beat.unix + kStoppedSilenceSeconds < newest) {
        all_waited = false;
      }
    }
    if (all_waited) report.rank_behind = -1;
    report.lost_contact = report.rank_behind < 0 && report.timed_out_ranks.size() >= 2;
  }
  const std::size_t keep = std::min<std::size_t>(mpirun_output.size(), kFailureTailLines);
  report.mpirun_last_lines.assign(mpirun_output.end() - static_cast<std::ptrdiff_t>(keep),
                                  mpirun_output.end());
  return report;
}

std::string FailureJson(const FailureReport& report) {
  using nlohmann::json;
  json j;
  j["attempts"] = report.attempts;
  if (report.term_signal != 0) {
    j["signal"] = report.term_signal;
    j["signal_name"] = SignalName(report.term_signal);
  } else {
    j["exit_code"] = report.exit_code;
  }
  j["first_failing_rank"] = report.first_failing_rank;
  j["first_failing_rank_source"] = report.rank_source;
  if (report.fatal) {
    j["fatal_message"] = report.fatal->message;
    j["fatal_time_ns"] = report.fatal->time_ns;
    j["fatal_time"] = base::FormatLogTime(static_cast<double>(report.fatal->time_ns) / 1e9);
  }
  if (!report.hang.empty()) j["hang"] = report.hang;
  if (report.rank_behind >= 0) j["rank_behind"] = report.rank_behind;
  if (!report.timed_out_ranks.empty()) j["timed_out_ranks"] = report.timed_out_ranks;
  if (report.lost_contact) j["lost_contact"] = true;
  if (!report.mpirun_stopped_because.empty()) {
    j["mpirun_stopped_because"] = report.mpirun_stopped_because;
  }
  json ranks = json::object();
  for (const auto& [rank, b] : report.heartbeats) {
    json beat = {{"step", b.step},
                 {"phase", b.phase},
                 {"unix", b.unix},
                 {"max_silence_s", b.max_silence_s},
                 {"collectives_started", b.collectives_started},
                 {"collectives_completed", b.collectives_completed}};
    if (!b.comm.empty()) beat["comm"] = b.comm;
    if (!b.stuck_op.empty()) {
      beat["in_collective"] = {
          {"op", b.stuck_op}, {"seq", b.stuck_seq}, {"seconds", b.stuck_seconds}};
    }
    ranks[std::to_string(rank)] = beat;
  }
  j["ranks"] = ranks;
  json tails = json::object();
  for (const auto& [rank, lines] : report.last_lines) tails[std::to_string(rank)] = lines;
  j["last_lines"] = tails;
  j["mpirun_last_lines"] = report.mpirun_last_lines;
  // Replace, not throw, on invalid UTF-8: a log line may hold any bytes.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::vector<std::string> FailureSummary(const FailureReport& report,
                                        const std::string& failure_json_path, bool final) {
  std::vector<std::string> out;
  const std::string how = !report.hang.empty() ? "hung: " + report.hang
                          : report.term_signal != 0
                              ? "mpirun killed by " + SignalName(report.term_signal)
                              : "exit " + std::to_string(report.exit_code);
  out.push_back(final ? "ringpilot: job failed for good after " + std::to_string(report.attempts) +
                            " attempt(s) (" + how + ")"
                      : "ringpilot: attempt " + std::to_string(report.attempts) + " failed (" +
                            how + ")");
  std::vector<std::string> shown;
  std::string shown_from;
  if (report.first_failing_rank >= 0) {
    std::string line =
        "ringpilot: first failing rank: " + std::to_string(report.first_failing_rank);
    if (report.fatal) {
      line += ": " + report.fatal->message;
    } else if (report.rank_source == "hang") {
      line += report.heartbeats.size() > 1 ? " (the rank the others waited for: the job hung)"
                                           : " (it stopped beating: the job hung)";
    } else {
      line += " (named by mpirun; it wrote no FATAL line)";
    }
    out.push_back(line);
    const auto it = report.last_lines.find(report.first_failing_rank);
    if (it != report.last_lines.end()) {
      shown = it->second;
      shown_from = "logs/rank-" + std::to_string(report.first_failing_rank) + ".log";
    }
  } else {
    out.push_back(
        "ringpilot: first failing rank: unknown (no FATAL line in logs/rank-*.log, "
        "none named by mpirun)");
    shown = report.mpirun_last_lines;
    shown_from = "mpirun";
  }
  if (report.rank_behind >= 0) {
    const RankHeartbeat& b = report.heartbeats.at(report.rank_behind);
    double newest = b.unix;
    uint64_t most = b.collectives_completed;
    for (const auto& [rank, other] : report.heartbeats) {
      newest = std::max(newest, other.unix);
      most = std::max(most, other.collectives_completed);
    }
    char line[384];
    if (report.heartbeats.size() == 1) {
      std::snprintf(line, sizeof line,
                    "ringpilot: rank behind: %d (the only rank): last heard in %s at step %lld, "
                    "%llu collectives done",
                    report.rank_behind, b.phase.c_str(), static_cast<long long>(b.step + 1),
                    static_cast<unsigned long long>(b.collectives_completed));
    } else if (b.comm.empty() && b.max_silence_s > kStoppedSilenceSeconds) {
      // A stopped rank that was revived (SIGCONT) beats again, so its last beat is as recent
      // as the others': its longest silence is what tells.
      std::snprintf(line, sizeof line,
                    "ringpilot: rank behind: %d (the others waited for it): silent for %.1f s "
                    "(its longest gap between heartbeats), last heard in %s at step %lld, %llu "
                    "of %llu collectives done",
                    report.rank_behind, b.max_silence_s, b.phase.c_str(),
                    static_cast<long long>(b.step + 1),
                    static_cast<unsigned long long>(b.collectives_completed),
                    static_cast<unsigned long long>(most));
    } else if (b.comm.empty()) {
      std::snprintf(line, sizeof line,
                    "ringpilot: rank behind: %d (the others waited for it): last heard %.1f s "
                    "before the others, in %s at step %lld, %llu of %llu collectives done",
                    report.rank_behind, newest - b.unix, b.phase.c_str(),
                    static_cast<long long>(b.step + 1),
                    static_cast<unsigned long long>(b.collectives_completed),
                    static_cast<unsigned long long>(most));
    } else {
      // A program's NCCL view: who waited in which collective for it.
      std::string waiting;
      for (const auto& [rank, other] : report.heartbeats) {
        if (rank == report.rank_behind || other.stuck_op.empty()) continue;
        if (waiting.empty()) {
          waiting = "; rank " + std::to_string(rank) + " waited in " + other.stuck_op + " #" +
                    std::to_string(other.stuck_seq);
        }
      }
      std::snprintf(line, sizeof line,
                    "ringpilot: rank behind: %d (the others waited for it): %llu of %llu "
                    "collectives done on communicator %s%s",
                    report.rank_behind, static_cast<unsigned long long>(b.collectives_completed),
                    static_cast<unsigned long long>(most), b.comm.c_str(), waiting.c_str());
    }
    out.push_back(line);
  }
  if (report.lost_contact) {
    std::string ranks;
    for (const int r : report.timed_out_ranks)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    out.push_back("ringpilot: ranks " + ranks +
                  " all timed out waiting for each other while every rank kept beating: "
                  "they lost contact (the network between their hosts?)");
  }
  if (!report.mpirun_stopped_because.empty()) {
    out.push_back("ringpilot: " + report.mpirun_stopped_because + "; ringpilot stopped it");
  }
  if (shown.size() > static_cast<std::size_t>(kSummaryLines)) {
    shown.erase(shown.begin(), shown.end() - kSummaryLines);
  }
  if (!shown.empty()) {
    out.push_back("ringpilot: last lines of " + shown_from + ":");
    for (const std::string& l : shown) out.push_back("ringpilot:   " + l);
  }
  out.push_back("ringpilot: details in " + failure_json_path);
  return out;
}

}  // namespace ringpilot::launcher
