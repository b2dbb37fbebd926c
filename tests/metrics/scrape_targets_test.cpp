// Where Prometheus finds the exporters: metrics.bind's "auto" and the file_sd JSON.
#include "metrics/scrape_targets.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace ringpilot::metrics {
namespace {

TEST(metrics_ScrapeTargets, AutoBindIsTheNodesAddressOnlyUnderSlurmOrKubernetes) {
  EXPECT_EQ(ResolveBind("auto", {}), "127.0.0.1");
  EXPECT_EQ(ResolveBind("auto", {{"SLURM_JOB_ID", ""}}), "127.0.0.1");  // set but empty
  EXPECT_EQ(ResolveBind("auto", {{"SLURM_JOB_ID", "4711"}}), NodeAddress());
  EXPECT_EQ(ResolveBind("auto", {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}}), NodeAddress());
  // Anything else is the address itself.
  EXPECT_EQ(ResolveBind("0.0.0.0", {{"SLURM_JOB_ID", "4711"}}), "0.0.0.0");
  EXPECT_EQ(ResolveBind("10.1.2.3", {}), "10.1.2.3");
}

TEST(metrics_ScrapeTargets, NodeAddressIsNotLoopback) {
  const std::string a = NodeAddress();
  EXPECT_NE(a.rfind("127.", 0), 0u) << a;
  EXPECT_EQ(TargetHost("10.1.2.3"), "10.1.2.3");
  EXPECT_NE(TargetHost("0.0.0.0"), "0.0.0.0");
}

TEST(metrics_ScrapeTargets, FileSdJsonIsWhatPrometheusReads) {
  const std::string text =
      FileSdJson({{{"n1:18400", "n1:18401"}, {{"ringpilot_job", "llm"}, {"__scheme__", "https"}}}});
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["targets"], nlohmann::json::array({"n1:18400", "n1:18401"}));
  EXPECT_EQ(j[0]["labels"]["ringpilot_job"], "llm");
  EXPECT_EQ(j[0]["labels"]["__scheme__"], "https");
  EXPECT_EQ(FileSdJson({}), "[]\n");
}

}  // namespace
}  // namespace ringpilot::metrics
