// `ringpilot diagnose` on the ranks' gpu_clocks: which GPUs a power or thermal limit held
// down over the timed steps, in the warnings, the text report and the JSON.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "diagnose/diagnose.h"

namespace ringpilot::diagnose {
namespace {

using nlohmann::json;

// A rank of a 10-step run; with `power`/`thermal` >= 0, its GPU's clocks over a 20 s window
// with that many seconds held by the limit.
RankStats Rank(int rank, double power, double thermal, double sm_mhz = 1882) {
  RankStats r;
  r.rank = rank;
  r.world_size = 4;
  r.steps = 10;
  r.step_p50 = r.step_p99 = r.step_mean = 0.1;
  if (power >= 0 || thermal >= 0) {
    history::GpuClocks g;
    g.seconds = 20;
    if (power >= 0) g.power_limited_seconds = power;
    if (thermal >= 0) g.thermal_limited_seconds = thermal;
    g.sm_clock_mhz = sm_mhz;
    g.sm_clock_max_mhz = 1980;
    g.power_watts = 693;
    g.power_limit_watts = 700;
    r.gpu_clocks = g;
  }
  return r;
}

std::string Warning(const Diagnosis& d, const std::string& start) {
  for (const std::string& w : d.warnings) {
    if (w.rfind(start, 0) == 0) return w;
  }
  return "";
}

TEST(DiagnoseGpuClocks, NamesThePowerLimitedRanksAndTheThermallyLimitedStraggler) {
  RunData run;
  run.run_dir = "/runs/x";
  run.ranks = {Rank(0, 20, 0), Rank(1, 1, 0), Rank(2, 19, 12.8, 1410), Rank(3, 20, 0)};
  // Ranks 0, 1 and 3 waited for rank 2 at every step.
  for (int waiting : {0, 1, 3}) {
    run.ranks[waiting].wait_by_culprit[2] = 0.5;
    run.ranks[waiting].culprit_steps[2] = 10;
  }
  const Diagnosis d = Analyze(run);
  ASSERT_TRUE(d.straggler.has_value());
  EXPECT_EQ(Warning(d, "GPU clocks held down by the power limit: "),
            "GPU clocks held down by the power limit: rank 0 100.0% of its timed steps (SM clock "
            "1882 of 1980 MHz, mean power 693.0 of 700.0 W), rank 3 100.0% (SM clock 1882 of "
            "1980 MHz, mean power 693.0 of 700.0 W), rank 2 95.0% (SM clock 1410 of 1980 MHz, "
            "mean power 693.0 of 700.0 W): every step runs at the clock the board's power budget "
            "allows; `nvidia-smi -q -d POWER,PERFORMANCE` shows the limit; NCCL's kernels beside "
            "backward draw from the same budget, so a step on several GPUs runs at a lower clock "
            "than on one; rank 2, the straggler, is among them: its clock sets the pace of every "
            "step");
  EXPECT_EQ(
      Warning(d, "GPU clocks held down by the thermal limit: "),
      "GPU clocks held down by the thermal limit: rank 2 64.0% of its timed steps (SM clock "
      "1410 of 1980 MHz, mean power 693.0 of 700.0 W): the GPU is too hot to hold its clock: check "
      "its cooling (airflow, fans, inlet temperature; `nvidia-smi -q -d "
      "TEMPERATURE,PERFORMANCE`); rank 2, the straggler, is among them: its clock sets the "
      "pace of every step");
  // Rank 1's 5% is under kClockLimitedShare.
  ASSERT_EQ(d.clock_limited.size(), 4u);
  EXPECT_EQ(d.clock_limited[3].rank, 2);
  EXPECT_EQ(d.clock_limited[3].cause, "thermal");
  EXPECT_DOUBLE_EQ(d.clock_limited[3].share, 0.64);

  const std::string text = RenderDiagnosisText(d);
  EXPECT_NE(text.find("gpu clocks over the timed steps (NVML):\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  2     1410    1980     693.0    700.0    95.0%          64.0%\n"),
            std::string::npos)
      << text;
  const json j = DiagnosisToJson(d);
  EXPECT_DOUBLE_EQ(j["ranks"][2]["gpu_clocks"]["thermal_limited_share"].get<double>(), 0.64);
  EXPECT_DOUBLE_EQ(j["ranks"][1]["gpu_clocks"]["power_limited_share"].get<double>(), 0.05);
  EXPECT_EQ(j["clock_limited_ranks"][3],
            json({{"rank", 2}, {"cause", "thermal"}, {"share", 0.64}}));
}

TEST(DiagnoseGpuClocks, EveryRankLimitedNamesFourAndCountsTheRest) {
  RunData run;
  run.run_dir = "/runs/x";
  for (int r = 0; r < 6; ++r) run.ranks.push_back(Rank(r, 20, -1));
  const Diagnosis d = Analyze(run);
  const std::string w = Warning(d, "GPU clocks held down by the power limit: ");
  EXPECT_NE(
      w.find("rank 3 100.0% (SM clock 1882 of 1980 MHz, mean power 693.0 of 700.0 W) and 2 more "
             "rank(s): every step"),
      std::string::npos)
      << w;
  EXPECT_EQ(w.find("rank 4"), std::string::npos) << w;
  EXPECT_EQ(w.find("straggler"), std::string::npos) << w;
  // A GPU whose NVML does not count thermal time: "-", not 0%.
  EXPECT_NE(RenderDiagnosisText(d).find("100.0%         -\n"), std::string::npos)
      << RenderDiagnosisText(d);
  EXPECT_TRUE(DiagnosisToJson(d)["ranks"][0]["gpu_clocks"]["thermal_limited_share"].is_null());
}

TEST(DiagnoseGpuClocks, OneGpuRunLeavesNcclOutOfTheAdvice) {
  RunData run;
  run.run_dir = "/runs/x";
  run.ranks = {Rank(0, 11.3, 0)};
  run.ranks[0].world_size = 1;
  const Diagnosis d = Analyze(run);
  EXPECT_EQ(Warning(d, "GPU clocks held down by the power limit: "),
            "GPU clocks held down by the power limit: rank 0 56.5% of its timed steps (SM clock "
            "1882 of 1980 MHz, mean power 693.0 of 700.0 W): every step runs at the clock the "
            "board's power budget allows; `nvidia-smi -q -d POWER,PERFORMANCE` shows the limit");
}

TEST(DiagnoseGpuClocks, RanksWithoutClocksOrUnderTheShareGiveNoWarningAndNoSection) {
  RunData run;
  run.run_dir = "/runs/x";
  run.ranks = {Rank(0, -1, -1), Rank(1, -1, -1)};  // CPU ranks: no gpu_clocks
  Diagnosis d = Analyze(run);
  EXPECT_TRUE(d.clock_limited.empty());
  EXPECT_EQ(RenderGpuClocksText(d), "");
  EXPECT_EQ(RenderDiagnosisText(d).find("gpu clocks"), std::string::npos);
  EXPECT_TRUE(DiagnosisToJson(d)["ranks"][0]["gpu_clocks"].is_null());
  EXPECT_EQ(DiagnosisToJson(d)["clock_limited_ranks"], json::array());

  run.ranks = {Rank(0, 1.9, 0), Rank(1, 0, 1.9)};  // 9.5%: under kClockLimitedShare
  d = Analyze(run);
  EXPECT_TRUE(d.clock_limited.empty());
  EXPECT_EQ(Warning(d, "GPU clocks"), "");
  EXPECT_NE(RenderGpuClocksText(d).find("9.5%"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot::diagnose
