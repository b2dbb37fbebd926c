// config/value_rules.h: the Slurm and Kubernetes value rules the key table and the
// renderers share.
#include <gtest/gtest.h>

#include "config/value_rules.h"

namespace ringpilot::config {
namespace {

TEST(SlurmValueRules, TimeFormats) {
  for (const char* ok : {"30", "30:00", "02:00:00", "1-00", "1-12:30", "2-00:00:00", "UNLIMITED"}) {
    EXPECT_EQ(CheckSlurmTime(ok), "") << ok;
  }
  for (const char* bad : {"", "0", "00:00:00", "1:2:3:4", "a", "1-", "-1", "1-2-3", "12:3x"}) {
    EXPECT_NE(CheckSlurmTime(bad), "") << bad;
  }
}

TEST(SlurmValueRules, NamesAndPaths) {
  EXPECT_EQ(CheckSlurmName("proj-42.a_b"), "");
  for (const char* bad : {"", "a;b", "a b", "$(id)"}) EXPECT_NE(CheckSlurmName(bad), "") << bad;
  EXPECT_NE(CheckSlurmName(std::string(64, 'a')), "");
  EXPECT_EQ(CheckSlurmPath("/scratch/runs+1"), "");
  for (const char* bad : {"", "-x", "/tmp/a b", "a'b", "a\nb"}) {
    EXPECT_NE(CheckSlurmPath(bad), "") << bad;
  }
}

TEST(K8sValueRules, Quantities) {
  for (const char* ok : {"1", "16Gi", "1.5G", "500m", "64Mi"}) EXPECT_TRUE(IsPositiveQuantity(ok));
  for (const char* bad : {"", "0", "0Gi", "-1", "1e3", "16GB", "Gi", "1.2.3"}) {
    EXPECT_FALSE(IsPositiveQuantity(bad)) << bad;
  }
}

TEST(SlurmValueRules, Directives) {
  for (const char* ok : {"--exclusive", "--mem=0", "--constraint=h100&ib", "--gres=gpu:8",
                         "--mail-type=END,FAIL", "--nodelist=n[1-4]", "--switches=1@01:00:00",
                         "--mail-user=a@b.example", "--export=ALL,A=b"}) {
    EXPECT_EQ(CheckSbatchDirective(ok), "") << ok;
  }
  for (const char* bad :
       {"", "--", "-C", "-C h100", "exclusive", "--constraint=a b", "--comment='x'", "--x=$(id)",
        "--x=`id`", "--x=a;b", "--X", "--=1", "--mem=", "--a=#b", "--1a"}) {
    EXPECT_NE(CheckSbatchDirective(bad), "") << bad;
  }
  // What the script renders from job keys is refused with the key to set instead.
  EXPECT_EQ(CheckSbatchDirective("--time=10"),
            "--time is rendered from slurm.time; set that instead, got '--time=10'");
  EXPECT_NE(CheckSbatchDirective("--gpus-per-node=4").find("world.device"), std::string::npos);
  EXPECT_NE(CheckSbatchDirective("--nodes=2").find("world.nodes"), std::string::npos);
  EXPECT_NE(CheckSbatchDirective("--requeue").find("preemption"), std::string::npos);
}

TEST(SlurmValueRules, SetupLines) {
  EXPECT_EQ(CheckSlurmSetupLine("module load cuda/13 && echo \"$PATH\""), "");
  for (const char* bad : {"", "a\nb", "a\tb", "a\rb", "echo a \\"}) {
    EXPECT_NE(CheckSlurmSetupLine(bad), "") << bad;
  }
  EXPECT_NE(CheckSlurmSetupLine(std::string(4097, 'a')), "");
}

TEST(ClusterRules, MetricsBindAndGpus) {
  EXPECT_EQ(ClusterMetricsBind("127.0.0.1"), "0.0.0.0");
  EXPECT_EQ(ClusterMetricsBind("127.0.1.1"), "0.0.0.0");
  EXPECT_EQ(ClusterMetricsBind("localhost"), "0.0.0.0");
  EXPECT_EQ(ClusterMetricsBind("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(ClusterMetricsBind("0.0.0.0"), "0.0.0.0");
  WorldConfig w;
  w.procs_per_node = 8;
  w.device = Device::kCuda;
  EXPECT_EQ(RequestedGpusPerNode(w), 8);
  w.device = Device::kAuto;
  EXPECT_EQ(RequestedGpusPerNode(w), 8);
  w.device = Device::kCpu;
  EXPECT_EQ(RequestedGpusPerNode(w), 0);
}

TEST(K8sValueRules, QuantityArithmetic) {
  EXPECT_EQ(QuantityValue("16Gi"), 17179869184.0);
  EXPECT_EQ(QuantityValue("500m"), 0.5);
  EXPECT_EQ(QuantityValue("1.5"), 1.5);
  EXPECT_EQ(QuantityValue("2k"), 2000.0);
  EXPECT_FALSE(QuantityValue("x").has_value());
  EXPECT_FALSE(QuantityValue("0").has_value());
  EXPECT_EQ(MemoryQuantity(17179869184.0), "16384Mi");
  EXPECT_EQ(MemoryQuantity(1.0), "1Mi");  // rounded up, never below what was asked
  EXPECT_EQ(CpuQuantity(16), "16");
  EXPECT_EQ(CpuQuantity(1.5), "1500m");
  EXPECT_EQ(CpuQuantity(0.0004), "1m");
}

TEST(K8sValueRules, NamesAndImages) {
  EXPECT_TRUE(IsDnsLabel("train-1"));
  for (const char* bad : {"", "Train", "-a", "a-", "a.b"}) EXPECT_FALSE(IsDnsLabel(bad)) << bad;
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'a')));
  EXPECT_TRUE(IsDnsSubdomain("fast.ssd-1"));
  EXPECT_FALSE(IsDnsSubdomain("Fast_SSD"));
  EXPECT_TRUE(IsResourceName("rdma/ib"));
  EXPECT_TRUE(IsResourceName("nvidia.com/gpu"));
  for (const char* bad : {"ib", "/ib", "rdma/", "RDMA/ib", "rdma/-ib"}) {
    EXPECT_FALSE(IsResourceName(bad)) << bad;
  }
  EXPECT_TRUE(IsImageReference("registry.example.com:5000/team/ringpilot:1.0"));
  EXPECT_TRUE(IsImageReference("repo@sha256:abc"));
  for (const char* bad : {"", "a b", "$(id)", ":tag"}) EXPECT_FALSE(IsImageReference(bad)) << bad;
}

}  // namespace
}  // namespace ringpilot::config
