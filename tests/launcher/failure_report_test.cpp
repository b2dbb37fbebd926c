#include <algorithm>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/failure_report.h"
#include "tests/test_util.h"

namespace ringpilot::launcher {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(FailureReport, ParseFatalLine) {
  // Every log line's time format: ISO 8601, UTC, milliseconds.
  const auto iso = ParseFatalLine("2023-11-14T22:13:20.123Z FATAL allreduce timed out after 300 s");
  ASSERT_TRUE(iso.has_value());
  EXPECT_EQ(iso->time_ns, 1700000000123000000);
  EXPECT_EQ(iso->message, "allreduce timed out after 300 s");
  EXPECT_EQ(iso->rank, -1);
  EXPECT_TRUE(ParseFatalLine("2023-11-14T22:13:20.123Z FATAL").has_value());
  EXPECT_FALSE(ParseFatalLine("2023-11-14T22:13:20.123Z INFO step 1").has_value());
  EXPECT_FALSE(ParseFatalLine("2023-11-14T22:13:20.123Z FATALITY x").has_value());
  EXPECT_FALSE(ParseFatalLine("2023-11-14T22:13:20Z FATAL no milliseconds").has_value());
  EXPECT_FALSE(ParseFatalLine("2023-13-14T22:13:20.123Z FATAL month 13").has_value());
  // Rank logs of earlier versions: `FATAL <unix ns> message`.
  const auto f = ParseFatalLine("FATAL 1700000000123456789 allreduce timed out after 300 s");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->time_ns, 1700000000123456789);
  EXPECT_EQ(f->message, "allreduce timed out after 300 s");
  EXPECT_EQ(f->rank, -1);
  EXPECT_TRUE(ParseFatalLine("FATAL 12").has_value());
  EXPECT_FALSE(ParseFatalLine("FATAL x message").has_value());
  EXPECT_FALSE(ParseFatalLine("FATAL12 message").has_value());
  EXPECT_FALSE(ParseFatalLine("INFO 12 FATAL 13 x").has_value());
  EXPECT_FALSE(ParseFatalLine(" FATAL 12 x").has_value());
  EXPECT_FALSE(ParseFatalLine("FATAL 12x y").has_value());
  EXPECT_FALSE(ParseFatalLine("FATAL 9999999999999999999 overflow").has_value());
}

TEST(FailureReport, FirstFatalIsEarliestSinceAttemptStart) {
  TempDir tmp;
  WriteFile(tmp.path() + "/rank-0.log", "step 1\nFATAL 500 old failure of an earlier attempt\n");
  WriteFile(tmp.path() + "/rank-1.log", "step 1\nFATAL 2000 nccl abort\nafter\n");
  WriteFile(tmp.path() + "/rank-12.log", "FATAL 1500 data file broken\n");
  // ISO lines and old ones compare by time (1970-01-01T00:00:00.000Z is 0 ns).
  WriteFile(tmp.path() + "/rank-13.log", "1970-01-01T00:00:00.000Z FATAL at the epoch\n");
  WriteFile(tmp.path() + "/launcher.log", "FATAL 1 not a rank log\n");
  auto first = FindFirstFatal(tmp.path(), 1000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 12);
  EXPECT_EQ(first->message, "data file broken");
  first = FindFirstFatal(tmp.path(), 1);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 0);
  first = FindFirstFatal(tmp.path(), 0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 13);
  EXPECT_EQ(first->message, "at the epoch");
  EXPECT_FALSE(FindFirstFatal(tmp.path(), 3000).has_value());
  EXPECT_FALSE(FindFirstFatal(tmp.path() + "/missing", 0).has_value());
}

TEST(FailureReport, RankFromMpirunOutput) {
  const std::vector<std::string> openmpi = {
      "mpirun detected that one or more processes exited with non-zero status, thus causing",
      "the job to be terminated. The first process to do so was:", "",
      "  Process name: [[41245,1],3]", "  Exit code:    3"};
  EXPECT_EQ(RankFromMpirunOutput(openmpi), 3);
  EXPECT_EQ(
      RankFromMpirunOutput({"MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD"}), 5);
  EXPECT_EQ(RankFromMpirunOutput({"mpirun noticed that process rank 2 with PID 0 on node h "
                                  "exited on signal 9 (Killed)."}),
            2);
  // "Process name" wins over an earlier "rank" phrase.
  EXPECT_EQ(RankFromMpirunOutput({"rank 0 says hello", "Process name: [[1,0],7]"}), 7);
  EXPECT_EQ(RankFromMpirunOutput({"nothing here", "ranked 3"}), -1);
}

TEST(FailureReport, TailLines) {
  TempDir tmp;
  std::string text;
  for (int i = 0; i < 30; ++i) text += "line " + std::to_string(i) + "\n";
  WriteFile(tmp.path() + "/f", text);
  const auto tail = TailLines(tmp.path() + "/f", 3);
  EXPECT_EQ(tail, (std::vector<std::string>{"line 27", "line 28", "line 29"}));
  WriteFile(tmp.path() + "/g", "a\nno newline");
  EXPECT_EQ(TailLines(tmp.path() + "/g", 10), (std::vector<std::string>{"a", "no newline"}));
  EXPECT_TRUE(TailLines(tmp.path() + "/missing", 3).empty());
}

TEST(FailureReport, JsonAndSummary) {
  TempDir tmp;
  WriteFile(tmp.path() + "/rank-0.log", "ok\n");
  WriteFile(tmp.path() + "/rank-1.log", "loss 2.0\nFATAL 100 injected crash\n");
  const FailureReport r = AnalyzeFailure(tmp.path(), 0, {"mpirun says bye"}, 3, 3, 0);
  EXPECT_EQ(r.first_failing_rank, 1);
  EXPECT_EQ(r.rank_source, "fatal_line");
  const auto j = nlohmann::json::parse(FailureJson(r));
  EXPECT_EQ(j["attempts"], 3);
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_FALSE(j.contains("signal"));
  EXPECT_EQ(j["first_failing_rank"], 1);
  EXPECT_EQ(j["fatal_message"], "injected crash");
  EXPECT_EQ(j["last_lines"]["1"],
            (std::vector<std::string>{"loss 2.0", "FATAL 100 injected crash"}));
  EXPECT_EQ(j["last_lines"]["0"], std::vector<std::string>{"ok"});
  EXPECT_EQ(j["mpirun_last_lines"], std::vector<std::string>{"mpirun says bye"});
  const auto summary = FailureSummary(r, "/r/failure.json");
  ASSERT_GE(summary.size(), 3u);
  EXPECT_EQ(summary[0], "ringpilot: job failed for good after 3 attempt(s) (exit 3)");
  EXPECT_EQ(summary[1], "ringpilot: first failing rank: 1: injected crash");
  EXPECT_EQ(summary.back(), "ringpilot: details in /r/failure.json");
}

TEST(FailureReport, SignalAndUnknownRank) {
  TempDir tmp;
  const FailureReport r = AnalyzeFailure(tmp.path(), 0, {"\xff bad utf8"}, 1, -1, SIGKILL);
  EXPECT_EQ(r.first_failing_rank, -1);
  EXPECT_EQ(r.rank_source, "unknown");
  const auto j = nlohmann::json::parse(FailureJson(r));
  EXPECT_EQ(j["signal"], SIGKILL);
  EXPECT_EQ(j["signal_name"], "SIGKILL");
  EXPECT_FALSE(j.contains("exit_code"));
  EXPECT_EQ(FailureSummary(r, "f")[0],
            "ringpilot: job failed for good after 1 attempt(s) (mpirun killed by SIGKILL)");
}

TEST(FailureReport, HangNamesTheRankBehindFromHeartbeats) {
  TempDir tmp;
  // Ranks 0 and 2 waited in all-reduce #41 until comm.timeout_s; rank 1 stopped at step 13
  // after 38 collectives (its beat is older). Rank 3's beat is an earlier attempt's.
  WriteFile(tmp.path() + "/rank-0.log",
            "FATAL 2000000000000 allreduce #41 not complete after 15.0 s (comm.timeout_s 15); a "
            "peer rank is stopped, hung or dead (rank 0 on a)\n");
  WriteFile(tmp.path() + "/rank-0.heartbeat",
            R"({"rank": 0, "step": 13, "phase": "step", "unix": 2000.5, )"
            R"("collectives_started": 41, "collectives_completed": 40})");
  WriteFile(tmp.path() + "/rank-1.heartbeat",
            R"({"rank": 1, "step": 12, "phase": "step", "unix": 1985.0, )"
            R"("collectives_started": 38, "collectives_completed": 38})");
  WriteFile(tmp.path() + "/rank-2.heartbeat",
            R"({"rank": 2, "step": 13, "phase": "step", "unix": 2000.4, )"
            R"("collectives_started": 41, "collectives_completed": 40})");
  WriteFile(tmp.path() + "/rank-3.heartbeat",
            R"({"rank": 3, "step": 1, "phase": "step", "unix": 100.0, )"
            R"("collectives_started": 1, "collectives_completed": 1})");
  WriteFile(tmp.path() + "/rank-4.heartbeat", "not json");
  const FailureReport r = AnalyzeFailure(tmp.path(), 1'000'000'000'000, {}, 2, 1, 0);
  EXPECT_EQ(r.first_failing_rank, 0);
  ASSERT_EQ(r.heartbeats.size(), 3u);
  EXPECT_EQ(r.rank_behind, 1);
  const auto j = nlohmann::json::parse(FailureJson(r));
  EXPECT_EQ(j["rank_behind"], 1);
  EXPECT_EQ(j["ranks"]["1"]["collectives_completed"], 38);
  EXPECT_EQ(j["ranks"]["0"]["step"], 13);
  EXPECT_FALSE(j["ranks"].contains("3"));
  const auto summary = FailureSummary(r, "/r/attempts/2/failure.json", /*final=*/false);
  EXPECT_EQ(summary[0], "ringpilot: attempt 2 failed (exit 1)");
  bool named = false;
  for (const std::string& line : summary) {
    named = named || line ==
                         "ringpilot: rank behind: 1 (the others waited for it): last heard "
                         "15.5 s before the others, in step at step 13, 38 of 40 "
                         "collectives done";
  }
  EXPECT_TRUE(named);
}

TEST(FailureReport, HangLineNamesTheSilentRanksLongestSilence) {
  TempDir tmp;
  // Rank 1 was stopped (SIGSTOP) for 11 s and revived (mpirun's SIGCONT): its last beat is as
  // recent as rank 0's, so "last heard 0.0 s before the others" said nothing; its longest
  // silence does.
  WriteFile(tmp.path() + "/rank-0.log",
            "FATAL 2000000000000 allreduce #41 not complete after 8.0 s (comm.timeout_s 8); a "
            "peer rank is stopped, hung or dead (rank 0 on a)\n");
  WriteFile(tmp.path() + "/rank-0.heartbeat",
            R"({"rank": 0, "step": 22, "phase": "step", "unix": 2000.5, "max_silence_s": 1.01, )"
            R"("collectives_started": 45, "collectives_completed": 44})");
  WriteFile(tmp.path() + "/rank-1.heartbeat",
            R"({"rank": 1, "step": 22, "phase": "step", "unix": 2000.5, )"
            R"("max_silence_s": 10.977, "collectives_started": 44, "collectives_completed": 44})");
  const FailureReport r = AnalyzeFailure(tmp.path(), 1'000'000'000'000, {}, 1, 1, 0);
  ASSERT_EQ(r.rank_behind, 1);
  const std::vector<std::string> summary = FailureSummary(r, "f", /*final=*/false);
  EXPECT_NE(std::find(summary.begin(), summary.end(),
                      "ringpilot: rank behind: 1 (the others waited for it): silent for 11.0 s "
                      "(its longest gap between heartbeats), last heard in step at step 23, 44 "
                      "of 44 collectives done"),
            summary.end())
      << ::testing::PrintToString(summary);
}

TEST(FailureReport, SilentRankReasonNamesAStoppedRank) {
  TempDir tmp;
  // Rank 1 stopped beating at 1985 (SIGSTOP); rank 0 beats on; rank 2 finished long ago;
  // rank 3's beat is an earlier attempt's.
  WriteFile(tmp.path() + "/rank-0.heartbeat",
            R"({"rank": 0, "step": 5, "phase": "step", "unix": 2000.5})");
  WriteFile(tmp.path() + "/rank-1.heartbeat",
            R"({"rank": 1, "step": 4, "phase": "step", "unix": 1985.0})");
  WriteFile(tmp.path() + "/rank-2.heartbeat",
            R"({"rank": 2, "step": 9, "phase": "done", "unix": 1900.0})");
  WriteFile(tmp.path() + "/rank-3.heartbeat",
            R"({"rank": 3, "step": 1, "phase": "step", "unix": 100.0})");
  // comm.timeout_s 15 + kSilentRankGraceSeconds 5: 19 s is not yet a hang, 21 s is.
  EXPECT_EQ(SilentRankReason(tmp.path(), 1000, 15, 2004), "");
  EXPECT_EQ(SilentRankReason(tmp.path(), 1000, 15, 2006),
            "rank 1 wrote no heartbeat for 21 s (comm.timeout_s 15): stopped or frozen");
  // Only beats of this attempt: a rank of an earlier one is not silent in this one.
  EXPECT_EQ(SilentRankReason(tmp.path(), 1990, 15, 2006), "");
  // The longest silence is named.
  WriteFile(tmp.path() + "/rank-0.heartbeat",
            R"({"rank": 0, "step": 5, "phase": "eval", "unix": 1980.0})");
  EXPECT_EQ(SilentRankReason(tmp.path(), 1000, 15, 2006),
            "rank 0 wrote no heartbeat for 26 s (comm.timeout_s 15): stopped or frozen");
}

// A link cut between two hosts (tests/integration/link_cut.sh): both ranks waited in the
// same all-reduce until comm.timeout_s and kept beating; neither is behind.
TEST(FailureReport, RanksThatTimedOutWaitingForEachOtherLostContact) {
  TempDir tmp;
  WriteFile(tmp.path() + "/rank-0.log",
            "FATAL 2000000000000 allreduce #54 not complete after 8.0 s (comm.timeout_s 8); a "
            "peer rank is stopped, hung or dead (rank 0 on n1)\n");
  WriteFile(tmp.path() + "/rank-1.log",
            "FATAL 2000012000000 allreduce #54 not complete after 8.0 s (comm.timeout_s 8); a "
            "peer rank is stopped, hung or dead (rank 1 on n2)\n");
  const auto beat = [&](int rank, double unix) {
    WriteFile(tmp.path() + "/rank-" + std::to_string(rank) + ".heartbeat",
              R"({"rank": )" + std::to_string(rank) +
                  R"(, "step": 25, "phase": "abort", "unix": )" + std::to_string(unix) +
                  R"(, "max_silence_s": 1.0, "collectives_started": 54, )"
                  R"("collectives_completed": 53})");
  };
  beat(0, 2000.0);
  beat(1, 2000.6);  // a beat later, as the heartbeat thread happened to write
  FailureReport r = AnalyzeFailure(tmp.path(), 1'000'000'000'000, {}, 1, 1, 0);
  EXPECT_EQ(r.first_failing_rank, 0);
  EXPECT_EQ(r.rank_behind, -1);
  EXPECT_EQ(r.timed_out_ranks, (std::vector<int>{0, 1}));
  EXPECT_TRUE(r.lost_contact);
  auto j = nlohmann::json::parse(FailureJson(r));
  EXPECT_EQ(j["lost_contact"], true);
  EXPECT_EQ(j["timed_out_ranks"], nlohmann::json({0, 1}));
  EXPECT_FALSE(j.contains("rank_behind"));
  // The cut landed mid-step: rank 0 had started two more collectives than rank 1, which
  // then entered its own and timed out too (tests/integration/link_cut.sh, seen in CI).
  WriteFile(tmp.path() + "/rank-1.heartbeat",
            R"({"rank": 1, "step": 24, "phase": "abort", "unix": 2000.2, "max_silence_s": 1.0, )"
            R"("collectives_started": 52, "collectives_completed": 52})");
  r = AnalyzeFailure(tmp.path(), 1'000'000'000'000, {}, 1, 1, 0);
  EXPECT_EQ(r.rank_behind, -1);
  EXPECT_TRUE(r.lost_contact);
  beat(1, 2000.6);
  bool said = false;
  for (const std::string& line : FailureSummary(r, "f", false)) {
    said = said || line ==
                       "ringpilot: ranks 0, 1 all timed out waiting for each other while every "
                       "rank kept beating: they lost contact (the network between their hosts?)";
  }
  EXPECT_TRUE(said);
  // Rank 1's beats stopped 10 s before rank 0's (its host went quiet): it is behind.
  beat(1, 1990.0);
  r = AnalyzeFailure(tmp.path(), 1'000'000'000'000, {}, 1, 1, 0);
  EXPECT_EQ(r.rank_behind, 1);
  EXPECT_FALSE(r.lost_contact);
}

TEST(FailureReport, NoRankBehindWhenLevelOrNotAHang) {
  const auto level_beat = [](int rank) {
    RankHeartbeat beat;
    beat.rank = rank;
    beat.step = 5;
    beat.phase = "step";
    beat.unix = 10.0;
    beat.max_silence_s = 1.0;
    beat.collectives_started = 20;
    beat.collectives_completed = 20;
    return beat;
  };
  std::map<int, RankHeartbeat> level;
  level[0] = level_beat(0);
  level[1] = level_beat(1);
  EXPECT_EQ(RankBehind(level), -1);
  EXPECT_EQ(RankBehind({{0, level[0]}}), -1);
  TempDir tmp;
  WriteFile(tmp.path() + "/rank-1.log", "FATAL 100 injected crash\n");
  WriteFile(tmp.path() + "/rank-0.heartbeat", R"({"rank": 0, "step": 9, "unix": 5.0})");
  WriteFile(tmp.path() + "/rank-1.heartbeat", R"({"rank": 1, "step": 3, "unix": 5.0})");
  EXPECT_EQ(AnalyzeFailure(tmp.path(), 0, {}, 1, 1, 0).rank_behind, -1);  // a crash, not a hang
}

// Runs nccl_profiler_record (the real plugin, driven through its function table) for ranks
// 0..world-1 of a program, into RUN_DIR/logs/rank-N.nccl.json.
void RecordProgram(const std::string& run_dir, int world, int collectives,
                   const std::vector<std::string>& extra) {
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {
        RINGPILOT_NCCL_RECORD, RINGPILOT_NCCL_PROFILER_SO, run_dir,
        std::to_string(r),     std::to_string(world),      std::to_string(collectives)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const testing::ProcessResult p = testing::RunProcess(argv);
    ASSERT_EQ(p.exit_code, 0) << p.err;
  }
}

TEST(FailureReport, ProgramHeartbeatsComeFromTheNcclProfilerFiles) {
  testing::TempDir dir;
  // Rank 1 never reaches all-reduce #8; rank 0 waits in it.
  RecordProgram(dir.path(), 2, 7, {"--stuck", "1"});
  const std::string logs = dir.path() + "/logs";
  const std::map<int, RankHeartbeat> beats = ReadNcclHeartbeats(logs, 0);
  ASSERT_EQ(beats.size(), 2u);
  EXPECT_EQ(beats.at(0).comm, "00000000c0ffee00");
  EXPECT_EQ(beats.at(0).collectives_started, 8u);
  EXPECT_EQ(beats.at(0).collectives_completed, 7u);
  EXPECT_EQ(beats.at(0).stuck_op, "allreduce");
  EXPECT_EQ(beats.at(0).stuck_seq, 8u);
  EXPECT_EQ(beats.at(1).collectives_started, 7u);
  EXPECT_TRUE(beats.at(1).stuck_op.empty());
  EXPECT_GT(beats.at(1).unix, 1.7e9);
  EXPECT_EQ(RankBehind(beats), 1);
  // Files of an earlier attempt do not count.
  EXPECT_TRUE(ReadNcclHeartbeats(logs, beats.at(1).unix + 10).empty());

  // The hang watch: nothing before comm.timeout_s has passed, then rank 0's wait.
  const double now = beats.at(0).unix;
  EXPECT_EQ(NcclHangReason(logs, 0, 300, now), "");
  EXPECT_EQ(NcclHangReason(logs, 0, 300, now + 301),
            "rank 0 has waited 301 s in allreduce #8 (comm.timeout_s 300)");

  // The report of the attempt names the rank behind and what the other waited in.
  FailureReport report = AnalyzeFailure(logs, 0, {"mpirun: job stopped"}, 1, -1, SIGTERM);
  EXPECT_EQ(report.rank_behind, 1);
  const nlohmann::json j = nlohmann::json::parse(FailureJson(report));
  EXPECT_EQ(j["rank_behind"], 1);
  EXPECT_EQ(j["ranks"]["0"]["in_collective"]["seq"], 8);
  EXPECT_EQ(j["ranks"]["1"]["collectives_completed"], 7);
  bool named = false;
  for (const std::string& line : FailureSummary(report, "failure.json")) {
    named = named || line ==
                         "ringpilot: rank behind: 1 (the others waited for it): 7 of 7 "
                         "collectives done on communicator 00000000c0ffee00; rank 0 waited "
                         "in allreduce #8";
  }
  EXPECT_TRUE(named);
}

TEST(FailureReport, HalfWrittenOrForeignNcclRecordsAreLeftOut) {
  testing::TempDir dir;
  RecordProgram(dir.path(), 2, 3, {});
  const std::string logs = dir.path() + "/logs";
  const std::string whole = testing::ReadFile(logs + "/rank-1.nccl.json");
  WriteFile(logs + "/rank-1.nccl.json", whole.substr(0, whole.size() / 2));
  WriteFile(logs + "/rank-2.nccl.json", R"({"rank": 5, "written_unix": 9e9})");
  WriteFile(logs + "/rank-3.nccl.json", "not json");
  const std::map<int, RankHeartbeat> beats = ReadNcclHeartbeats(logs, 0);
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats.at(0).collectives_completed, 3u);
}

}  // namespace
}  // namespace ringpilot::launcher
