// `ringpilot diagnose` on a program's run: logs/rank-N.nccl.json written by the real NCCL
// profiler plugin, driven through its function table by nccl_profiler_record (one process
// per rank, as a program's ranks are), plus a node snapshot for the expected bandwidth.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "diagnose/command.h"
#include "diagnose/diagnose.h"
#include "tests/test_util.h"

namespace ringpilot::diagnose {
namespace {

using nlohmann::json;
using testing::RunProcess;
using testing::TempDir;

// Runs the recorder for ranks 0..world-1 into RUN_DIR with `extra` arguments.
void Record(const std::string& run_dir, int world, int collectives,
            const std::vector<std::string>& extra) {
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {
        RINGPILOT_NCCL_RECORD, RINGPILOT_NCCL_PROFILER_SO, run_dir,
        std::to_string(r),     std::to_string(world),      std::to_string(collectives)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const testing::ProcessResult p = RunProcess(argv);
    ASSERT_EQ(p.exit_code, 0) << p.err;
  }
}

// The node every recorded rank ran on, described by a 2-GPU NVLink snapshot.
void AddTopology(const std::string& run_dir) {
  const char* src = std::getenv("RINGPILOT_SOURCE_DIR");
  std::filesystem::copy_file(std::string(src ? src : ".") + "/tests/fixtures/topology/h200x2.json",
                             run_dir + "/logs/topology-" + base::HostName() + ".json");
}

TEST(DiagnoseProgram, StragglerIsTheRankWhoseKernelsAreShortestAndBandwidthIsJudged) {
  TempDir dir;
  Record(dir.path(), 2, 30, {"--late", "1", "--abort"});
  AddTopology(dir.path());
  const Diagnosis d = Analyze(LoadRun(dir.path(), "/nonexistent"));
  const ProgramDiagnosis& p = d.program;
  ASSERT_EQ(d.data.plugin_ranks.size(), 2u);
  EXPECT_TRUE(d.missing.empty()) << "a program's run has no summary.json or stats.json";
  EXPECT_EQ(p.comm, "00000000c0ffee00");
  EXPECT_EQ(p.aligned_collectives, 30);
  ASSERT_FALSE(p.ranking.empty());
  EXPECT_EQ(p.ranking[0].rank, 1);
  EXPECT_EQ(p.ranking[0].last_arrivals, 30);
  // Rank 0 ran 3 ms per all-reduce, rank 1 (late by 2 ms) 1 ms: 2 ms waited each time.
  EXPECT_NEAR(p.ranking[0].caused_wait_seconds, 30 * 2e-3, 1e-6);
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_NEAR(p.ranks[0].comm_seconds, 30 * 3e-3, 1e-6);
  EXPECT_NEAR(p.ranks[1].comm_seconds, 30 * 1e-3, 1e-6);
  EXPECT_EQ(p.ranks[0].completed, 30u);
  EXPECT_GT(p.ranks[0].elapsed_seconds, 0);
  ASSERT_TRUE(p.comm_share.has_value());
  // 30 x 3 ms of kernels in the 30 x 10 ms the rank ran.
  EXPECT_GT(p.ranks[0].comm_share, 0.1);
  EXPECT_LT(p.ranks[0].comm_share, 0.9);
  EXPECT_FALSE(p.hang.has_value());
  // 4 MiB all-reduces; NVLink between the snapshot's two GPUs expects far more than a 4 MiB
  // all-reduce in 1-3 ms gives.
  ASSERT_EQ(p.collectives.size(), 1u);
  EXPECT_EQ(p.collectives[0].op, "allreduce");
  EXPECT_EQ(p.collectives[0].count, 60);
  EXPECT_EQ(p.collectives[0].busbw_min_rank, 0);
  EXPECT_GT(p.collectives[0].expected, 1e10) << p.expected_source;
  EXPECT_TRUE(p.collectives[0].low);
  bool straggler_warning = false;
  for (const std::string& w : d.warnings) {
    straggler_warning =
        straggler_warning || w.rfind("straggler: rank 1 arrived last at 30", 0) == 0;
  }
  EXPECT_TRUE(straggler_warning);

  // The binary's report and JSON say the same.
  DiagnoseArgs args;
  args.run_dir = dir.path();
  args.infiniband_dir = "/nonexistent";
  std::ostringstream out, err;
  ASSERT_EQ(RunDiagnose(args, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("straggler (program): rank 1: arrived last at 30 of 30 collectives"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("hang: none"), std::string::npos) << out.str();
  args.json = true;
  std::ostringstream jout;
  ASSERT_EQ(RunDiagnose(args, jout, err), 0);
  const json j = json::parse(jout.str());
  EXPECT_EQ(j["program"]["straggler"]["rank"], 1);
  EXPECT_EQ(j["program"]["collectives"][0]["below_half_of_expected"], true);
  EXPECT_TRUE(j["program"]["hang"].is_null());
}

TEST(DiagnoseProgram, LiveHangNamesTheRankBehindAndTheCollective) {
  TempDir dir;
  // Rank 2 never enqueues all-reduce #11; ranks 0 and 1 are in it, their processes alive.
  Record(dir.path(), 3, 10, {"--stuck", "2"});
  RunData run = LoadRun(dir.path(), "/nonexistent");
  // Seen right after the files were written: not (yet) a hang.
  EXPECT_FALSE(Analyze(run).program.hang.has_value());
  // A minute later with the files still saying so: a hang.
  run.now_unix += 60;
  const Diagnosis d = Analyze(run);
  ASSERT_TRUE(d.program.hang.has_value());
  const HangReport& h = *d.program.hang;
  EXPECT_EQ(h.rank_behind, 2);
  EXPECT_EQ(h.behind_completed, 10u);
  EXPECT_EQ(h.seq, 11u);
  EXPECT_EQ(h.op, "allreduce");
  EXPECT_EQ(h.waiting, (std::vector<int>{0, 1}));
  EXPECT_GE(h.waited_seconds, 60);
  EXPECT_FALSE(h.aborted);
  ASSERT_FALSE(d.warnings.empty());
  EXPECT_EQ(d.warnings[0].rfind("hang: rank 2 is behind (10 collectives completed): rank(s) 0,1 "
                                "waited ",
                                0),
            0u)
      << d.warnings[0];
  EXPECT_NE(d.warnings[0].find("in allreduce #11"), std::string::npos) << d.warnings[0];
  EXPECT_NE(RenderDiagnosisText(d).find("hang: rank 2 is behind: 10 collectives completed"),
            std::string::npos);
}

TEST(DiagnoseProgram, AbortedHangKeepsWhatTheRanksWereStuckIn) {
  TempDir dir;
  // As after a watchdog's ncclCommAbort: the stuck all-reduce is abandoned, not lost.
  Record(dir.path(), 2, 5, {"--stuck", "0", "--abort"});
  const Diagnosis d = Analyze(LoadRun(dir.path(), "/nonexistent"));
  ASSERT_TRUE(d.program.hang.has_value());
  EXPECT_TRUE(d.program.hang->aborted);
  EXPECT_EQ(d.program.hang->rank_behind, 0);
  EXPECT_EQ(d.program.hang->seq, 6u);
  EXPECT_EQ(d.program.hang->waiting, std::vector<int>{1});
  const json j = DiagnosisToJson(d);
  EXPECT_EQ(j["program"]["hang"]["rank_behind"], 0);
  EXPECT_EQ(j["program"]["hang"]["seq"], 6);
}

TEST(DiagnoseProgram, MalformedRecordIsOneLineNamingTheFile) {
  TempDir dir;
  Record(dir.path(), 2, 3, {"--abort"});
  const std::string file = dir.path() + "/logs/rank-1.nccl.json";
  json j = json::parse(testing::ReadFile(file));
  j["communicators"][0]["recent_collectives"][0] = "late";
  testing::WriteFile(file, j.dump());
  DiagnoseArgs args;
  args.run_dir = dir.path();
  std::ostringstream out, err;
  EXPECT_EQ(RunDiagnose(args, out, err), 2);
  EXPECT_EQ(err.str(), "ringpilot diagnose: " + file +
                           ": 'communicators[0].recent_collectives[0]': expected [seq, op, bytes, "
                           "enqueue_unix, kernel_start_ns, seconds], got \"late\"\n");
}

}  // namespace
}  // namespace ringpilot::diagnose
