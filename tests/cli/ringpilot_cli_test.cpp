// The `ringpilot` binary's run and validate subcommands, end to end, with a fake mpirun.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace ringpilot::cli {
namespace {

using testing::Exists;
using testing::ProcessResult;
using testing::ReadFile;
using testing::RingpilotBinary;
using testing::RunProcess;
using testing::SplitLines;
using testing::TempDir;
using testing::WriteFile;

constexpr const char* kJob = R"(name: clitest
world: {nodes: 1, procs_per_node: 2, device: cpu}
launch: {backend: local, max_restarts: 1}
model: {name: resnet18-cifar}
train: {steps: 4}
)";

// Fails attempt 1 with a FATAL line from rank 1, succeeds afterwards. Records its argv.
constexpr const char* kFakeMpirun = R"(#!/bin/sh
echo "$@" > "$RINGPILOT_RUN_DIR/mpirun-argv"
echo "attempt $RINGPILOT_ATTEMPT"
if [ "$RINGPILOT_ATTEMPT" = 1 ]; then
  echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) FATAL rank 1 crashed" >> "$RINGPILOT_RUN_DIR/logs/rank-1.log"
  exit 3
fi
exit 0
)";

struct Cli {
  TempDir tmp;
  std::string job = tmp.path() + "/job.yaml";
  std::string mpirun = tmp.path() + "/fake-mpirun";
  std::string trainer = tmp.path() + "/fake-trainer";
  std::string run_dir = tmp.path() + "/run";

  Cli() {
    WriteFile(job, kJob);
    WriteFile(mpirun, kFakeMpirun, true);
    WriteFile(trainer, "#!/bin/sh\nexit 0\n", true);
  }
  ProcessResult Ringpilot(std::vector<std::string> args,
                          std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), RingpilotBinary());
    env.emplace("RINGPILOT_MPIRUN", mpirun);
    env.emplace("RINGPILOT_TRAINER", trainer);
    return RunProcess(args, env, tmp.path());
  }
};

TEST(RingpilotCli, ValidateGoodAndBad) {
  Cli c;
  ProcessResult r = c.Ringpilot({"validate", c.job});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c.job + ": valid (clitest, world size 2, model resnet18-cifar)\n");

  r = c.Ringpilot({"validate", c.job, "--set", "world.procs_per_node=3", "--set", "name=other"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c.job + ": valid (other, world size 3, model resnet18-cifar)\n");

  r = c.Ringpilot({"validate", c.job, "--print"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("clitest"), std::string::npos);
  EXPECT_NE(r.err.find("valid"), std::string::npos);

  WriteFile(c.tmp.path() + "/bad.yaml",
            "name: x\nmodel: {name: resnet18-cifar}\nworld: {nodes: zero}\n");
  r = c.Ringpilot({"validate", c.tmp.path() + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  ASSERT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("bad.yaml:3:"), std::string::npos) << r.err;

  // Every problem in one pass, one line each, in the order of the file and the overrides.
  WriteFile(c.tmp.path() + "/worse.yaml",
            "name: x\nmodel: {name: resnet18-cifar}\nworld: {nodes: zero}\n"
            "train: {warmup_steps: 3, lr: -1}\n");
  r = c.Ringpilot({"validate", c.tmp.path() + "/worse.yaml", "--set", "comm.bucket_mb=0"});
  EXPECT_EQ(r.exit_code, 2);
  const std::vector<std::string> lines = SplitLines(r.err);
  ASSERT_EQ(lines.size(), 4u) << r.err;
  EXPECT_NE(lines[0].find("worse.yaml:3:16: world.nodes: expected an integer"), std::string::npos);
  EXPECT_NE(lines[1].find("worse.yaml:4:9: train.warmup_steps: renamed to train.timing_skip_steps"),
            std::string::npos);
  EXPECT_NE(lines[2].find("worse.yaml:4:30: train.lr: must be in"), std::string::npos);
  EXPECT_NE(lines[3].find("--set[1]:1:16: comm.bucket_mb: must be in"), std::string::npos);

  r = c.Ringpilot({"validate", c.tmp.path() + "/missing.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(SplitLines(r.err).size(), 1u) << r.err;
}

// A GPU recipe on a host whose ranks see no GPU (CUDA_VISIBLE_DEVICES empty hides any):
// world.device auto plans CPU ranks with one notice; world.device cuda is refused before
// anything starts, with exit 78 like any failure that would repeat.
TEST(RingpilotCli, GpuRecipeWithoutAGpu) {
  Cli c;
  const std::string recipe = c.tmp.path() + "/recipe.yaml";
  WriteFile(recipe,
            "name: recipe\nworld: {nodes: 1, procs_per_node: 2, device: auto}\n"
            "model: {name: resnet18-cifar}\ntrain: {steps: 4, precision: bf16, "
            "cuda_graphs: true}\n");
  const std::map<std::string, std::string> no_gpu = {{"CUDA_VISIBLE_DEVICES", ""}};
  ProcessResult r = c.Ringpilot({"validate", recipe}, no_gpu);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, recipe + ": valid (recipe, world size 2, model resnet18-cifar)\n");
  ASSERT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(": world.device auto: no GPU visible on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CPU ranks with train.cuda_graphs off and train.precision fp32 instead "
                       "of bf16 (GPU-only settings)"),
            std::string::npos)
      << r.err;

  r = c.Ringpilot({"validate", recipe, "--set", "world.device=cuda"}, no_gpu);
  EXPECT_EQ(r.exit_code, 78) << r.err;
  ASSERT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("world.device: cuda, but no GPU is visible on "), std::string::npos);

  const std::string run_dir = c.tmp.path() + "/cuda-run";
  r = c.Ringpilot({"run", recipe, "--set", "world.device=cuda", "--run-dir", run_dir}, no_gpu);
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_FALSE(Exists(run_dir));  // nothing started, nothing written

  // run (with the fake mpirun): the notice among the start-up lines.
  r = c.Ringpilot({"run", recipe, "--run-dir", c.run_dir, "--set", "launch.preflight=false"},
                  no_gpu);
  EXPECT_NE(r.err.find("ringpilot: world.device auto: no GPU visible on "), std::string::npos)
      << r.err;
}

TEST(RingpilotCli, CommandLineErrorsAreOneLineExit2) {
  Cli c;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, {"frobnicate"}, {"run"}, {"validate", c.job, "--bogus"}}) {
    const ProcessResult r = c.Ringpilot(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  }
  EXPECT_EQ(c.Ringpilot({"--help"}).exit_code, 0);
}

TEST(RingpilotCli, DryRunPrintsTheCommandAndCreatesNothing) {
  Cli c;
  // A free block: a taken one would (rightly) move the ranks to the next free block.
  const int ports = testing::FreeLoopbackPorts(2);
  ASSERT_NE(ports, 0);
  const ProcessResult r = c.Ringpilot({"run", c.job, "--run-dir", c.run_dir, "--dry-run", "--set",
                                       "metrics.port_base=" + std::to_string(ports)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One shell command line: the attempt's variables, then mpirun; nothing says "launching".
  const std::string prefix = "RINGPILOT_RUN_DIR=" + c.run_dir +
                             " RINGPILOT_RESTART=0 RINGPILOT_ATTEMPT=1 RINGPILOT_MAX_RESTARTS=1 "
                             "RINGPILOT_MASTER_ADDR=127.0.0.1 RINGPILOT_MASTER_PORT=29500 "
                             "RINGPILOT_VERBOSE=0 " +
                             c.mpirun + " -np 2 --oversubscribe --bind-to none";
  EXPECT_EQ(r.out.rfind(prefix, 0), 0u) << r.out;
  EXPECT_EQ(SplitLines(r.out).size(), 1u) << r.out;
  EXPECT_EQ((r.out + r.err).find("launching"), std::string::npos);
  // The start-up block on stderr: job, data, run directory, metrics.
  const std::vector<std::string> block = SplitLines(r.err);
  ASSERT_EQ(block.size(), 4u) << r.err;
  EXPECT_EQ(block[0],
            "ringpilot: job clitest: resnet18-cifar, 2 rank(s) (1 node(s) x 2, device cpu, backend "
            "local), 4 steps");
  EXPECT_EQ(block[1], "ringpilot: data synthetic, batch 32 per rank");
  EXPECT_EQ(block[2], "ringpilot: run directory " + c.run_dir + " (ringpilot status|logs|stop " +
                          c.run_dir + ")");
  EXPECT_EQ(block[3], "ringpilot: metrics on 127.0.0.1:" + std::to_string(ports) + "-" +
                          std::to_string(ports + 1) +
                          " (a port per local rank, path /metrics; "
                          "RUN_DIR/prometheus-targets.json lists them; docs/metrics.md)");
  EXPECT_NE(
      r.out.find(c.trainer + " --config " + c.run_dir + "/job.yaml --run-dir " + c.run_dir + "\n"),
      std::string::npos)
      << r.out;
  EXPECT_FALSE(Exists(c.run_dir));
}

TEST(RingpilotCli, DryRunOfTwoNodesNamesTheLocalRankPortsOfEach) {
  Cli c;
  // Port = base + LOCAL rank: every node serves the same two ports.
  const ProcessResult r =
      c.Ringpilot({"run", c.job, "--run-dir", c.run_dir, "--dry-run", "--set", "world.nodes=2",
                   "--set", "launch.backend=mpi", "--set", "launch.hosts=[n1:2,n2:2]"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> block = SplitLines(r.err);
  ASSERT_EQ(block.size(), 4u) << r.err;
  EXPECT_EQ(block[3],
            "ringpilot: metrics on n1:18400-18401, n2:18400-18401 (a port per local rank, path "
            "/metrics; a node whose ports are taken moves its ranks up a block of 2; "
            "RUN_DIR/prometheus-targets.json lists them; docs/metrics.md)");
  EXPECT_FALSE(Exists(c.run_dir));
}

TEST(RingpilotCli, RunRestartsOnceAndSucceeds) {
  Cli c;
  const ProcessResult r = c.Ringpilot({"run", c.job, "--run-dir", c.run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "attempt 1\nattempt 2\n");
  // The mpirun command is in the log, and on the terminal only with --verbose.
  EXPECT_EQ(r.err.find("ringpilot: launching:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restarting from the last checkpoint as attempt 2 (restart 1 of 1)"),
            std::string::npos);
  EXPECT_NE(r.err.find("ringpilot: job finished after 1 restart(s)"), std::string::npos);
  for (const char* sub : {"/logs", "/checkpoints", "/trace"}) EXPECT_TRUE(Exists(c.run_dir + sub));
  EXPECT_NE(ReadFile(c.run_dir + "/job.yaml").find("clitest"), std::string::npos);
  EXPECT_NE(ReadFile(c.run_dir + "/mpirun-argv").find("--config " + c.run_dir + "/job.yaml"),
            std::string::npos);
  const std::string log = ReadFile(c.run_dir + "/logs/launcher.log");
  EXPECT_NE(log.find("Z attempt 1\n"), std::string::npos);  // after the line's time
  EXPECT_NE(log.find("ringpilot: launching:"), std::string::npos);

  const std::string verbose_dir = c.tmp.path() + "/verbose";
  const ProcessResult v = c.Ringpilot({"run", c.job, "--run-dir", verbose_dir, "--verbose"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.err.find("ringpilot: launching: " + c.mpirun + " -np 2"), std::string::npos);
  EXPECT_NE(ReadFile(verbose_dir + "/mpirun-argv").find("-x RINGPILOT_VERBOSE"), std::string::npos);
}

TEST(RingpilotCli, RunFailsForGoodWithExitCodeAndReport) {
  Cli c;
  const ProcessResult r =
      c.Ringpilot({"run", c.job, "--run-dir", c.run_dir, "--set", "launch.max_restarts=0"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("ringpilot: first failing rank: 1: rank 1 crashed"), std::string::npos)
      << r.err;
  const auto j = nlohmann::json::parse(ReadFile(c.run_dir + "/failure.json"));
  EXPECT_EQ(j["first_failing_rank"], 1);
  EXPECT_EQ(j["exit_code"], 3);

  // Resuming in the same directory with another config keeps the old one and the logs.
  const std::string old_yaml = ReadFile(c.run_dir + "/job.yaml");
  const std::string old_log = ReadFile(c.run_dir + "/logs/launcher.log");
  const ProcessResult again = c.Ringpilot({"run", c.job, "--run-dir", c.run_dir});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ReadFile(c.run_dir + "/job.yaml.prev"), old_yaml);
  EXPECT_NE(ReadFile(c.run_dir + "/job.yaml"), old_yaml);
  EXPECT_EQ(ReadFile(c.run_dir + "/logs/launcher.log").rfind(old_log, 0), 0u);
  EXPECT_NE(again.err.find("previous config kept as job.yaml.prev"), std::string::npos);
}

TEST(RingpilotCli, DefaultRunDirIsUnderRuns) {
  Cli c;
  const ProcessResult r = c.Ringpilot({"run", c.job, "--set", "launch.max_restarts=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string marker = "ringpilot: run directory " + c.tmp.path() + "/runs/clitest-";
  EXPECT_NE(r.err.find(marker), std::string::npos) << r.err;
}

TEST(RingpilotCli, RunRejectsUnsupportedBackendsAndMissingBinaries) {
  Cli c;
  ProcessResult r = c.Ringpilot({"run", c.job, "--set", "launch.backend=k8s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, c.job + ": launch.backend: 'k8s' is not supported by 'ringpilot run' yet\n");

  // config::Backend slurm needs an allocation: one line, exit 2; inside one, mpirun gets its nodes.
  r = c.Ringpilot({"run", c.job, "--set", "launch.backend=slurm", "--dry-run"});
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("launch.backend slurm: not inside a Slurm allocation"), std::string::npos);
  r = c.Ringpilot(
      {"run", c.job, "--set", "launch.backend=slurm", "--run-dir", c.run_dir, "--dry-run"},
      {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "4(x2)"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--hostfile " + c.run_dir + "/hostfile --map-by ppr:"), std::string::npos)
      << r.out;

  r = c.Ringpilot({"run", c.job, "--run-dir", c.run_dir},
                  {{"RINGPILOT_TRAINER", c.tmp.path() + "/no-trainer"}});
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(c.tmp.path() + "/no-trainer"), std::string::npos);
  EXPECT_FALSE(Exists(c.run_dir));

  r = c.Ringpilot({"run", c.job, "--run-dir", c.run_dir},
                  {{"RINGPILOT_MPIRUN", c.tmp.path() + "/no-mpirun"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-mpirun"), std::string::npos);

  WriteFile(c.tmp.path() + "/a-file", "x");
  r = c.Ringpilot({"run", c.job, "--run-dir", c.tmp.path() + "/a-file"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(SplitLines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(ReadFile(c.tmp.path() + "/a-file"), "x");
}

}  // namespace
}  // namespace ringpilot::cli
