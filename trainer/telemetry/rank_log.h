// Per-rank log file (RUN_DIR/logs/rank-N.log), optionally echoed to stdout (rank 0's
// progress lines reach the user through mpirun and the front end).
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

namespace ringpilot::trainer::telemetry {

class RankLog {
 public:
  /// Opens `path` for appending (resumed runs keep earlier attempts' lines).
  RankLog(const std::string& path, int rank, bool echo_stdout);
  ~RankLog();
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  void Info(const std::string& line);
  /// To the log and stderr.
  void Warn(const std::string& line);
  /// `FATAL <unix ns> <message>`: the front end finds the first failing rank by it.
  void Fatal(const std::string& line);

 private:
  void Write(const char* level, const std::string& line, FILE* echo);
  std::mutex mu_;
  FILE* file_ = nullptr;
  int rank_;
  bool echo_;
};

}  // namespace ringpilot::trainer::telemetry
