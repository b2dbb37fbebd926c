#include "trainer/telemetry/rank_log.h"

#include <chrono>
#include <ctime>

namespace ringpilot::trainer::telemetry {

RankLog::RankLog(const std::string& path, int rank, bool echo_stdout)
    : rank_(rank), echo_(echo_stdout) {
  file_ = std::fopen(path.c_str(), "a");
  if (!file_)
    std::fprintf(stderr, "ringpilot-trainer: rank %d: cannot open %s\n", rank, path.c_str());
}

RankLog::~RankLog() {
  if (file_) std::fclose(file_);
}

void RankLog::Write(const char* level, const std::string& line, FILE* echo) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  if (file_) {
    std::fprintf(file_, "%s %s %s\n", stamp, level, line.c_str());
    std::fflush(file_);
  }
  if (echo) {
    std::fprintf(echo, "ringpilot: %s%s\n",
                 rank_ == 0 ? "" : ("rank " + std::to_string(rank_) + ": ").c_str(), line.c_str());
    std::fflush(echo);
  }
}

void RankLog::Info(const std::string& line) { Write("INFO", line, echo_ ? stdout : nullptr); }

void RankLog::Warn(const std::string& line) { Write("WARN", line, stderr); }

void RankLog::Fatal(const std::string& line) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::lock_guard<std::mutex> lock(mu_);
  if (file_) {
    std::fprintf(file_, "FATAL %lld %s\n", static_cast<long long>(ns), line.c_str());
    std::fflush(file_);
  }
  std::fprintf(stderr, "ringpilot-trainer: rank %d: %s\n", rank_, line.c_str());
  std::fflush(stderr);
}

}  // namespace ringpilot::trainer::telemetry
