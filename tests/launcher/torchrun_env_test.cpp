#include <map>
#include <string>

#include <gtest/gtest.h>

#include "launcher/torchrun_env.h"

namespace ringpilot::launcher {
namespace {

base::Environment OmpiEnv(int rank, int size, int local, int local_size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          // Not the node index: must not leak into NODE_RANK.
          {"OMPI_COMM_WORLD_NODE_RANK", "7"},
          {"PATH", "/usr/bin"}};
}

void ExpectContract(const base::Environment& out, const std::string& rank, const std::string& world,
                    const std::string& local, const std::string& local_world,
                    const std::string& node, const std::string& addr, const std::string& port) {
  EXPECT_EQ(out.at("RANK"), rank);
  EXPECT_EQ(out.at("WORLD_SIZE"), world);
  EXPECT_EQ(out.at("LOCAL_RANK"), local);
  EXPECT_EQ(out.at("LOCAL_WORLD_SIZE"), local_world);
  EXPECT_EQ(out.at("NODE_RANK"), node);
  EXPECT_EQ(out.at("GROUP_RANK"), node);
  EXPECT_EQ(out.at("MASTER_ADDR"), addr);
  EXPECT_EQ(out.at("MASTER_PORT"), port);
}

std::string ErrorOf(const base::Environment& env) {
  try {
    ComputeTorchrunEnv(env);
  } catch (const RankEnvError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TorchrunEnv, OpenMpiSingleNode) {
  const base::Environment out = ComputeTorchrunEnv(OmpiEnv(1, 2, 1, 2));
  ExpectContract(out, "1", "2", "1", "2", "0", "127.0.0.1", "29500");
  EXPECT_EQ(out.at("PATH"), "/usr/bin");  // the rest of the environment is kept
}

TEST(TorchrunEnv, OpenMpiMultiNodeNeedsMasterAddr) {
  EXPECT_NE(ErrorOf(OmpiEnv(5, 8, 1, 4)).find("cannot choose MASTER_ADDR"), std::string::npos);
  base::Environment env = OmpiEnv(5, 8, 1, 4);
  env["RINGPILOT_MASTER_ADDR"] = "node-a";
  env["RINGPILOT_MASTER_PORT"] = "31000";
  ExpectContract(ComputeTorchrunEnv(env), "5", "8", "1", "4", "1", "node-a", "31000");
}

TEST(TorchrunEnv, OpenMpiInsideSlurmAllocationUsesItsNodesAndPort) {
  base::Environment env = OmpiEnv(6, 8, 2, 4);
  env["SLURM_JOB_NODELIST"] = "gpu[07-08]";
  env["SLURM_JOB_ID"] = "123456";
  ExpectContract(ComputeTorchrunEnv(env), "6", "8", "2", "4", "1", "gpu07", "23456");
}

TEST(TorchrunEnv, UnevenOpenMpiLayoutCannotDeriveNodeRank) {
  base::Environment env = OmpiEnv(2, 3, 0, 2);
  env["MASTER_ADDR"] = "h";
  EXPECT_NE(ErrorOf(env).find("cannot derive NODE_RANK"), std::string::npos);
  env["NODE_RANK"] = "1";
  const base::Environment out = ComputeTorchrunEnv(env);
  EXPECT_EQ(out.at("NODE_RANK"), "1");
  EXPECT_EQ(out.at("GROUP_RANK"), "1");
}

TEST(TorchrunEnv, SlurmStep) {
  const base::Environment env = {{"SLURM_PROCID", "3"},
                                 {"SLURM_NTASKS", "4"},
                                 {"SLURM_LOCALID", "1"},
                                 {"SLURM_NODEID", "1"},
                                 {"SLURM_JOB_NODELIST", "n[1-2]"},
                                 {"SLURM_JOB_ID", "40007"},
                                 {"SLURM_TASKS_PER_NODE", "2(x2)"}};
  ExpectContract(ComputeTorchrunEnv(env), "3", "4", "1", "2", "1", "n1", "20007");
}

TEST(TorchrunEnv, SlurmUnevenTasksPerNode) {
  const base::Environment env = {{"SLURM_PROCID", "4"},
                                 {"SLURM_NTASKS", "5"},
                                 {"SLURM_LOCALID", "1"},
                                 {"SLURM_NODEID", "1"},
                                 {"SLURM_JOB_NODELIST", "a[1-2]"},
                                 {"SLURM_STEP_TASKS_PER_NODE", "3,2"},
                                 {"SLURM_TASKS_PER_NODE", "1(x2)"}};
  ExpectContract(ComputeTorchrunEnv(env), "4", "5", "1", "2", "1", "a1", "29500");
}

TEST(TorchrunEnv, SlurmWithoutTasksPerNodeIsAnError) {
  const base::Environment env = {
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}};
  EXPECT_NE(ErrorOf(env).find("SLURM_TASKS_PER_NODE"), std::string::npos);
}

TEST(TorchrunEnv, MalformedSlurmNodelistIsAnError) {
  base::Environment env = OmpiEnv(0, 1, 0, 1);
  env["SLURM_JOB_NODELIST"] = "n[2-1]";
  EXPECT_NE(ErrorOf(env).find("SLURM_JOB_NODELIST: invalid Slurm node list 'n[2-1]'"),
            std::string::npos);
}

TEST(TorchrunEnv, PmiHydra) {
  const base::Environment env = {{"PMI_RANK", "2"},
                                 {"PMI_SIZE", "4"},
                                 {"MPI_LOCALRANKID", "0"},
                                 {"MPI_LOCALNRANKS", "2"},
                                 {"RINGPILOT_MASTER_ADDR", "h0"}};
  ExpectContract(ComputeTorchrunEnv(env), "2", "4", "0", "2", "1", "h0", "29500");
  EXPECT_NE(ErrorOf({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}}).find("MPI_LOCALRANKID is not"),
            std::string::npos);
}

TEST(TorchrunEnv, OpenMpiWinsOverSlurmRanks) {
  // mpirun inside an allocation: ranks see the orted's SLURM_PROCID (a node index).
  base::Environment env = OmpiEnv(3, 4, 1, 2);
  env.insert({{"SLURM_PROCID", "1"},
              {"SLURM_NTASKS", "2"},
              {"SLURM_LOCALID", "0"},
              {"SLURM_NODEID", "1"},
              {"SLURM_TASKS_PER_NODE", "1(x2)"},
              {"SLURM_JOB_NODELIST", "n[1-2]"}});
  ExpectContract(ComputeTorchrunEnv(env), "3", "4", "1", "2", "1", "n1", "29500");
}

TEST(TorchrunEnv, UserValuesAreKept) {
  base::Environment env = OmpiEnv(1, 2, 1, 2);
  env["MASTER_PORT"] = "1234";
  env["RANK"] = "9";
  const base::Environment out = ComputeTorchrunEnv(env);
  EXPECT_EQ(out.at("MASTER_PORT"), "1234");
  EXPECT_EQ(out.at("RANK"), "9");
  EXPECT_EQ(out.at("WORLD_SIZE"), "2");
}

TEST(TorchrunEnv, NoLauncherEnvironment) {
  EXPECT_EQ(ErrorOf({{"PATH", "/bin"}}), kNoRankEnvMessage);
  EXPECT_EQ(std::string(kNoRankEnvMessage),
            "ringpilot exec: no MPI or Slurm rank environment (run it under mpirun, srun or "
            "ringpilot run)");
}

TEST(TorchrunEnv, MalformedOrInconsistentValues) {
  base::Environment env = OmpiEnv(0, 2, 0, 2);
  env["OMPI_COMM_WORLD_RANK"] = "x1";
  EXPECT_NE(ErrorOf(env).find("OMPI_COMM_WORLD_RANK='x1'"), std::string::npos);
  EXPECT_NE(ErrorOf(OmpiEnv(2, 2, 0, 2)).find("rank 2 >= world size 2"), std::string::npos);
  EXPECT_NE(ErrorOf(OmpiEnv(0, 2, 2, 2)).find("local rank 2"), std::string::npos);
  env = OmpiEnv(0, 2, 0, 2);
  env.erase("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_NE(ErrorOf(env).find("OMPI_COMM_WORLD_LOCAL_SIZE is not"), std::string::npos);
  env = OmpiEnv(0, 2, 0, 2);
  env["RINGPILOT_MASTER_PORT"] = "70000";
  EXPECT_NE(ErrorOf(env).find("RINGPILOT_MASTER_PORT='70000'"), std::string::npos);
}

// Every variable torch's LocalElasticAgent gives a worker (local_elastic_agent.py,
// _start_workers) and run.py's OMP_NUM_THREADS, for rank 5 of 8 on 2 nodes of 4.
TEST(TorchrunEnv, TheWholeTorchrunContract) {
  base::Environment env = OmpiEnv(5, 8, 1, 4);
  env["RINGPILOT_MASTER_ADDR"] = "node-a";
  env["RINGPILOT_RESTART"] = "2";
  env["RINGPILOT_MAX_RESTARTS"] = "3";
  env["RINGPILOT_RUN_DIR"] = "/runs/mnist-20260101-120000/";
  const base::Environment out = ComputeTorchrunEnv(env);
  const std::map<std::string, std::string> expected = {
      {"RANK", "5"},
      {"WORLD_SIZE", "8"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"NODE_RANK", "1"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", "5"},
      {"ROLE_WORLD_SIZE", "8"},
      {"MASTER_ADDR", "node-a"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RESTART_COUNT", "2"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RUN_ID", "mnist-20260101-120000"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"OMP_NUM_THREADS", "1"},
      {"RINGPILOT_ATTEMPT", "3"},
  };
  for (const auto& [name, value] : expected) {
    ASSERT_TRUE(out.count(name)) << name;
    EXPECT_EQ(out.at(name), value) << name;
  }
}

TEST(TorchrunEnv, ContractDefaultsOutsideRingpilotRunAndUserValuesWin) {
  base::Environment env = OmpiEnv(0, 1, 0, 1);
  base::Environment out = ComputeTorchrunEnv(env);
  EXPECT_EQ(out.at("TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_EQ(out.at("TORCHELASTIC_MAX_RESTARTS"), "0");
  EXPECT_EQ(out.at("TORCHELASTIC_RUN_ID"), "none");  // torchrun's default rdzv id
  EXPECT_EQ(out.at("RINGPILOT_ATTEMPT"), "1");
  EXPECT_EQ(out.at("GROUP_WORLD_SIZE"), "1");
  EXPECT_EQ(out.count("OMP_NUM_THREADS"), 0u) << "one local rank: torchrun leaves it unset";
  env["OMP_NUM_THREADS"] = "6";
  env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "3";
  env["TORCHELASTIC_RUN_ID"] = "mine";
  env["SLURM_JOB_ID"] = "4242";
  out = ComputeTorchrunEnv(env);
  EXPECT_EQ(out.at("OMP_NUM_THREADS"), "6");
  EXPECT_EQ(out.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
  EXPECT_EQ(out.at("TORCHELASTIC_RUN_ID"), "mine");
  env.erase("TORCHELASTIC_RUN_ID");
  EXPECT_EQ(ComputeTorchrunEnv(env).at("TORCHELASTIC_RUN_ID"), "4242");  // the Slurm job
  env["RINGPILOT_RESTART"] = "x";
  EXPECT_EQ(ErrorOf(env), "ringpilot exec: RINGPILOT_RESTART='x' is not a non-negative integer");
}

TEST(TorchrunEnv, SlurmStepGivesItsNodeCount) {
  base::Environment env = {{"SLURM_PROCID", "3"},
                           {"SLURM_NTASKS", "5"},
                           {"SLURM_LOCALID", "0"},
                           {"SLURM_NODEID", "1"},
                           {"SLURM_JOB_NODELIST", "n[1-2]"},
                           {"SLURM_JOB_ID", "9"},
                           {"SLURM_STEP_TASKS_PER_NODE", "3,2"}};
  const base::Environment out = ComputeTorchrunEnv(env);
  EXPECT_EQ(out.at("GROUP_WORLD_SIZE"), "2");  // uneven: from Slurm, not WORLD / LOCAL
  EXPECT_EQ(out.at("GROUP_RANK"), "1");
  EXPECT_EQ(out.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(out.at("OMP_NUM_THREADS"), "1");
}

}  // namespace
}  // namespace ringpilot::launcher
