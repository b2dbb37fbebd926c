// process_* series from a fake /proc tree (exact values) and from this process's own.
#include "metrics/process_metrics.h"

#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace ringpilot::metrics {
namespace {

// A /proc with a process whose command name holds spaces and parentheses, as
// /proc/PID/stat quotes it.
void WriteFakeProc(const std::string& root, int open_fds) {
  std::filesystem::create_directories(root + "/self/fd");
  for (int fd = 0; fd < open_fds; ++fd) {
    testing::WriteFile(root + "/self/fd/" + std::to_string(fd), "");
  }
  // Fields 1..24: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss.
  const long ticks = ::sysconf(_SC_CLK_TCK);
  testing::WriteFile(root + "/self/stat",
                     "4242 (ringpilot (rank 0)) S 1 4242 4242 0 -1 4194560 100 0 0 0 " +
                         std::to_string(3 * ticks) + " " + std::to_string(ticks / 2) +
                         " 0 0 20 0 9 0 " + std::to_string(50 * ticks) +
                         " 8589934592 25600 18446744073709551615\n");
  testing::WriteFile(root + "/stat", "cpu  1 2 3\nbtime 1764000000\nprocesses 99\n");
  testing::WriteFile(root + "/self/limits",
                     "Limit                     Soft Limit           Hard Limit           Units\n"
                     "Max open files            1048576              1048576              files\n");
}

TEST(metrics_ProcessMetrics, ReadsStatFdsAndLimits) {
  testing::TempDir dir;
  WriteFakeProc(dir.path(), 7);
  const ProcessReading r = ReadProcess(dir.path());
  EXPECT_DOUBLE_EQ(r.cpu_seconds, 3.5);
  EXPECT_DOUBLE_EQ(r.virtual_memory_bytes, 8589934592.0);
  EXPECT_DOUBLE_EQ(r.resident_memory_bytes, 25600.0 * ::sysconf(_SC_PAGESIZE));
  EXPECT_DOUBLE_EQ(r.start_time_seconds, 1764000050.0);
  EXPECT_DOUBLE_EQ(r.open_fds, 7);
  EXPECT_DOUBLE_EQ(r.max_fds, 1048576);
}

TEST(metrics_ProcessMetrics, SeriesUnderTheClientLibrariesNames) {
  testing::TempDir dir;
  WriteFakeProc(dir.path(), 3);
  Families families({{"rank", "0"}});
  ProcessMetrics process(families, dir.path());
  const std::string text = families.Serialize();
  for (const char* want : {
           "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total{rank=\"0\"} 3.5\n",
           "process_open_fds{rank=\"0\"} 3\n",
           "process_max_fds{rank=\"0\"} 1048576\n",
           "process_start_time_seconds{rank=\"0\"} 1764000050\n",
           "process_virtual_memory_bytes{rank=\"0\"} 8589934592\n",
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "in:\n" << text;
  }
  // CPU time only goes up: an update adds the difference.
  testing::WriteFile(dir.path() + "/self/stat", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 " +
                                                    std::to_string(5 * ::sysconf(_SC_CLK_TCK)) +
                                                    " 0 0 0 20 0 9 0 1 2 3\n");
  process.Update();
  EXPECT_NE(families.Serialize().find("process_cpu_seconds_total{rank=\"0\"} 5\n"),
            std::string::npos);
}

TEST(metrics_ProcessMetrics, ThisProcess) {
  const ProcessReading r = ReadProcess();
  EXPECT_GT(r.resident_memory_bytes, 1e5);
  EXPECT_GE(r.virtual_memory_bytes, r.resident_memory_bytes);
  EXPECT_GT(r.start_time_seconds, 1.7e9);
  EXPECT_GE(r.cpu_seconds, 0);
  EXPECT_GE(r.open_fds, 3);  // stdin, stdout, stderr at least
  EXPECT_GT(r.max_fds, r.open_fds);
}

TEST(metrics_ProcessMetrics, MissingProcLeavesNoValue) {
  const ProcessReading r = ReadProcess("/nonexistent-proc");
  EXPECT_LT(r.cpu_seconds, 0);
  EXPECT_LT(r.open_fds, 0);
  EXPECT_LT(r.max_fds, 0);
}

}  // namespace
}  // namespace ringpilot::metrics
