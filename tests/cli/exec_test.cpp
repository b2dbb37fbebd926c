// `ringpilot exec` end to end: the built binary under a real mpirun, and its errors.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/environment.h"
#include "base/files.h"
#include "tests/test_util.h"

namespace ringpilot::cli {
namespace {

using testing::ProcessResult;
using testing::RingpilotBinary;
using testing::RunProcess;
using testing::SplitLines;

// Variables of an outer launcher (a CI job under Slurm, say) that would change the answer.
std::map<std::string, std::string> CleanLauncherEnv() {
  std::map<std::string, std::string> unset;
  for (const auto& [name, value] : base::CurrentEnvironment()) {
    for (const char* prefix :
         {"OMPI_", "PMI_", "PMIX_", "SLURM_", "RINGPILOT_MASTER_", "MPI_LOCAL"}) {
      if (name.rfind(prefix, 0) == 0) unset[name] = "";
    }
    for (const char* exact :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
          "MASTER_ADDR", "MASTER_PORT", "NCCL_PROFILER_PLUGIN", "RINGPILOT_METRICS_PORT",
          "RINGPILOT_METRICS_PORT_BASE", "RINGPILOT_NCCL_PROFILER"}) {
      if (name == exact) unset[name] = "";
    }
  }
  return unset;
}

TEST(RingpilotExec, UnderMpirunEachRankGetsTheTorchrunContract) {
  const std::string mpirun =
      base::ResolveExecutable("mpirun", std::getenv("PATH") ? std::getenv("PATH") : "");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not on PATH";
  const ProcessResult r =
      RunProcess({mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca",
                  "btl_vader_single_copy_mechanism", "none", RingpilotBinary(), "exec", "--", "sh",
                  "-c", "echo $RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR"},
                 CleanLauncherEnv());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> lines = SplitLines(r.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"0 2 0 127.0.0.1", "1 2 1 127.0.0.1"})) << r.err;
}

TEST(RingpilotExec, SlurmVariablesWithoutMpirun) {
  auto env = CleanLauncherEnv();
  env.insert({{"SLURM_PROCID", "3"},
              {"SLURM_NTASKS", "4"},
              {"SLURM_LOCALID", "1"},
              {"SLURM_NODEID", "1"},
              {"SLURM_JOB_NODELIST", "n[1-2]"},
              {"SLURM_JOB_ID", "77"},
              {"SLURM_TASKS_PER_NODE", "2(x2)"}});
  env["MASTER_PORT"] = "4444";  // set by the user: kept
  const ProcessResult r =
      RunProcess({RingpilotBinary(), "exec", "--", "sh", "-c",
                  "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $NODE_RANK $GROUP_RANK "
                  "$MASTER_ADDR $MASTER_PORT"},
                 env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3 4 1 2 1 1 n1 4444\n");
}

std::map<std::string, std::string> OneOpenMpiRank(int rank, int size) {
  auto env = CleanLauncherEnv();
  env.insert({{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
              {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
              {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(size)}});
  return env;
}

TEST(RingpilotExec, LoadsTheNcclProfilerBesideTheBinaryOnTheRanksMetricsPort) {
  const std::string plugin = base::DirName(RingpilotBinary()) + "/libringpilot-nccl-profiler.so";
  ASSERT_TRUE(testing::Exists(plugin)) << plugin;
  const std::string show = "echo $NCCL_PROFILER_PLUGIN $RINGPILOT_METRICS_PORT_BASE";
  ProcessResult r =
      RunProcess({RingpilotBinary(), "exec", "--", "sh", "-c", show}, OneOpenMpiRank(2, 4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, plugin + " 18400\n");  // local rank 2's plugin serves on 18402
  EXPECT_EQ(r.err, "");

  r = RunProcess({RingpilotBinary(), "exec", "--no-nccl-metrics", "--", "sh", "-c", show},
                 OneOpenMpiRank(2, 4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n");

  auto env = OneOpenMpiRank(1, 4);
  env["RINGPILOT_NCCL_PROFILER"] = "/nonexistent/libringpilot-nccl-profiler.so";
  r = RunProcess({RingpilotBinary(), "exec", "--", "sh", "-c", show}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;  // the program runs, without NCCL metrics
  EXPECT_EQ(r.out, "\n");
  EXPECT_EQ(r.err,
            "ringpilot exec: no NCCL metrics: /nonexistent/libringpilot-nccl-profiler.so: cannot "
            "open shared object file: No such file or directory (--no-nccl-metrics turns them "
            "off)\n");
  // A file that is not a library (or one whose dependencies are missing) likewise.
  const testing::TempDir dir;
  testing::WriteFile(dir.path() + "/libringpilot-nccl-profiler.so", "not an ELF file\n");
  env["RINGPILOT_NCCL_PROFILER"] = dir.path() + "/libringpilot-nccl-profiler.so";
  r = RunProcess({RingpilotBinary(), "exec", "--", "sh", "-c", show}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
  EXPECT_EQ(testing::SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("ringpilot exec: no NCCL metrics: " + dir.path()), std::string::npos)
      << r.err;
}

TEST(RingpilotExec, NoLauncherEnvironmentIsExit2) {
  const ProcessResult r = RunProcess({RingpilotBinary(), "exec", "--", "true"}, CleanLauncherEnv());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "ringpilot exec: no MPI or Slurm rank environment (run it under mpirun, srun or "
            "ringpilot run)\n");
}

TEST(RingpilotExec, CommandNotFoundIs127) {
  auto env = CleanLauncherEnv();
  env.insert({{"OMPI_COMM_WORLD_RANK", "0"},
              {"OMPI_COMM_WORLD_SIZE", "1"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}});
  const ProcessResult r =
      RunProcess({RingpilotBinary(), "exec", "--", "no-such-command-ringpilot"}, env);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "ringpilot exec: no-such-command-ringpilot: command not found\n");
}

TEST(RingpilotExec, MissingCommandIsExit2) {
  const ProcessResult r = RunProcess({RingpilotBinary(), "exec"}, CleanLauncherEnv());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(SplitLines(r.err).size(), 1u) << r.err;
}

}  // namespace
}  // namespace ringpilot::cli
