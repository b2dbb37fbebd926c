#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/mpirun_command.h"
#include "mpirun/flags.h"

namespace ringpilot::launcher {
namespace {

using Argv = std::vector<std::string>;

config::JobConfig LocalJob() {
  config::JobConfig c;
  c.name = "t";
  c.model.name = config::ModelName::kResnet18Cifar;
  c.world.nodes = 1;
  c.world.procs_per_node = 4;
  return c;
}

MpirunContext Context() {
  MpirunContext ctx;
  ctx.mpirun = "/opt/ompi/bin/mpirun";
  ctx.trainer = "/b/bin/ringpilot-trainer";
  ctx.run_dir = "/runs/t-1";
  ctx.euid = 1000;
  ctx.env = {{"HOME", "/root"}, {"PATH", "/usr/bin"}};
  return ctx;
}

const Argv kRingpilotVars = {"-x", "RINGPILOT_RUN_DIR",     "-x", "RINGPILOT_RESTART",
                             "-x", "RINGPILOT_ATTEMPT",     "-x", "RINGPILOT_MAX_RESTARTS",
                             "-x", "RINGPILOT_MASTER_ADDR", "-x", "RINGPILOT_MASTER_PORT",
                             "-x", "RINGPILOT_LAUNCH_UNIX", "-x", "RINGPILOT_VERBOSE"};
const Argv kTrainerTail = {"/b/bin/ringpilot-trainer", "--config", "/runs/t-1/job.yaml",
                           "--run-dir", "/runs/t-1"};

Argv Concat(std::initializer_list<Argv> parts) {
  Argv out;
  for (const Argv& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(MpirunCommand, LocalBackendExactArgv) {
  const MpirunCommand cmd = BuildMpirunCommand(LocalJob(), Context());
  const Argv expected = Concat({{"/opt/ompi/bin/mpirun", "-np", "4", "--oversubscribe", "--bind-to",
                                 "none", "--mca", "btl_vader_single_copy_mechanism", "none"},
                                kRingpilotVars,
                                {"-x", "PATH"},
                                kTrainerTail});
  EXPECT_EQ(cmd.argv, expected);
  EXPECT_EQ(cmd.master_addr, "127.0.0.1");
  EXPECT_EQ(cmd.master_port, config::LaunchConfig::kDefaultMasterPort);
  EXPECT_TRUE(cmd.hostfile_path.empty());
  EXPECT_TRUE(cmd.hostfile_content.empty());
}

TEST(MpirunCommand, RootAddsAllowRunAsRoot) {
  MpirunContext ctx = Context();
  const Argv user = BuildMpirunCommand(LocalJob(), ctx).argv;
  EXPECT_EQ(std::count(user.begin(), user.end(), "--allow-run-as-root"), 0);
  ctx.euid = 0;
  const Argv argv = BuildMpirunCommand(LocalJob(), ctx).argv;
  const auto it = std::find(argv.begin(), argv.end(), "--allow-run-as-root");
  ASSERT_NE(it, argv.end());
  EXPECT_EQ(*(it - 1), "none");  // right after --bind-to none
}

TEST(MpirunCommand, ForwardsOnlyListedVariablesThatAreSet) {
  MpirunContext ctx = Context();
  ctx.env = {{"PATH", "/usr/bin"},
             {"LD_LIBRARY_PATH", "/l"},
             {"OMP_NUM_THREADS", "2"},
             {"CUDA_VISIBLE_DEVICES", "0"},
             {"NCCL_DEBUG", "INFO"},
             {"NCCL_IB_HCA", "mlx5"},
             {"TORCH_SHOW_CPP_STACKTRACES", "1"},
             {"NVSHMEM_DEBUG", "1"},
             {"HOME", "/root"},
             {"MY_NCCL_THING", "x"},
             {"NCCL", "x"},
             {"SECRET_TOKEN", "x"}};
  const Argv argv = BuildMpirunCommand(LocalJob(), ctx).argv;
  Argv forwarded;
  for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-x") forwarded.push_back(argv[i + 1]);
  }
  const Argv expected = {"RINGPILOT_RUN_DIR",
                         "RINGPILOT_RESTART",
                         "RINGPILOT_ATTEMPT",
                         "RINGPILOT_MAX_RESTARTS",
                         "RINGPILOT_MASTER_ADDR",
                         "RINGPILOT_MASTER_PORT",
                         "RINGPILOT_LAUNCH_UNIX",
                         "RINGPILOT_VERBOSE",
                         "CUDA_VISIBLE_DEVICES",
                         "LD_LIBRARY_PATH",
                         "NCCL_DEBUG",
                         "NCCL_IB_HCA",
                         "NVSHMEM_DEBUG",
                         "OMP_NUM_THREADS",
                         "PATH",
                         "TORCH_SHOW_CPP_STACKTRACES"};
  EXPECT_EQ(forwarded, expected);
  // Values never appear on the command line: `-x NAME` takes them from mpirun's env.
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "INFO"), argv.end());
}

TEST(MpirunCommand, IsForwardedVariable) {
  for (const char* yes :
       {"PATH", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "NCCL_SOCKET_IFNAME",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NVSHMEM_BOOTSTRAP"}) {
    EXPECT_TRUE(mpirun::IsForwardedVariable(yes)) << yes;
  }
  for (const char* no : {"HOME", "PATHX", "OMP_PROC_BIND", "XNCCL_A", "torch_x", "USER"}) {
    EXPECT_FALSE(mpirun::IsForwardedVariable(no)) << no;
  }
}

TEST(MpirunCommand, MpirunArgsGoBeforeTheTrainerVerbatim) {
  config::JobConfig job = LocalJob();
  job.launch.mpirun_args = {"--mca", "btl_tcp_if_include", "lo", "--tag-output", "a b'c"};
  const Argv argv = BuildMpirunCommand(job, Context()).argv;
  const Argv tail(argv.end() - 10, argv.end());
  EXPECT_EQ(tail,
            Concat({{"--mca", "btl_tcp_if_include", "lo", "--tag-output", "a b'c"}, kTrainerTail}));
}

// The value ringpilot gave btl_vader_single_copy_mechanism, or "" for none given.
std::string CopyMechanism(const Argv& argv) {
  for (std::size_t i = 0; i + 2 < argv.size(); ++i) {
    if (argv[i] == "--mca" && argv[i + 1] == "btl_vader_single_copy_mechanism") return argv[i + 2];
  }
  return "";
}

bool HasCopyNone(const Argv& argv) { return CopyMechanism(argv) == "none"; }

TEST(MpirunCommand, CmaOnlyWhereItWorksAndEveryRankIsLocal) {
  MpirunContext ctx = Context();
  ctx.cma_works = true;
  EXPECT_EQ(CopyMechanism(BuildMpirunCommand(LocalJob(), ctx).argv), "cma");
  EXPECT_EQ(CopyMechanism(BuildMpirunCommand(LocalJob(), Context()).argv), "none");
  // Other hosts: whether CMA works there is not known here.
  config::JobConfig job = LocalJob();
  job.launch.backend = config::Backend::kMpi;
  job.launch.hosts = {{"node-a", 4}};
  EXPECT_EQ(CopyMechanism(BuildMpirunCommand(job, ctx).argv), "none");
  // The user's choice still wins.
  job = LocalJob();
  job.launch.mpirun_args = {"--mca", "btl_vader_single_copy_mechanism", "none"};
  const Argv argv = BuildMpirunCommand(job, ctx).argv;
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "btl_vader_single_copy_mechanism"), 1);
  EXPECT_EQ(CopyMechanism(argv), "none");
}

TEST(MpirunCommand, UserChoiceOfSingleCopyMechanismWins) {
  config::JobConfig job = LocalJob();
  job.launch.mpirun_args = {"--mca", "btl_vader_single_copy_mechanism", "cma"};
  Argv argv = BuildMpirunCommand(job, Context()).argv;
  EXPECT_FALSE(HasCopyNone(argv));
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "btl_vader_single_copy_mechanism"), 1);

  MpirunContext ctx = Context();
  ctx.env["OMPI_MCA_btl_vader_single_copy_mechanism"] = "cma";
  EXPECT_FALSE(HasCopyNone(BuildMpirunCommand(LocalJob(), ctx).argv));
  EXPECT_TRUE(HasCopyNone(BuildMpirunCommand(LocalJob(), Context()).argv));
}

TEST(MpirunCommand, MpiBackendUsesHostfileAndPpr) {
  config::JobConfig job = LocalJob();
  job.world.nodes = 2;
  job.world.procs_per_node = 2;
  job.launch.backend = config::Backend::kMpi;
  job.launch.hosts = {{"node-a", 2}, {"10.0.0.7", 4}};
  job.launch.master_port = 31000;
  MpirunContext ctx = Context();
  ctx.euid = 0;
  const MpirunCommand cmd = BuildMpirunCommand(job, ctx);
  const Argv expected =
      Concat({{"/opt/ompi/bin/mpirun", "-np", "4", "--hostfile", "/runs/t-1/hostfile", "--map-by",
               "ppr:2:node", "--bind-to", "none", "--allow-run-as-root", "--mca",
               "btl_vader_single_copy_mechanism", "none"},
              kRingpilotVars,
              {"-x", "PATH"},
              kTrainerTail});
  EXPECT_EQ(cmd.argv, expected);
  EXPECT_EQ(cmd.hostfile_path, "/runs/t-1/hostfile");
  EXPECT_EQ(cmd.hostfile_content, "node-a slots=2\n10.0.0.7 slots=4\n");
  EXPECT_EQ(cmd.master_addr, "node-a");
  EXPECT_EQ(cmd.master_port, 31000);
  EXPECT_EQ(std::find(cmd.argv.begin(), cmd.argv.end(), "--oversubscribe"), cmd.argv.end());
}

TEST(MpirunCommand, MpiBackendWithoutHostsThrows) {
  config::JobConfig job = LocalJob();
  job.launch.backend = config::Backend::kMpi;
  EXPECT_THROW(BuildMpirunCommand(job, Context()), std::invalid_argument);
}

TEST(MpirunCommand, K8sAndSlurmOutsideAnAllocationAreRejected) {
  for (const config::Backend b : {config::Backend::kSlurm, config::Backend::kK8s}) {
    config::JobConfig job = LocalJob();
    job.launch.backend = b;
    EXPECT_THROW(BuildMpirunCommand(job, Context()), std::invalid_argument);
  }
}

TEST(MpirunCommand, SlurmBackendIsMpiOverTheAllocation) {
  config::JobConfig job = LocalJob();
  job.world.nodes = 2;
  job.world.procs_per_node = 2;
  job.launch.backend = config::Backend::kSlurm;
  job.launch.hosts = {{"ignored", 2}};
  MpirunContext ctx = Context();
  ctx.env["SLURM_JOB_ID"] = "77";
  ctx.env["SLURM_JOB_NODELIST"] = "gpu[07-08]";
  ctx.env["SLURM_TASKS_PER_NODE"] = "2(x2)";
  const MpirunCommand cmd = BuildMpirunCommand(job, ctx);
  EXPECT_EQ(cmd.hostfile_content, "gpu07 slots=2\ngpu08 slots=2\n");
  EXPECT_EQ(cmd.master_addr, "gpu07");
  const Argv head(cmd.argv.begin(), cmd.argv.begin() + 7);
  EXPECT_EQ(head, (Argv{"/opt/ompi/bin/mpirun", "-np", "4", "--hostfile", "/runs/t-1/hostfile",
                        "--map-by", "ppr:2:node"}));
  // Too few task slots per node for procs_per_node: one line naming the variable.
  ctx.env["SLURM_TASKS_PER_NODE"] = "1(x2)";
  try {
    BuildMpirunCommand(job, ctx);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_TASKS_PER_NODE"), std::string::npos) << e.what();
  }
}

// A launch.command job: every rank is `ringpilot exec` around the user's program, with
// its log directory, the placement of the job, and the plugin's settings forwarded.
TEST(MpirunCommand, CommandJobRunsTheProgramUnderRingpilotExec) {
  config::JobConfig job = LocalJob();
  job.world.procs_per_node = 2;
  job.world.device = config::Device::kCpu;
  job.placement.bind = config::BindMode::kCores;
  job.metrics.port_base = 9500;
  job.metrics.bind = "0.0.0.0";
  job.launch.command = {"python3", "train.py", "--lr", "0.1"};
  MpirunContext ctx = Context();
  ctx.ringpilot = "/b/bin/ringpilot";
  ctx.env["VIRTUAL_ENV"] = "/venv";
  const MpirunCommand cmd = BuildMpirunCommand(job, ctx);
  const Argv expected =
      Concat({{"/opt/ompi/bin/mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca",
               "btl_vader_single_copy_mechanism", "none"},
              kRingpilotVars,
              {"-x", "PATH"},
              {"-x", "PYTHONUNBUFFERED", "-x", "RINGPILOT_JOB_NAME", "-x", "RINGPILOT_METRICS_BIND",
               "-x", "RINGPILOT_METRICS_PORT_BASE", "-x", "VIRTUAL_ENV"},
              {"/b/bin/ringpilot", "exec", "--log-dir", "/runs/t-1/logs", "--bind", "cores",
               "--device", "cpu", "--", "python3", "train.py", "--lr", "0.1"}});
  EXPECT_EQ(cmd.argv, expected);
  EXPECT_EQ(cmd.env, (base::Environment{{"PYTHONUNBUFFERED", "1"},
                                        {"RINGPILOT_JOB_NAME", "t"},
                                        {"RINGPILOT_METRICS_BIND", "0.0.0.0"},
                                        {"RINGPILOT_METRICS_PORT_BASE", "9500"}}));
  // metrics.file_sd_dir reaches the plugin, which links its discovery file there.
  job.metrics.file_sd_dir = "/shared/file_sd";
  EXPECT_EQ(BuildMpirunCommand(job, ctx).env.at("RINGPILOT_METRICS_FILE_SD_DIR"),
            "/shared/file_sd");
  job.metrics.file_sd_dir = "";
  // No metrics: the plugin stays out; the user's PYTHONUNBUFFERED is theirs.
  job.metrics.enabled = false;
  ctx.env["PYTHONUNBUFFERED"] = "";
  const MpirunCommand off = BuildMpirunCommand(job, ctx);
  const auto dash = std::find(off.argv.begin(), off.argv.end(), "--");
  ASSERT_NE(dash, off.argv.end());
  EXPECT_EQ(*(dash - 1), "--no-nccl-metrics");
  EXPECT_EQ(off.env.count("PYTHONUNBUFFERED"), 0u);
  // mpirun_args still go before the program's launcher.
  job.launch.mpirun_args = {"--tag-output"};
  const Argv with_args = BuildMpirunCommand(job, ctx).argv;
  const auto tag = std::find(with_args.begin(), with_args.end(), "--tag-output");
  ASSERT_NE(tag, with_args.end());
  EXPECT_EQ(*(tag + 1), "/b/bin/ringpilot");
}

}  // namespace
}  // namespace ringpilot::launcher
