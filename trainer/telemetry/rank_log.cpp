#include "trainer/telemetry/rank_log.h"

#include <cerrno>
#include <cstring>

#include "base/time.h"

namespace ringpilot::trainer::telemetry {

RankLog::RankLog(const std::string& path, int rank, bool echo_stdout, bool echo_detail)
    : path_(path), rank_(rank), echo_(echo_stdout), echo_detail_(echo_stdout && echo_detail) {
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) GiveUpFile("cannot open", errno);
}

RankLog::~RankLog() {
  if (file_) std::fclose(file_);
}

void RankLog::GiveUpFile(const char* what, int error) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  std::fprintf(stderr,
               "%s WARN ringpilot-trainer: rank %d: %s %s: %s; its lines go to stderr from "
               "now on\n",
               base::LogTimeNow().c_str(), rank_, what, path_.c_str(), std::strerror(error));
  std::fflush(stderr);
}

void RankLog::Write(const char* level, const std::string& line, FILE* echo,
                    const std::string& echo_prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string stamp = base::LogTimeNow();
  if (file_) {
    errno = 0;
    // fflush reports what the buffered fprintf could not write (ENOSPC, EIO).
    if (std::fprintf(file_, "%s %s %s\n", stamp.c_str(), level, line.c_str()) < 0 ||
        std::fflush(file_) != 0) {
      GiveUpFile("cannot write", errno != 0 ? errno : EIO);
    }
  }
  if (!file_ && echo == nullptr) {
    // Without its file the line still reaches launcher.log (an echoed one already does).
    std::fprintf(stderr, "%s %s %s%s\n", stamp.c_str(), level, echo_prefix.c_str(), line.c_str());
    std::fflush(stderr);
  }
  if (echo) {
    std::fprintf(echo, "%s%s\n", echo_prefix.c_str(), line.c_str());
    std::fflush(echo);
  }
}

std::string RankLog::Prefix() const {
  return rank_ == 0 ? "ringpilot: " : "ringpilot: rank " + std::to_string(rank_) + ": ";
}

void RankLog::Info(const std::string& line) {
  Write("INFO", line, echo_ ? stdout : nullptr, Prefix());
}

void RankLog::Detail(const std::string& line) {
  Write("INFO", line, echo_detail_ ? stdout : nullptr, Prefix());
}

void RankLog::Warn(const std::string& line) { Write("WARN", line, stderr, Prefix()); }

void RankLog::Fatal(const std::string& line) {
  std::string one_line;
  for (const char ch : line) {
    if (ch == '\n') {
      one_line += "; ";
    } else if (ch != '\r') {
      one_line += ch;
    }
  }
  Write("FATAL", one_line, stderr, "ringpilot-trainer: rank " + std::to_string(rank_) + ": ");
}

}  // namespace ringpilot::trainer::telemetry
