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
