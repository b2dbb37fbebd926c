// `ringpilot exec`'s NCCL profiler environment: plugin path and the rank's metrics port.
#include "launcher/nccl_metrics_env.h"

#include <gtest/gtest.h>

#include "launcher/torchrun_env.h"

namespace ringpilot::launcher {
namespace {

TEST(NcclMetricsEnv, NamesThePluginAndTheJobDefaultPortBase) {
  const base::Environment env = AddNcclMetricsEnv({{"RANK", "3"}, {"PATH", "/bin"}},
                                                  "/opt/rp/bin/libringpilot-nccl-profiler.so");
  EXPECT_EQ(env.at("NCCL_PROFILER_PLUGIN"), "/opt/rp/bin/libringpilot-nccl-profiler.so");
  EXPECT_EQ(env.at("RINGPILOT_METRICS_PORT_BASE"), "18400");  // local rank 3 serves on 18403
  EXPECT_EQ(env.count("RINGPILOT_METRICS_PORT"), 0u);
  EXPECT_EQ(env.at("PATH"), "/bin");
}

TEST(NcclMetricsEnv, TheLaunchersBaseAndTheCallersOwnValuesWin) {
  EXPECT_EQ(AddNcclMetricsEnv({{"RANK", "2"}, {"RINGPILOT_METRICS_PORT_BASE", "12000"}}, "/p.so")
                .at("RINGPILOT_METRICS_PORT_BASE"),
            "12000");
  // port_base 0: the plugin picks a free port, as the trainer does.
  EXPECT_EQ(AddNcclMetricsEnv({{"RANK", "2"}, {"RINGPILOT_METRICS_PORT_BASE", "0"}}, "/p.so")
                .at("RINGPILOT_METRICS_PORT_BASE"),
            "0");
  const base::Environment mine = AddNcclMetricsEnv(
      {{"RANK", "1"}, {"NCCL_PROFILER_PLUGIN", "inspector"}, {"RINGPILOT_METRICS_PORT", "7000"}},
      "/p.so");
  EXPECT_EQ(mine.at("NCCL_PROFILER_PLUGIN"), "inspector");
  EXPECT_EQ(mine.at("RINGPILOT_METRICS_PORT"), "7000");
}

TEST(NcclMetricsEnv, BadPortBaseIsAOneLineError) {
  auto error = [](const base::Environment& env) {
    try {
      AddNcclMetricsEnv(env, "/p.so");
    } catch (const RankEnvError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{"RANK", "0"}, {"RINGPILOT_METRICS_PORT_BASE", "9x"}}),
            "ringpilot exec: RINGPILOT_METRICS_PORT_BASE='9x' is not a port (0..65535)");
  EXPECT_EQ(error({{"RANK", "100"}, {"RINGPILOT_METRICS_PORT_BASE", "65500"}}),
            "ringpilot exec: RINGPILOT_METRICS_PORT_BASE 65500 + RANK 100 is past port 65535");
  // The port is base + LOCAL_RANK where there is one: RANK 100 on its node's slot 3 fits.
  EXPECT_EQ(error({{"RANK", "100"}, {"LOCAL_RANK", "3"}, {"RINGPILOT_METRICS_PORT_BASE", "65500"}}),
            "no error");
  EXPECT_EQ(error({{"RANK", "1"}, {"LOCAL_RANK", "40"}, {"RINGPILOT_METRICS_PORT_BASE", "65500"}}),
            "ringpilot exec: RINGPILOT_METRICS_PORT_BASE 65500 + LOCAL_RANK 40 is past port 65535");
}

TEST(NcclMetricsEnv, PluginPathIsBesideTheExecutableUnlessOverridden) {
  EXPECT_EQ(NcclProfilerPath({}, "/opt/rp/bin"), "/opt/rp/bin/libringpilot-nccl-profiler.so");
  EXPECT_EQ(NcclProfilerPath({{"RINGPILOT_NCCL_PROFILER", "/x/y.so"}}, "/opt/rp/bin"), "/x/y.so");
}

}  // namespace
}  // namespace ringpilot::launcher
