#include "slurm/slurm_env.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace ringpilot::slurm {
namespace {

Environment StepEnv() {
  return {{"SLURM_PROCID", "3"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "1"},
          {"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_JOB_ID", "12345"},
          {"SLURM_TASKS_PER_NODE", "2(x2)"}};
}

TEST(ParseSlurmEnv, NotUnderSlurm) {
  EXPECT_FALSE(ParseSlurmEnv({}).has_value());
  EXPECT_FALSE(ParseSlurmEnv({{"SLURM_CONF", "/etc/slurm.conf"}}).has_value());
}

TEST(ParseSlurmEnv, AllocationWithoutTask) {
  // Processes started by mpirun inside a batch script see the allocation, not a task.
  const auto s = ParseSlurmEnv({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[1-2]"}});
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->procid.has_value());
  EXPECT_FALSE(s->ntasks.has_value());
  EXPECT_EQ(s->job_id, 7u);
  EXPECT_EQ(s->nodes, (std::vector<std::string>{"n1", "n2"}));
}

TEST(ParseSlurmEnv, FullStep) {
  const auto s = ParseSlurmEnv(StepEnv());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->procid, 3);
  EXPECT_EQ(s->ntasks, 4);
  EXPECT_EQ(s->localid, 1);
  EXPECT_EQ(s->nodeid, 1);
  EXPECT_EQ(s->nodes, (std::vector<std::string>{"n1", "n2"}));
  ASSERT_TRUE(s->job_id.has_value());
  EXPECT_EQ(*s->job_id, 12345u);
  EXPECT_EQ(s->tasks_per_node, (std::vector<int>{2, 2}));
  EXPECT_EQ(s->tasks_per_node_var, "SLURM_TASKS_PER_NODE");
  EXPECT_EQ(s->LocalTasks(), 2);
}

TEST(ParseSlurmEnv, StepTasksPerNodeWinsOverJob) {
  Environment env = StepEnv();
  env["SLURM_STEP_TASKS_PER_NODE"] = "3,1";
  const auto s = ParseSlurmEnv(env);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->tasks_per_node, (std::vector<int>{3, 1}));
  EXPECT_EQ(s->tasks_per_node_var, "SLURM_STEP_TASKS_PER_NODE");
  EXPECT_EQ(s->LocalTasks(), 1);
}

TEST(ParseSlurmEnv, OldSpellings) {
  const auto s = ParseSlurmEnv({{"SLURM_PROCID", "0"},
                                {"SLURM_NPROCS", "1"},
                                {"SLURM_NODELIST", "gpu[07]"},
                                {"SLURM_JOBID", "9"}});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ntasks, 1);
  EXPECT_EQ(s->nodes, std::vector<std::string>{"gpu07"});
  EXPECT_EQ(s->job_id, 9u);
  EXPECT_EQ(s->localid, -1);
  EXPECT_FALSE(s->LocalTasks().has_value());
}

void ExpectInvalid(const Environment& env, const std::string& fragment) {
  try {
    ParseSlurmEnv(env);
    ADD_FAILURE() << "no exception; expected " << fragment;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ParseSlurmEnv, MalformedValuesNameTheVariable) {
  Environment env = StepEnv();
  env["SLURM_PROCID"] = "x";
  ExpectInvalid(env, "SLURM_PROCID='x'");
  env = StepEnv();
  env.erase("SLURM_NTASKS");
  ExpectInvalid(env, "SLURM_NTASKS is not");
  env = StepEnv();
  env["SLURM_PROCID"] = "4";
  ExpectInvalid(env, "not below SLURM_NTASKS=4");
  env = StepEnv();
  env["SLURM_JOB_NODELIST"] = "n[1-";
  ExpectInvalid(env, "SLURM_JOB_NODELIST: invalid Slurm node list 'n[1-'");
  env = StepEnv();
  env["SLURM_TASKS_PER_NODE"] = "2(x";
  ExpectInvalid(env, "SLURM_TASKS_PER_NODE: invalid");
  env = StepEnv();
  env["SLURM_NODEID"] = "2";
  ExpectInvalid(env, "describes only 2 node(s)");
  env = StepEnv();
  env["SLURM_LOCALID"] = "-1";
  ExpectInvalid(env, "SLURM_LOCALID='-1'");
}

}  // namespace
}  // namespace ringpilot::slurm
