// `ringpilot topo` end to end: this machine (probed) and every snapshot fixture.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "tests/topology/fixtures.h"
#include "topology/node_topology.h"

namespace ringpilot::topology {
namespace {

using ringpilot::testing::RingpilotBinary;
using ringpilot::testing::RunProcess;
using ringpilot::testing::TempDir;
using ringpilot::testing::WriteFile;
using testing::FixturePath;

TEST(TopoCli, ThisMachineTextReportsCpusNumaAndNics) {
  const auto r = RunProcess({RingpilotBinary(), "topo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NUMA nodes:\n  node "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NICs:\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPUs: none"), std::string::npos) << r.out;
}

TEST(TopoCli, ThisMachineJsonIsASnapshot) {
  const auto r = RunProcess({RingpilotBinary(), "topo", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const NodeTopology t = FromJson(nlohmann::json::parse(r.out));
  EXPECT_FALSE(t.numa_nodes.empty());
  // hwloc reports the CPUs this process may use (a cgroup cpuset can hide some).
  EXPECT_GE(t.AllCpus().size(), 1u);
  EXPECT_LE(t.AllCpus().size(), static_cast<std::size_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_EQ(t.source, "probe");
  // The snapshot renders again through --from.
  TempDir dir;
  WriteFile(dir.path() + "/snap.json", r.out);
  const auto again = RunProcess({RingpilotBinary(), "topo", "--from", dir.path() + "/snap.json"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("NUMA nodes:"), std::string::npos);
}

class TopoCliFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(TopoCliFixture, RendersTextJsonAndDot) {
  const std::string snap = FixturePath(GetParam());
  const auto text = RunProcess({RingpilotBinary(), "topo", "--from", snap});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(text.err.empty()) << text.err;
  const auto json = RunProcess({RingpilotBinary(), "topo", "--json", "--from", snap});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(ToJson(FromJson(nlohmann::json::parse(json.out))).dump(),
            ToJson(LoadSnapshot(snap)).dump());
  const auto dot = RunProcess({RingpilotBinary(), "topo", "--dot", "--from", snap});
  ASSERT_EQ(dot.exit_code, 0) << dot.err;
  EXPECT_EQ(dot.out.rfind("graph ", 0), 0u);
  EXPECT_EQ(dot.out.substr(dot.out.size() - 2), "}\n");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TopoCliFixture,
                         ::testing::Values("dgx-h100.json", "pcie-4gpu-2socket.json",
                                           "cpu-only.json", "h200x2.json", "h200x2-captured.json",
                                           "h100x1-captured.json", "h200x4-captured.json"));

TEST(TopoCli, MatrixMatchesNvidiaSmiForH200x2) {
  const auto r = RunProcess({RingpilotBinary(), "topo", "--from", FixturePath("h200x2.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GPU0   X      NV18   0-31            0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU1   NV18   X      0-31            0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("18 links x 26.5625 GB/s = 478.1 GB/s per direction\n"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("NVSwitch"), std::string::npos) << "direct links: " << r.out;
}

TEST(TopoCli, DgxMatrixShowsNicPaths) {
  const auto r = RunProcess({RingpilotBinary(), "topo", "--from", FixturePath("dgx-h100.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.out.find("GPU4   NV18   NV18   NV18   NV18   X      NV18   NV18   NV18   SYS    SYS    "
                 "SYS    SYS    PIX    NODE   NODE   NODE   56-111,168-223  1\n"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  NIC4: mlx5_4\n"), std::string::npos);
  EXPECT_NE(r.out.find("  every one of 28 GPU pairs: 18 links x 26.5625 GB/s = 478.1 GB/s per "
                       "direction through NVSwitch (each GPU's total, shared by its peers)\n"),
            std::string::npos)
      << r.out;
  const auto dot =
      RunProcess({RingpilotBinary(), "topo", "--dot", "--from", FixturePath("dgx-h100.json")});
  EXPECT_NE(dot.out.find("gpu0 -- gpu1 [label=\"NV18 (NVSwitch)\""), std::string::npos) << dot.out;
}

TEST(TopoCli, BadSnapshotsExitTwoWithOneLine) {
  TempDir dir;
  const std::string truncated = dir.path() + "/truncated.json";
  WriteFile(truncated, R"({"version": 1, "hostname": "h", "numa_nodes": [)");
  const std::string bad_field = dir.path() + "/bad.json";
  WriteFile(bad_field, R"({"version": 1, "hostname": "h", "numa_nodes": [], "gpus": [],
                           "gpu_links": [], "nics": [{"name": "eth0"}]})");
  for (const std::string& path : {truncated, bad_field, dir.path() + "/missing.json"}) {
    const auto r = RunProcess({RingpilotBinary(), "topo", "--from", path});
    EXPECT_EQ(r.exit_code, 2) << path;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err.rfind("ringpilot topo: " + path + ": ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  const auto r = RunProcess({RingpilotBinary(), "topo", "--from", bad_field});
  EXPECT_EQ(r.err, "ringpilot topo: " + bad_field + ": nics[0].kind: missing\n");
}

}  // namespace
}  // namespace ringpilot::topology
