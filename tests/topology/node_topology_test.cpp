#include "topology/node_topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tests/topology/fixtures.h"

namespace ringpilot::topology {
namespace {

using testing::Fixture;
using testing::FixturePath;

TEST(CpuList, FormatsAndParsesRanges) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5, 3, 4, 4}), "3-5");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(ParseCpuList("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList("7\n"), (std::vector<int>{7}));
  EXPECT_TRUE(ParseCpuList("").empty());
  EXPECT_THROW(ParseCpuList("3-1"), std::invalid_argument);
  EXPECT_THROW(ParseCpuList("a-b"), std::invalid_argument);
  EXPECT_THROW(ParseCpuList("1,,2"), std::invalid_argument);
}

TEST(PciBusId, Normalizes) {
  EXPECT_EQ(NormalizePciBusId("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:AB:00.1"), "0000:ab:00.1");
  EXPECT_EQ(NormalizePciBusId("18:00.0"), "0000:18:00.0");
  EXPECT_EQ(NormalizePciBusId("virtio2"), "");
  EXPECT_EQ(NormalizePciBusId("0000:18:00.0x"), "");
}

TEST(LinkClass, RoundTripsNames) {
  for (const char* name : {"PIX", "PXB", "PHB", "NODE", "SYS", "unknown"}) {
    ASSERT_TRUE(ParseLinkClass(name)) << name;
    EXPECT_EQ(ToString(*ParseLinkClass(name)), name);
  }
  EXPECT_FALSE(ParseLinkClass("NV18"));
  EXPECT_LT(LinkClass::kPix, LinkClass::kSys);
}

class FixtureRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureRoundTrip, JsonRoundTripIsLossless) {
  const NodeTopology topo = Fixture(GetParam());
  const std::string once = ToJson(topo).dump();
  const NodeTopology again = FromJson(nlohmann::json::parse(once));
  EXPECT_EQ(ToJson(again).dump(), once);
  // The fixture file itself is in the writer's format and order.
  std::ifstream in(FixturePath(GetParam()));
  const nlohmann::ordered_json file = nlohmann::ordered_json::parse(in);
  EXPECT_EQ(file.dump(), once);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureRoundTrip,
                         ::testing::Values("dgx-h100.json", "pcie-4gpu-2socket.json",
                                           "cpu-only.json", "h200x2.json", "h200x2-captured.json",
                                           "h100x1-captured.json", "h200x4-captured.json"));

TEST(Fixtures, DgxH100HasNvSwitchAndEightNdrNics) {
  const NodeTopology t = Fixture("dgx-h100.json");
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.nics.size(), 8u);
  ASSERT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.gpu_links.size(), 28u);
  for (const GpuLink& l : t.gpu_links) {
    EXPECT_EQ(l.Label(), "NV18");
    EXPECT_TRUE(l.via_nvswitch);
    EXPECT_DOUBLE_EQ(l.nvlink_bytes_per_second_per_link, 26.5625e9);
    EXPECT_DOUBLE_EQ(l.NvlinkBytesPerSecond(), 478.125e9);
  }
  for (const Nic& n : t.nics) {
    EXPECT_EQ(n.kind, NicKind::kInfiniBand);
    EXPECT_TRUE(n.IsUp());
    EXPECT_DOUBLE_EQ(n.rate_bytes_per_second, 400e9 / 8);
  }
  EXPECT_EQ(t.FindGpu(3)->nic_paths.at("mlx5_3"), LinkClass::kPix);
  EXPECT_EQ(t.FindGpu(3)->nic_paths.at("mlx5_0"), LinkClass::kNode);
  EXPECT_EQ(t.FindGpu(3)->nic_paths.at("mlx5_4"), LinkClass::kSys);
  EXPECT_EQ(t.FindNuma(1)->cpus.size(), 112u);
  EXPECT_EQ(t.FindNic("mlx5_0")->nic_paths.at("mlx5_3"), LinkClass::kNode);
  EXPECT_EQ(t.FindNic("mlx5_0")->nic_paths.at("mlx5_4"), LinkClass::kSys);
  EXPECT_EQ(t.FindNic("mlx5_0")->nic_paths.count("mlx5_0"), 0u);
}

TEST(Fixtures, PcieServerHasPixPairsAndSysAcrossSockets) {
  const NodeTopology t = Fixture("pcie-4gpu-2socket.json");
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_EQ(t.FindLink(0, 1)->Label(), "PIX");
  EXPECT_EQ(t.FindLink(3, 2)->Label(), "PIX");
  EXPECT_EQ(t.FindLink(1, 2)->Label(), "SYS");
  EXPECT_EQ(t.FindLink(0, 3)->Label(), "SYS");
  EXPECT_FALSE(t.FindLink(0, 1)->IsNvlink());
  EXPECT_EQ(t.nics.size(), 2u);
  EXPECT_NE(t.FindNic("mlx5_0")->numa_node, t.FindNic("mlx5_1")->numa_node);
}

TEST(Fixtures, H200x2FollowsNvidiaSmiTopo) {
  const NodeTopology t = Fixture("h200x2.json");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.FindLink(0, 1)->Label(), "NV18");
  EXPECT_NEAR(t.FindLink(0, 1)->nvlink_bytes_per_second_per_link, 26.6e9, 0.1e9);
  for (const Gpu& g : t.gpus) {
    EXPECT_EQ(g.name, "NVIDIA H200");
    EXPECT_EQ(g.memory_bytes, 143771ull << 20);
    EXPECT_EQ(g.numa_node, 0);
  }
  EXPECT_EQ(FormatCpuList(t.FindNuma(0)->cpus), "0-31");
  EXPECT_EQ(t.source, "hand-written from nvidia-smi topo -m on nvidia-h200-x2, 2026-11-21");
}

TEST(Fixtures, CpuOnlyHasNoGpus) {
  const NodeTopology t = Fixture("cpu-only.json");
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_EQ(t.numa_nodes.size(), 2u);
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].kind, NicKind::kEthernet);
  EXPECT_EQ(t.AllCpus().size(), 64u);
}

// ---- errors: one line naming the field --------------------------------------------

std::string ErrorOf(const std::string& text) {
  try {
    FromJson(nlohmann::json::parse(text));
  } catch (const SnapshotError& e) {
    return e.what();
  }
  return "(no error)";
}

nlohmann::json Minimal() {
  return nlohmann::json::parse(R"({"version": 1, "hostname": "h", "numa_nodes": [],
      "gpus": [], "gpu_links": [], "nics": []})");
}

TEST(SnapshotErrors, NameTheField) {
  EXPECT_EQ(ErrorOf(Minimal().dump()), "(no error)");
  auto doc = Minimal();
  doc.erase("hostname");
  EXPECT_EQ(ErrorOf(doc.dump()), "hostname: missing");
  doc = Minimal();
  doc["version"] = 7;
  EXPECT_EQ(ErrorOf(doc.dump()), "version: unsupported version 7 (this build reads 1)");
  doc = Minimal();
  doc["numa_nodes"] = {{{"id", 0}, {"cpus", "0-x"}, {"memory_bytes", 1}}};
  EXPECT_EQ(ErrorOf(doc.dump()).rfind("numa_nodes[0].cpus: ", 0), 0u) << ErrorOf(doc.dump());
  doc = Minimal();
  doc["nics"] = {{{"name", "eth0"},
                  {"kind", "Token Ring"},
                  {"port_state", "up"},
                  {"rate_bytes_per_second", 0},
                  {"numa_node", 0}}};
  EXPECT_EQ(ErrorOf(doc.dump()), "nics[0].kind: must be one of IB, RoCE, Ethernet");
  doc["nics"][0]["kind"] = "Ethernet";
  doc["nics"][0]["nic_paths"] = {{"eth0", "SYS"}};
  EXPECT_EQ(ErrorOf(doc.dump()), "nics[0].nic_paths.eth0: must name another NIC in 'nics'");
  doc = Minimal();
  doc["gpus"] = {{{"index", 0},
                  {"name", "g"},
                  {"uuid", "u"},
                  {"pci_bus_id", "0000:18:00.0"},
                  {"compute_capability", "9"},
                  {"memory_bytes", 1},
                  {"numa_node", 0}}};
  EXPECT_EQ(ErrorOf(doc.dump()), "gpus[0].compute_capability: must look like \"9.0\"");
  doc["gpus"][0]["compute_capability"] = "9.0";
  doc["gpus"][0]["nic_paths"] = {{"mlx5_9", "PIX"}};
  EXPECT_EQ(ErrorOf(doc.dump()), "gpus[0].nic_paths.mlx5_9: no NIC of that name in 'nics'");
  doc["gpus"][0].erase("nic_paths");
  doc["gpu_links"] = {{{"gpus", {0, 1}}, {"nvlink_count", 0}, {"pcie_path", "PIX"}}};
  EXPECT_EQ(ErrorOf(doc.dump()),
            "gpu_links[0].gpus: must name two different GPUs listed in 'gpus'");
  doc["gpus"].push_back(doc["gpus"][0]);
  doc["gpus"][1]["index"] = 1;
  doc["gpus"][1]["uuid"] = "u1";
  doc["gpus"][1]["pci_bus_id"] = "0000:19:00.0";
  doc["gpu_links"][0]["via_nvswitch"] = "yes";
  EXPECT_EQ(ErrorOf(doc.dump()), "gpu_links[0].via_nvswitch: must be true or false");
  doc["gpu_links"][0]["via_nvswitch"] = true;
  EXPECT_EQ(ErrorOf(doc.dump()), "gpu_links[0].via_nvswitch: needs nvlink_count > 0");
  EXPECT_EQ(ErrorOf("[1, 2]"), "(top level): must be an object");
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char pattern[] = "/tmp/ringpilot-topo-XXXXXX";
    const int fd = ::mkstemp(pattern);
    path_ = pattern;
    if (fd >= 0) ::close(fd);
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(SnapshotErrors, FileErrorsAreOneLineNamingTheFile) {
  std::ifstream in(FixturePath("dgx-h100.json"));
  const std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const TempFile truncated(full.substr(0, full.size() / 2));
  try {
    LoadSnapshot(truncated.path());
    FAIL() << "truncated snapshot accepted";
  } catch (const SnapshotError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(truncated.path() + ": not valid JSON: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  const TempFile wrong_type(R"({"version": 1, "hostname": 5})");
  try {
    LoadSnapshot(wrong_type.path());
    FAIL() << "bad snapshot accepted";
  } catch (const SnapshotError& e) {
    EXPECT_EQ(std::string(e.what()), wrong_type.path() + ": hostname: must be a string");
  }
  EXPECT_THROW(LoadSnapshot("/nonexistent/snap.json"), SnapshotError);
}

}  // namespace
}  // namespace ringpilot::topology
