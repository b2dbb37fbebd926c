#include "topology/cluster.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "tests/topology/fixtures.h"

namespace ringpilot::topology {
namespace {

using testing::Fixture;

NodeReport Report(const std::string& fixture, const std::string& host, int ranks) {
  NodeReport r;
  r.topology = Fixture(fixture);
  r.topology.hostname = host;
  r.topology.warnings.clear();
  r.ranks = ranks;
  r.visible_gpus = static_cast<int>(r.topology.gpus.size());
  r.pci_gpus = static_cast<int>(r.topology.gpus.size());
  return r;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(NodeSummaries, DescribeGpusLinksNicsAndCpus) {
  const NodeTopology dgx = Fixture("dgx-h100.json");
  EXPECT_EQ(GpuSummary(dgx), "8x NVIDIA H100 80GB HBM3");
  EXPECT_EQ(LinkSummary(dgx), "NV18 x28");
  EXPECT_EQ(NicSummary(dgx), "8x IB 400 Gb/s");
  EXPECT_EQ(CpuSummary(dgx), "2 NUMA, 224 CPUs");
  const NodeTopology pcie = Fixture("pcie-4gpu-2socket.json");
  EXPECT_EQ(LinkSummary(pcie), "PIX x2, SYS x4");
  EXPECT_EQ(NicSummary(pcie), "2x IB 200 Gb/s");
  const NodeTopology cpu = Fixture("cpu-only.json");
  EXPECT_EQ(GpuSummary(cpu), "no GPU");
  EXPECT_EQ(LinkSummary(cpu), "-");
  EXPECT_EQ(NicSummary(cpu), "1x Ethernet 25 Gb/s");
  EXPECT_EQ(LinkSummary(Fixture("h200x2.json")), "NV18 x1");
  const NodeTopology captured = Fixture("h200x2-captured.json");
  EXPECT_EQ(GpuSummary(captured), "2x NVIDIA H200");
  EXPECT_EQ(LinkSummary(captured), "NV18 x1");
  EXPECT_EQ(NicSummary(captured), "1x Ethernet rate unknown");
  EXPECT_EQ(CpuSummary(captured), "1 NUMA, 32 CPUs");
  const NodeTopology quad = Fixture("h200x4-captured.json");
  EXPECT_EQ(GpuSummary(quad), "4x NVIDIA H200");
  EXPECT_EQ(LinkSummary(quad), "NV18 x6");
  EXPECT_EQ(CpuSummary(quad), "1 NUMA, 64 CPUs");
  EXPECT_EQ(NicSummary(Fixture("h200x2.json")), "no NIC");
}

TEST(SummarizeCluster, HomogeneousNodesShareOneLineAndNoWarning) {
  std::vector<NodeReport> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(Report("dgx-h100.json", "n" + std::to_string(i), 8));
  const ClusterSummary s = SummarizeCluster(nodes);
  EXPECT_TRUE(s.warnings.empty()) << Join(s.warnings);
  ASSERT_EQ(s.lines.size(), 2u) << Join(s.lines);
  EXPECT_EQ(s.lines[0], "cluster: 6 node(s), 48 rank(s), 48 GPU(s)");
  EXPECT_EQ(s.lines[1],
            "  6 node(s) [n0, n1, n2, n3 +2 more]: 8x NVIDIA H100 80GB HBM3; links NV18 x28; "
            "NICs 8x IB 400 Gb/s; 2 NUMA, 224 CPUs; 8 rank(s)");
}

TEST(SummarizeCluster, WarnsOnHeterogeneousNodes) {
  std::vector<NodeReport> nodes = {Report("dgx-h100.json", "a", 8), Report("dgx-h100.json", "b", 8),
                                   Report("pcie-4gpu-2socket.json", "c", 4)};
  const ClusterSummary s = SummarizeCluster(nodes);
  EXPECT_EQ(s.lines.size(), 3u) << Join(s.lines);
  const std::string w = Join(s.warnings);
  EXPECT_NE(w.find("GPU count differs: 8 on a, b; 4 on c"), std::string::npos) << w;
  EXPECT_NE(w.find("GPU model differs"), std::string::npos) << w;
  EXPECT_NE(w.find("GPU links differs: NV18 x28 on a, b; PIX x2, SYS x4 on c"), std::string::npos)
      << w;
  EXPECT_NE(w.find("NICs differs: 8x IB 400 Gb/s on a, b; 2x IB 200 Gb/s on c"), std::string::npos)
      << w;
  EXPECT_NE(w.find("ranks differs"), std::string::npos) << w;
}

TEST(SummarizeCluster, NicRateAndPortStateDifferencesAreHeterogeneity) {
  std::vector<NodeReport> nodes = {Report("dgx-h100.json", "a", 8),
                                   Report("dgx-h100.json", "b", 8)};
  nodes[1].topology.nics[2].port_state = "DOWN";
  const ClusterSummary s = SummarizeCluster(nodes);
  const std::string w = Join(s.warnings);
  EXPECT_NE(w.find("NICs differs: 8x IB 400 Gb/s on a; 8x IB 400 Gb/s (1 down) on b"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("b: NIC port(s) down: mlx5_2 DOWN"), std::string::npos) << w;
  EXPECT_EQ(s.warnings.size(), 2u) << w;
}

TEST(SummarizeCluster, WarnsOnHiddenGpusAndWeakLinks) {
  NodeReport n = Report("dgx-h100.json", "a", 4);
  n.visible_gpus = 4;  // CUDA_VISIBLE_DEVICES=0,1,2,3
  n.pci_gpus = 9;      // one more on the PCI bus than NVML reports
  for (GpuLink& l : n.topology.gpu_links) {
    if (l.gpu_a == 2 && l.gpu_b == 5) l.nvlink_count = 12;
  }
  n.topology.gpu_links.pop_back();  // the pair 6-7
  const ClusterSummary s = SummarizeCluster({n});
  const std::string w = Join(s.warnings);
  EXPECT_NE(w.find("a: 8 GPU(s) present, 4 visible to the job"), std::string::npos) << w;
  EXPECT_NE(w.find("a: 9 NVIDIA GPU(s) on the PCI bus, 8 reported by NVML"), std::string::npos)
      << w;
  EXPECT_NE(w.find("a: no link recorded for 1 GPU pair(s)"), std::string::npos) << w;
  EXPECT_NE(w.find("a: 1 GPU pair(s) below NV18 (NVLinks down or missing): GPU2-GPU5 NV12"),
            std::string::npos)
      << w;
  EXPECT_EQ(s.warnings.size(), 4u) << w;
}

TEST(SummarizeCluster, ProbeWarningsAppearOncePerMessage) {
  std::vector<NodeReport> nodes = {Report("cpu-only.json", "x", 2),
                                   Report("cpu-only.json", "y", 2)};
  nodes[0].topology.warnings = {"NVML: missing"};
  nodes[1].topology.warnings = {"NVML: missing"};
  const ClusterSummary s = SummarizeCluster(nodes);
  EXPECT_TRUE(s.warnings.empty()) << Join(s.warnings);
  ASSERT_EQ(s.lines.size(), 3u) << Join(s.lines);
  EXPECT_EQ(s.lines[2], "  probe note [x, y]: NVML: missing");
}

TEST(NodeReport, JsonRoundTripAndErrors) {
  NodeReport r = Report("pcie-4gpu-2socket.json", "p", 4);
  r.visible_gpus = 2;
  r.pci_gpus = -1;
  const NodeReport back = NodeReportFromJson(nlohmann::json::parse(ToJson(r).dump()));
  EXPECT_EQ(back.ranks, 4);
  EXPECT_EQ(back.visible_gpus, 2);
  EXPECT_EQ(back.pci_gpus, -1);
  EXPECT_EQ(ToJson(back.topology).dump(), ToJson(r.topology).dump());
  nlohmann::json bad = nlohmann::json::parse(ToJson(r).dump());
  bad["ranks"] = "four";
  try {
    NodeReportFromJson(bad);
    FAIL() << "accepted";
  } catch (const SnapshotError& e) {
    EXPECT_EQ(std::string(e.what()), "ranks: expected an integer >= -1, got \"four\"");
  }
  bad = nlohmann::json::parse(ToJson(r).dump());
  bad["topology"]["gpus"][0]["numa_node"] = "zero";
  try {
    NodeReportFromJson(bad);
    FAIL() << "accepted";
  } catch (const SnapshotError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("topology: gpus[0].numa_node", 0), 0u) << e.what();
  }
  EXPECT_THROW(NodeReportFromJson(nlohmann::json::array()), SnapshotError);
}

TEST(CountPciGpus, CountsNvidiaDisplayControllersInAFakeSysfs) {
  char tmpl[] = "/tmp/rp-pci-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const std::string devices = root + "/bus/pci/devices";
  ASSERT_EQ(std::system(("mkdir -p " + devices).c_str()), 0);
  auto dev = [&](const std::string& id, const std::string& vendor, const std::string& cls) {
    ::mkdir((devices + "/" + id).c_str(), 0755);
    std::ofstream(devices + "/" + id + "/vendor") << vendor << "\n";
    std::ofstream(devices + "/" + id + "/class") << cls << "\n";
  };
  dev("0000:18:00.0", "0x10de", "0x030200");  // H100 (3D controller)
  dev("0000:19:00.0", "0x10de", "0x030000");  // VGA
  dev("0000:1a:00.0", "0x10de", "0x068000");  // NVSwitch: not a GPU
  dev("0000:1b:00.0", "0x15b3", "0x020700");  // ConnectX
  EXPECT_EQ(CountPciGpus(root), 2);
  EXPECT_EQ(CountPciGpus(root + "/nonexistent"), -1);
  ASSERT_EQ(std::system(("rm -rf " + root).c_str()), 0);
}

}  // namespace
}  // namespace ringpilot::topology
