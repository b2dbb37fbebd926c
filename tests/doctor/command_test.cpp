// `ringpilot doctor` command layer: the Prometheus file (promtool-checked where promtool is
// installed), `ringpilot run`'s preflight, and the across-nodes pieces (host list, mpirun
// command, tagged output, consistency checks, JSON and table) with fakes.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "base/environment.h"
#include "base/shell.h"
#include "doctor/command.h"
#include "mpirun/flags.h"
#include "tests/test_util.h"

namespace ringpilot::doctor {
namespace {

using testing::ReadFile;
using testing::RingpilotBinary;
using testing::RunProcess;
using testing::TempDir;

constexpr std::uint64_t kMiB = 1024ull * 1024;

DoctorEnv FakeEnv(const TempDir& tmp, std::uint64_t shm_bytes) {
  DoctorEnv env;
  env.sysfs_root = tmp.path() + "/sys";
  env.proc_root = tmp.path() + "/proc";
  env.dev_root = tmp.path() + "/dev";
  env.self_dir = tmp.path() + "/bin";
  env.cuda_runtime_version = "unknown";
  env.fs_size = [shm_bytes](const std::string&) { return std::optional<std::uint64_t>(shm_bytes); };
  env.memlock_limit = [] { return MemlockLimit{true, 0}; };
  // mpirun "works" only when run with -np (the full check); the quick mode must not call it.
  env.run = [](const std::vector<std::string>& argv, int) {
    CommandResult r;
    if (argv.at(0) == "mpirun") {
      r.started = true;
      r.exit_code = 0;
      r.output = "mpirun (Open MPI) 4.1.4\n";
    }
    return r;
  };
  env.query_driver = [] { return DriverInfo{}; };
  env.load_nccl = [](const std::string&) { return LibraryInfo{}; };
  return env;
}

// promtool from PATH or the places tests/integration/prometheus_rules.sh looks; "" if none.
std::string Promtool() {
  const char* path = std::getenv("PATH");
  std::string found = base::ResolveExecutable("promtool", path ? path : "");
  if (found.empty() && std::filesystem::exists("/usr/bin/promtool")) found = "/usr/bin/promtool";
  return found;
}

const CheckResult* Find(const std::vector<CheckResult>& checks, const std::string& name) {
  for (const CheckResult& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(DoctorPrometheus, OneSeriesPerStatusAndTimestamp) {
  const std::vector<CheckResult> checks = {{"dev_shm", CheckStatus::kFail, "16 MiB", "grow it"},
                                           {"mpi", CheckStatus::kPass, "ok", ""}};
  const std::string text = DoctorPrometheus({{"", checks}}, 1700000000.5);
  EXPECT_NE(text.find("ringpilot_doctor_check_status{check=\"dev_shm\",status=\"FAIL\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ringpilot_doctor_check_status{check=\"dev_shm\",status=\"PASS\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringpilot_doctor_checks{status=\"FAIL\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ringpilot_doctor_checks{status=\"PASS\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ringpilot_doctor_last_run_timestamp_seconds 1700000000.5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE ringpilot_doctor_check_status gauge\n"), std::string::npos);
  EXPECT_EQ(text.find("node="), std::string::npos);
  const std::string nodes = DoctorPrometheus({{"n\"1", checks}, {"*", {}}}, 1);
  EXPECT_NE(nodes.find("{node=\"n\\\"1\",check=\"mpi\",status=\"PASS\"} 1"), std::string::npos)
      << nodes;
}

TEST(DoctorPrometheus, CliWritesFileThatPromtoolAccepts) {
  TempDir tmp;
  const std::string prom = tmp.path() + "/doctor.prom";
  const auto r = RunProcess(
      {RingpilotBinary(), "doctor", "--device", "cpu", "--json", "--metrics-file", prom});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  const std::string text = ReadFile(prom);
  EXPECT_NE(text.find("ringpilot_doctor_check_status{check=\"dev_shm\""), std::string::npos)
      << text;
  EXPECT_NE(text.find("ringpilot_doctor_last_run_timestamp_seconds "), std::string::npos);
  // Atomic: no temp file left beside it.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.exists();
  EXPECT_EQ(files, 1);
  const auto bad = RunProcess(
      {RingpilotBinary(), "doctor", "--device", "cpu", "--prometheus", tmp.path() + "/no/x.prom"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("no/x.prom"), std::string::npos) << bad.err;
  const std::string promtool = Promtool();
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (CI has it)";
  const auto check = RunProcess({"sh", "-c", promtool + " check metrics < " + prom});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

// ---- ringpilot run's preflight ---------------------------------------------------------------

TEST(DoctorPreflight, FailRefusesUnlessForcedAndWritesFiles) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp, 16 * kMiB);
  std::ostringstream err;
  EXPECT_FALSE(RunPreflight(env, config::Device::kCpu, tmp.path(), /*force=*/false, err));
  EXPECT_NE(err.str().find("FAIL dev_shm: /dev/shm is 16 MiB"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("not starting"), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("PASS"), std::string::npos) << err.str();
  const auto doc = nlohmann::json::parse(ReadFile(tmp.path() + "/doctor.json"));
  bool mpi_skipped = false;
  for (const auto& c : doc.at("checks")) {
    if (c.at("name") == "mpi") mpi_skipped = c.at("status") == "SKIP";
  }
  EXPECT_TRUE(mpi_skipped) << doc.dump();  // quick: mpirun not run
  EXPECT_NE(ReadFile(tmp.path() + "/doctor.prom")
                .find("ringpilot_doctor_check_status{check=\"dev_shm\",status=\"FAIL\"} 1"),
            std::string::npos);
  std::ostringstream forced;
  EXPECT_TRUE(RunPreflight(env, config::Device::kCpu, tmp.path(), /*force=*/true, forced));
  EXPECT_NE(forced.str().find("overridden by --force"), std::string::npos) << forced.str();
  std::ostringstream fine;
  EXPECT_TRUE(
      RunPreflight(FakeEnv(tmp, 8192 * kMiB), config::Device::kCpu, tmp.path(), false, fine));
}

// A launch.command job: the trainer's build is not checked (its absence is no warning).
TEST(DoctorPreflight, ProgramJobSkipsTheTrainerChecks) {
  TempDir tmp;
  DoctorEnv env = FakeEnv(tmp, 8192 * kMiB);
  env.program = true;
  std::ostringstream err;
  EXPECT_TRUE(RunPreflight(env, config::Device::kCpu, tmp.path(), false, err));
  EXPECT_EQ(err.str().find("trainer"), std::string::npos) << err.str();
  const auto doc = nlohmann::json::parse(ReadFile(tmp.path() + "/doctor.json"));
  int skipped = 0;
  for (const auto& c : doc.at("checks")) {
    const std::string name = c.at("name");
    if (name == "cuda_arch" || name == "trainer_libraries" || name == "library_versions") {
      EXPECT_EQ(c.at("status"), "SKIP") << name;
      EXPECT_EQ(c.at("detail"),
                "the job runs its own program (launch.command), not ringpilot-trainer");
      ++skipped;
    }
  }
  EXPECT_EQ(skipped, 3) << doc.dump();
}

TEST(DoctorPreflight, QuickRunIsFast) {
  TempDir tmp;
  const auto t0 = std::chrono::steady_clock::now();
  std::ostringstream err;
  RunPreflight(SystemDoctorEnv(), config::Device::kAuto, tmp.path(), true, err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.0) << err.str();
  EXPECT_TRUE(std::filesystem::exists(tmp.path() + "/doctor.json"));
}

// ---- across nodes ------------------------------------------------------------------------------

// Under mpirun a non-zero exit aborts the job and kills the nodes still checking, so a node
// with a FAIL exits 0 and tells its verdict in the line the coordinator reads.
TEST(DoctorNodes, ANodeReportWithAFailExitsZeroAndCarriesTheFail) {
  TempDir tmp;
  DoctorArgs args;
  args.device = "cpu";
  args.node_report = true;
  std::ostringstream out;
  EXPECT_EQ(RunDoctorCommand(args, FakeEnv(tmp, 16 * kMiB), out), 0);
  const auto doc = nlohmann::json::parse(out.str());
  std::string shm;
  for (const auto& c : doc.at("checks")) {
    if (c.at("name") == "dev_shm") shm = c.at("status");
  }
  EXPECT_EQ(shm, "FAIL") << out.str();
  args.node_report = false;
  std::ostringstream alone;
  EXPECT_EQ(RunDoctorCommand(args, FakeEnv(tmp, 16 * kMiB), alone), 1);  // not under mpirun
}

TEST(DoctorNodes, HostListAndMpirunCommand) {
  const auto hosts = ParseHostList("n1:2,10.0.0.2");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "n1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_THROW(ParseHostList(""), std::invalid_argument);
  EXPECT_THROW(ParseHostList("n1:0"), std::invalid_argument);
  EXPECT_THROW(ParseHostList("n1,,n2"), std::invalid_argument);
  const base::Environment env = {{"PATH", "/bin"}, {"NCCL_DEBUG", "INFO"}, {"HOME", "/root"}};
  const auto argv = DoctorMpirunArgv("mpirun", 2, "/t/hostfile", {"--mca", "plm_rsh_agent", "a"},
                                     "/opt/ringpilot", "cpu", 0, env);
  EXPECT_EQ(base::ShellJoin(argv),
            "mpirun -np 2 --hostfile /t/hostfile -npernode 1 --tag-output --bind-to none "
            "--allow-run-as-root --mca btl_vader_single_copy_mechanism none -x NCCL_DEBUG -x PATH "
            "--mca plm_rsh_agent a /opt/ringpilot doctor --node-report --device cpu");
}

TEST(DoctorNodes, JobsSingleCopyChoiceReplacesTheDefault) {
  // A job whose mpirun_args choose CMA: a second value would make mpirun refuse to start.
  const auto argv = DoctorMpirunArgv("mpirun", 2, "/t/hostfile",
                                     {"--mca", "btl_vader_single_copy_mechanism", "cma"},
                                     "/opt/ringpilot", "cpu", 1000, base::Environment{});
  EXPECT_EQ(base::ShellJoin(argv),
            "mpirun -np 2 --hostfile /t/hostfile -npernode 1 --tag-output --bind-to none "
            "--mca btl_vader_single_copy_mechanism cma /opt/ringpilot doctor --node-report "
            "--device cpu");
}

TEST(DoctorNodes, SplitsTaggedOutputByRank) {
  const auto by_rank = SplitTaggedOutput(
      "[1,1]<stdout>:{\"b\": 1}\n[1,0]<stderr>:warning\n[1,0]<stdout>:{\"a\": 0}\nplain\n"
      "[1,0]<stdout>:second\n");
  ASSERT_EQ(by_rank.size(), 2u);
  EXPECT_EQ(by_rank.at(0), "{\"a\": 0}\nsecond\n");
  EXPECT_EQ(by_rank.at(1), "{\"b\": 1}\n");
}

TEST(DoctorNodes, JoinsALineSplitIntoTaggedFragments) {
  // mpirun tags every forwarded fragment; a long line can be cut mid-way, even with
  // another rank's fragment in between.
  const auto by_rank = SplitTaggedOutput(
      "[1,0]<stdout>:{\"a\": [1,[1,1]<stdout>:{\"b\": 2}\n[1,0]<stdout>: 2]}\n"
      "[1,1]<stderr>:noise\n");
  ASSERT_EQ(by_rank.size(), 2u);
  EXPECT_EQ(by_rank.at(0), "{\"a\": [1, 2]}\n");
  EXPECT_EQ(by_rank.at(1), "{\"b\": 2}\n");
}

NodeReport Node(const std::string& host, const std::string& driver, int gpus) {
  NodeReport n;
  n.host = host;
  n.facts = {{"driver", driver}, {"nccl", "2.21.5"}, {"gpu_count", gpus}, {"torch", ""}};
  n.checks = {{"dev_shm", CheckStatus::kPass, "8 GiB", ""}};
  return n;
}

TEST(DoctorNodes, ConsistencyChecksNameTheOddNode) {
  const std::vector<NodeReport> nodes = {Node("n1", "580.65.06", 8), Node("n2", "580.65.06", 8),
                                         Node("n3", "550.54.15", 7)};
  const auto checks = ConsistencyChecks(nodes, {"n4"});
  const CheckResult* reported = Find(checks, "nodes_reported");
  ASSERT_NE(reported, nullptr);
  EXPECT_EQ(reported->status, CheckStatus::kFail);
  EXPECT_NE(reported->detail.find("n4"), std::string::npos);
  const CheckResult* driver = Find(checks, "same_driver");
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->status, CheckStatus::kFail);
  EXPECT_NE(driver->detail.find("550.54.15 on n3"), std::string::npos) << driver->detail;
  EXPECT_NE(driver->detail.find("580.65.06 on n1, n2"), std::string::npos) << driver->detail;
  EXPECT_FALSE(driver->hint.empty());
  EXPECT_EQ(Find(checks, "same_gpu_count")->status, CheckStatus::kFail);
  EXPECT_EQ(Find(checks, "same_nccl")->status, CheckStatus::kPass);
  EXPECT_EQ(Find(checks, "same_torch")->status, CheckStatus::kSkip);  // unknown everywhere
  EXPECT_EQ(Find(ConsistencyChecks({nodes[0], nodes[1]}, {}), "same_driver")->status,
            CheckStatus::kPass);

  const auto doc = NodesJson(nodes, checks);
  EXPECT_EQ(doc.at("nodes").size(), 3u);
  EXPECT_EQ(doc["nodes"]["n3"]["facts"]["driver"], "550.54.15");
  ASSERT_TRUE(doc.at("checks").is_array());
  EXPECT_EQ(doc["checks"][0]["node"], "n1");
  EXPECT_EQ(doc["checks"][0]["name"], "dev_shm");
  EXPECT_EQ(doc["checks"].back()["node"], "*");
  std::ostringstream table;
  RenderNodesTable(nodes, checks, table);
  EXPECT_NE(table.str().find("NODE"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("n3    dev_shm"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("3 nodes;"), std::string::npos) << table.str();
}

TEST(DoctorNodes, BadHostsOrJobIsExitTwo) {
  const auto bad = RunProcess({RingpilotBinary(), "doctor", "--hosts", "a b"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("HOST:SLOTS"), std::string::npos) << bad.err;
  TempDir tmp;
  const std::string job = tmp.path() + "/job.yaml";
  testing::WriteFile(job, "name: j\nmodel: {name: resnet18-cifar}\n");
  const auto local = RunProcess({RingpilotBinary(), "doctor", "--job", job});
  EXPECT_EQ(local.exit_code, 2) << local.err;
  EXPECT_NE(local.err.find("backend mpi"), std::string::npos) << local.err;
}

// One "node" (this machine) through the real mpirun: the table has a node column and the
// consistency rows.
TEST(DoctorNodes, LocalhostThroughRealMpirun) {
  const char* path = std::getenv("PATH");
  if (base::ResolveExecutable("mpirun", path ? path : "").empty()) GTEST_SKIP() << "no mpirun";
  const auto r = RunProcess(
      {RingpilotBinary(), "doctor", "--hosts", "localhost", "--json", "--device", "cpu"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err << r.out;
  ASSERT_FALSE(r.out.empty()) << "exit " << r.exit_code << ", stderr: " << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc.at("nodes").size(), 1u) << r.out;
  bool reported = false;
  for (const auto& c : doc.at("checks")) {
    if (c.at("name") == "nodes_reported") reported = c.at("status") == "PASS";
    EXPECT_FALSE(c.at("node").get<std::string>().empty());
  }
  EXPECT_TRUE(reported) << r.out;
}

}  // namespace
}  // namespace ringpilot::doctor
