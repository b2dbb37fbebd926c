// Hosts of a Slurm allocation for `ringpilot run` with launch.backend slurm.
#include "slurm/allocation.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace ringpilot::slurm {
namespace {

// The variables a batch shell sees (from a real slurmd 22.05 with -N 2 --ntasks-per-node=2).
Environment BatchShell() {
  return {{"SLURM_JOB_ID", "4"},
          {"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_PROCID", "0"},
          {"SLURM_NODEID", "0"}};
}

std::string ErrorOf(const Environment& env, int nodes, int ppn) {
  try {
    AllocationHosts(env, nodes, ppn);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(AllocationHosts, NodesInOrderWithProcsPerNodeSlots) {
  const auto hosts = AllocationHosts(BatchShell(), 2, 2);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "n1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].host, "n2");
  EXPECT_EQ(hosts[1].slots, 2);
}

TEST(AllocationHosts, UsesTheFirstNodesOfALargerAllocation) {
  Environment env = BatchShell();
  env["SLURM_JOB_NODELIST"] = "gpu[08-10]";
  env["SLURM_TASKS_PER_NODE"] = "8(x3)";
  const auto hosts = AllocationHosts(env, 2, 4);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "gpu08");
  EXPECT_EQ(hosts[1].host, "gpu09");
  EXPECT_EQ(hosts[1].slots, 4);
}

TEST(AllocationHosts, AllocationTasksNotTheStepsInsideAStep) {
  Environment env = BatchShell();
  env["SLURM_STEP_TASKS_PER_NODE"] = "1(x2)";  // `srun -n2 ringpilot run ...`
  EXPECT_EQ(AllocationHosts(env, 2, 2).size(), 2u);
}

TEST(AllocationHosts, OutsideAnAllocation) {
  const std::string e = ErrorOf({{"HOME", "/root"}}, 1, 1);
  EXPECT_NE(e.find("not inside a Slurm allocation"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  // A node list without a job id is not an allocation either.
  EXPECT_NE(ErrorOf({{"SLURM_JOB_NODELIST", "n1"}}, 1, 1).find("not inside"), std::string::npos);
}

TEST(AllocationHosts, TooFewNodesOrSlots) {
  EXPECT_EQ(ErrorOf(BatchShell(), 3, 2),
            "launch.backend slurm: the allocation has 2 node(s) but world.nodes is 3");
  EXPECT_EQ(ErrorOf(BatchShell(), 2, 4),
            "launch.backend slurm: node n1 has 2 task slot(s) (SLURM_TASKS_PER_NODE) but "
            "world.procs_per_node is 4");
}

TEST(AllocationHosts, MalformedVariableNamesIt) {
  Environment env = BatchShell();
  env["SLURM_JOB_NODELIST"] = "n[1-";
  EXPECT_NE(ErrorOf(env, 1, 1).find("SLURM_JOB_NODELIST"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::slurm
