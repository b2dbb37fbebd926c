// `ringpilot exec` end to end: the built binary under a real mpirun, and its errors.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/environment.h"
#include "base/files.h"
#include "base/time.h"
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

// How `ringpilot run` starts a launch.command rank: the program as a child, its output
// in LOG_DIR/rank-RANK.log, the rank placed first (here on a snapshot's topology).
TEST(RingpilotExec, LogDirAndPlacementAsRingpilotRunUsesThem) {
  const testing::TempDir dir;
  const char* src = std::getenv("RINGPILOT_SOURCE_DIR");
  auto env = OneOpenMpiRank(0, 1);
  env["RINGPILOT_TOPOLOGY_SNAPSHOT"] =
      std::string(src ? src : ".") + "/tests/fixtures/topology/cpu-only.json";
  env["RINGPILOT_RUN_DIR"] = dir.path();
  env["RINGPILOT_RESTART"] = "1";
  env["OMP_NUM_THREADS"] = "";
  const ProcessResult r =
      RunProcess({RingpilotBinary(), "exec", "--no-nccl-metrics", "--log-dir", dir.path() + "/logs",
                  "--bind", "cores", "--device", "cpu", "--", "sh", "-c",
                  "echo attempt=$RINGPILOT_ATTEMPT omp=$OMP_NUM_THREADS; echo oops >&2; exit 4"},
                 env);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.out.find("attempt=2 omp="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("omp=\n"), std::string::npos) << "bound: threads = its CPUs: " << r.out;
  const std::string log = testing::ReadFile(dir.path() + "/logs/rank-0.log");
  const std::vector<std::string> lines = SplitLines(log);
  ASSERT_GE(lines.size(), 5u) << log;
  // Every line after its time: TIME LEVEL text.
  EXPECT_EQ(lines[0].find(" INFO ringpilot exec: rank 0 of 1 (local 0 of 1, node 0) on "),
            base::kLogTimeLength)
      << log;
  EXPECT_NE(lines[0].find(", attempt 2, pid "), std::string::npos) << lines[0];
  EXPECT_NE(log.find("ringpilot exec: placement (--bind cores): rank 0 "), std::string::npos)
      << log;
  EXPECT_NE(log.find("Z ERR oops\n"), std::string::npos);
  EXPECT_EQ(lines.back().find(" FATAL "), base::kLogTimeLength) << log;
  EXPECT_NE(lines.back().find(" sh exited with status 4 (last error line: oops)"),
            std::string::npos);
  // Local rank 0 leaves the node's topology for `ringpilot diagnose`.
  EXPECT_TRUE(testing::Exists(dir.path() + "/logs/topology-" + base::HostName() + ".json"));

  const ProcessResult bad = RunProcess({RingpilotBinary(), "exec", "--bind", "tight", "--", "true"},
                                       OneOpenMpiRank(0, 1));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "ringpilot exec: --bind 'tight': expected auto, numa, cores or none\n");
}

// `ringpilot run` on a launch.command job under the real mpirun: rank 1 fails on the
// first attempt, the job restarts, and each rank's output is in its log.
TEST(RingpilotExec, RunCommandJobRestartsAndNamesTheRank) {
  const std::string mpirun =
      base::ResolveExecutable("mpirun", std::getenv("PATH") ? std::getenv("PATH") : "");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not on PATH";
  const testing::TempDir dir;
  const std::string job = dir.path() + "/job.yaml";
  testing::WriteFile(job, R"(name: prog
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch:
  max_restarts: 1
  preflight: false
  command: [sh, -c, 'echo "rank $RANK attempt $RINGPILOT_ATTEMPT of run $TORCHELASTIC_RUN_ID"; if [ $RANK = 1 ] && [ $RINGPILOT_ATTEMPT = 1 ]; then echo boom >&2; exit 3; fi']
metrics: {enabled: false}
)");
  const std::string run = dir.path() + "/run";
  ProcessResult r =
      RunProcess({RingpilotBinary(), "run", job, "--run-dir", run}, CleanLauncherEnv(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("rank 1 attempt 2 of run run"), std::string::npos) << r.out;
  const nlohmann::json report =
      nlohmann::json::parse(testing::ReadFile(run + "/attempts/1/failure.json"));
  EXPECT_EQ(report["first_failing_rank"], 1);
  EXPECT_EQ(report["first_failing_rank_source"], "fatal_line");
  EXPECT_EQ(report["fatal_message"], "sh exited with status 3 (last error line: boom)");
  bool boom = false;
  for (const auto& line : report["last_lines"]["1"]) {
    const std::string text = line.get<std::string>();
    boom = boom || (text.size() > 9 && text.compare(text.size() - 9, 9, " ERR boom") == 0);
  }
  EXPECT_TRUE(boom) << report.dump(2);
  for (int rank : {0, 1}) {
    const std::string log = testing::ReadFile(run + "/logs/rank-" + std::to_string(rank) + ".log");
    EXPECT_NE(log.find("rank " + std::to_string(rank) + " attempt 2"), std::string::npos) << log;
  }
  // The resolved job names the program; the rank's header names the attempt.
  EXPECT_NE(testing::ReadFile(run + "/job.yaml").find("command: [\"sh\""), std::string::npos);

  // A program that fails every attempt: its status is the job's, with failure.json.
  testing::WriteFile(job, R"(name: prog
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {max_restarts: 1, preflight: false, command: [sh, -c, 'exit 3']}
metrics: {enabled: false}
)");
  r = RunProcess({RingpilotBinary(), "run", job, "--run-dir", dir.path() + "/run3"},
                 CleanLauncherEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(testing::Exists(dir.path() + "/run3/failure.json"));
  EXPECT_NE(r.err.find("ringpilot: job failed for good after 2 attempt(s) (exit 3)"),
            std::string::npos)
      << r.err;

  // A program not on PATH is a job file error, before anything starts.
  testing::WriteFile(job, "name: prog\nlaunch: {command: [no-such-program-ringpilot]}\n");
  r = RunProcess({RingpilotBinary(), "run", job, "--run-dir", dir.path() + "/run4"},
                 CleanLauncherEnv(), dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, job +
                       ": launch.command: 'no-such-program-ringpilot' not found or not "
                       "executable on PATH\n");
  EXPECT_FALSE(testing::Exists(dir.path() + "/run4"));
}

}  // namespace
}  // namespace ringpilot::cli
