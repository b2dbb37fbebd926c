// logs/rank-N.stats.json and attempts/N/rank-R.stats.json (history/rank_stats.h): what the
// trainer's StepStats writes is what diagnose reads back; the text is the one the trainer
// wrote before the format moved here; truncated, foreign and mistyped files give one line
// naming the file and the key.
#include "history/rank_stats.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history/record_fields.h"
#include "tests/test_util.h"

namespace ringpilot::history {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::WriteFile;

RankStats Sample() {
  RankStats s;
  s.rank = 2;
  s.node = "gpu-03";
  s.local_rank = 1;
  s.world_size = 4;
  s.steps = 90;
  s.step_p50 = 0.125;
  s.step_p99 = 0.25;
  s.step_mean = 0.13;
  s.phase_seconds_total = {{"data", 0.5},
                           {"forward", 3.25},
                           {"backward", 6.5},
                           {"optimizer", 1.0},
                           {"comm_exposed", 0.75}};
  s.input_wait = InputWaitSeconds{90, 0.5, 0.004, 0.02, 0.031};
  s.overlap_ratio = 0.625;
  s.wait_seconds_total = 1.5;
  s.culprit_steps = {{0, 12}, {3, 70}};
  s.wait_by_culprit = {{0, 0.25}, {3, 1.25}};
  s.compute_skew_mean = 0.0125;
  s.collectives.push_back({"allreduce", "16MiB-64MiB", 180, 6039797760, 4.5, 2.0e9});
  s.collectives.push_back({"broadcast", "1MiB-4MiB", 1, 2097152, 0, 0});
  s.expected_busbw = {{"allreduce", 2.5e9}, {"allgather", 2.5e9}, {"broadcast", 2.5e9}};
  return s;
}

// The file as trainer/telemetry's StepStats::WriteJson built it before the format moved to
// history/ (the same keys, nesting and number types), for `s`.
std::string AsTheTrainerWroteIt(const RankStats& s) {
  json phases = json::object();
  for (const auto& [name, seconds] : s.phase_seconds_total) phases[name] = seconds;
  json culprits = json::object(), waits = json::object();
  for (const auto& [r, n] : s.culprit_steps) culprits[std::to_string(r)] = int64_t(n);
  for (const auto& [r, w] : s.wait_by_culprit) waits[std::to_string(r)] = w;
  json colls = json::array();
  for (const CollectiveTotals& c : s.collectives) {
    colls.push_back({{"op", c.op},
                     {"size_bucket", c.size_bucket},
                     {"count", int64_t(c.count)},
                     {"bytes_total", int64_t(c.bytes_total)},
                     {"seconds_total", c.seconds_total},
                     {"busbw_bytes_per_second", c.busbw_bytes_per_second}});
  }
  const json j = {
      {"rank", s.rank},
      {"node", s.node},
      {"local_rank", s.local_rank},
      {"world_size", s.world_size},
      {"steps", int64_t(s.steps)},
      {"step_seconds", {{"p50", s.step_p50}, {"p99", s.step_p99}, {"mean", s.step_mean}}},
      {"phase_seconds_total", phases},
      {"input_wait_seconds",
       {{"steps", size_t(s.input_wait->steps)},
        {"total", s.input_wait->total},
        {"p50", s.input_wait->p50},
        {"p99", s.input_wait->p99},
        {"max", s.input_wait->max}}},
      {"overlap_ratio", *s.overlap_ratio},
      {"straggler",
       {{"wait_seconds_total", s.wait_seconds_total},
        {"culprit_steps", culprits},
        {"wait_by_culprit_seconds", waits},
        {"compute_skew_seconds_mean", s.compute_skew_mean}}},
      {"collectives", colls},
      {"expected_busbw_bytes_per_second",
       {{"allreduce", s.expected_busbw.at("allreduce")},
        {"allgather", s.expected_busbw.at("allgather")},
        {"broadcast", s.expected_busbw.at("broadcast")}}},
  };
  return j.dump(2) + "\n";
}

TEST(RankStats, WhatIsWrittenIsReadBack) {
  TempDir dir;
  const RankStats s = Sample();
  const std::string path = RankStatsPath(dir.path(), 2);
  EXPECT_EQ(path, dir.path() + "/rank-2.stats.json");
  WriteRankStats(path, s);
  const RankStats r = ReadRankStats(path, 2);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.node, "gpu-03");
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.steps, 90u);
  EXPECT_EQ(r.step_p50, 0.125);
  EXPECT_EQ(r.step_p99, 0.25);
  EXPECT_EQ(r.step_mean, 0.13);
  EXPECT_EQ(r.phase_seconds_total, s.phase_seconds_total);
  ASSERT_TRUE(r.input_wait.has_value());
  EXPECT_EQ(r.input_wait->steps, 90u);
  EXPECT_EQ(r.input_wait->total, 0.5);
  EXPECT_EQ(r.input_wait->p50, 0.004);
  EXPECT_EQ(r.input_wait->p99, 0.02);
  EXPECT_EQ(r.input_wait->max, 0.031);
  EXPECT_EQ(r.overlap_ratio, 0.625);
  EXPECT_EQ(r.wait_seconds_total, 1.5);
  EXPECT_EQ(r.culprit_steps, s.culprit_steps);
  EXPECT_EQ(r.wait_by_culprit, s.wait_by_culprit);
  EXPECT_EQ(r.compute_skew_mean, 0.0125);
  ASSERT_EQ(r.collectives.size(), 2u);
  EXPECT_EQ(r.collectives[0].op, "allreduce");
  EXPECT_EQ(r.collectives[0].size_bucket, "16MiB-64MiB");
  EXPECT_EQ(r.collectives[0].count, 180u);
  EXPECT_EQ(r.collectives[0].bytes_total, 6039797760u);
  EXPECT_EQ(r.collectives[0].seconds_total, 4.5);
  EXPECT_EQ(r.collectives[0].busbw_bytes_per_second, 2.0e9);
  EXPECT_EQ(r.collectives[1].op, "broadcast");
  EXPECT_EQ(r.expected_busbw, s.expected_busbw);
  EXPECT_EQ(RankStatsJson(r), testing::ReadFile(path));
  EXPECT_EQ(testing::ReadFile(path), AsTheTrainerWroteIt(s));
}

TEST(RankStats, AnImageRanksDecodeRouteIsReadBack) {
  TempDir dir;
  RankStats s = Sample();
  s.image_decode = ImageDecode{"host", 15, 256,
                               "decoding images on host threads (data.gpu_decode auto: 16 cores "
                               "for this rank, at least 12), 15 threads at nice 10"};
  const std::string path = RankStatsPath(dir.path(), 2);
  WriteRankStats(path, s);
  const RankStats r = ReadRankStats(path, 2);
  ASSERT_TRUE(r.image_decode.has_value());
  EXPECT_EQ(r.image_decode->where, "host");
  EXPECT_EQ(r.image_decode->threads, 15);
  EXPECT_EQ(r.image_decode->batch, 256);
  EXPECT_EQ(r.image_decode->decision, s.image_decode->decision);
  EXPECT_EQ(RankStatsJson(r), testing::ReadFile(path));

  json bad = json::parse(testing::ReadFile(path));
  bad["image_decode"]["where"] = "disk";
  WriteFile(path, bad.dump());
  try {
    ReadRankStats(path, 2);
    ADD_FAILURE() << "an unknown decode route was read";
  } catch (const RecordError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": 'image_decode.where': expected host or gpu");
  }
}

TEST(RankStats, ACudaRanksClockLimitsAreReadBackAndWhatNvmlLacksStaysAbsent) {
  TempDir dir;
  RankStats s = Sample();
  // 12.5 s, 12.25 of them power-limited, none thermally; 1882 of 1980 MHz, 693.5 of 700 W.
  s.gpu_clocks = GpuClocks{12.5, 12.25, 0.0, 1882.0, 1980.0, 693.5, 700.0};
  const std::string path = RankStatsPath(dir.path(), 2);
  WriteRankStats(path, s);
  RankStats r = ReadRankStats(path, 2);
  ASSERT_TRUE(r.gpu_clocks.has_value());
  EXPECT_EQ(r.gpu_clocks->power_limited_seconds, 12.25);
  EXPECT_EQ(r.gpu_clocks->thermal_limited_seconds, 0.0);  // a zero count is a reading
  // Every other field: what was read writes the same file.
  EXPECT_EQ(RankStatsJson(r), testing::ReadFile(path));
  EXPECT_NE(testing::ReadFile(path).find("\"power_limit_watts\": 700.0"), std::string::npos);

  // A GPU whose NVML counts neither limit: the keys are absent, not zero.
  s.gpu_clocks =
      GpuClocks{3.0, std::nullopt, std::nullopt, 1410, std::nullopt, std::nullopt, std::nullopt};
  WriteRankStats(path, s);
  const json j = json::parse(testing::ReadFile(path));
  EXPECT_FALSE(j["gpu_clocks"].contains("power_limited_seconds")) << j.dump();
  r = ReadRankStats(path, 2);
  EXPECT_FALSE(r.gpu_clocks->power_limited_seconds.has_value());
  EXPECT_EQ(r.gpu_clocks->sm_clock_mhz, 1410.0);

  json bad = j;
  bad["gpu_clocks"]["power_limited_seconds"] = -1;
  WriteFile(path, bad.dump());
  try {
    ReadRankStats(path, 2);
    ADD_FAILURE() << "a negative limited time was read";
  } catch (const RecordError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": 'gpu_clocks.power_limited_seconds': negative");
  }
}

TEST(RankStats, ACudaRanksGpuIdleTimeIsReadBack) {
  TempDir dir;
  RankStats s = Sample();
  s.gpu_idle_seconds = 0.125;
  const std::string path = RankStatsPath(dir.path(), 2);
  WriteRankStats(path, s);
  EXPECT_EQ(json::parse(testing::ReadFile(path))["gpu_idle_seconds_total"], 0.125);
  EXPECT_EQ(ReadRankStats(path, 2).gpu_idle_seconds, 0.125);
  s.gpu_idle_seconds.reset();  // a CPU rank: absent, not zero
  WriteRankStats(path, s);
  const json j = json::parse(testing::ReadFile(path));
  EXPECT_FALSE(j.contains("gpu_idle_seconds_total"));
  EXPECT_FALSE(ReadRankStats(path, 2).gpu_idle_seconds.has_value());
  json bad = j;
  bad["gpu_idle_seconds_total"] = -0.5;
  WriteFile(path, bad.dump());
  try {
    ReadRankStats(path, 2);
    ADD_FAILURE() << "a negative idle time was read";
  } catch (const RecordError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": 'gpu_idle_seconds_total': negative");
  }
}

TEST(RankStats, AFileOfAnOlderVersionKeepsTheDefaults) {
  TempDir dir;
  const std::string path = RankStatsPath(dir.path(), 0);
  WriteFile(path, R"({"rank": 0, "steps": 5, "step_seconds": {"p50": 0.1}})");
  const RankStats r = ReadRankStats(path, 0);
  EXPECT_EQ(r.steps, 5u);
  EXPECT_EQ(r.step_p50, 0.1);
  EXPECT_EQ(r.local_rank, -1);
  EXPECT_FALSE(r.input_wait.has_value());
  EXPECT_FALSE(r.image_decode.has_value());
  EXPECT_FALSE(r.gpu_clocks.has_value());
  EXPECT_FALSE(r.overlap_ratio.has_value());
  EXPECT_TRUE(r.collectives.empty());
  // No "rank": the file name's.
  WriteFile(path, R"({"steps": 5})");
  EXPECT_EQ(ReadRankStats(path, 0).rank, 0);
}

TEST(RankStats, FilesAreFoundByRank) {
  TempDir dir;
  WriteRankStats(RankStatsPath(dir.path(), 3), Sample());
  WriteFile(dir.path() + "/rank-1.stats.json", "{}");
  WriteFile(dir.path() + "/rank-x.stats.json", "{}");
  WriteFile(dir.path() + "/rank-99999999.stats.json", "{}");  // beyond kMaxRecordRank
  WriteFile(dir.path() + "/rank-2.heartbeat", "{}");
  const std::map<int, std::string> files = RankStatsFiles(dir.path());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.at(1), dir.path() + "/rank-1.stats.json");
  EXPECT_EQ(files.at(3), RankStatsPath(dir.path(), 3));
  EXPECT_TRUE(RankStatsFiles(dir.path() + "/missing").empty());
}

// What ReadRankStats throws for `text` in DIR/rank-0.stats.json, with DIR replaced by "D".
std::string ErrorFor(const std::string& text) {
  TempDir dir;
  const std::string path = RankStatsPath(dir.path(), 0);
  WriteFile(path, text);
  try {
    ReadRankStats(path, 0);
  } catch (const RecordError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return "D" + what.substr(dir.path().size());
  }
  return "no error";
}

TEST(RankStats, TruncatedForeignAndMistypedFilesAreOneLineNamingFileAndKey) {
  RankStats s = Sample();
  s.rank = 0;
  const std::string whole = RankStatsJson(s);
  const json j = json::parse(whole);
  EXPECT_EQ(ErrorFor(whole), "no error");
  // Cut short (a copy of a file being written, a full disk).
  EXPECT_EQ(
      ErrorFor(whole.substr(0, whole.size() / 2)).rfind("D/rank-0.stats.json: malformed JSON: ", 0),
      0u);
  EXPECT_EQ(ErrorFor("").rfind("D/rank-0.stats.json: malformed JSON: ", 0), 0u);
  EXPECT_EQ(ErrorFor("[1, 2]"), "D/rank-0.stats.json: expected a JSON object");
  EXPECT_EQ(ErrorFor(R"({"rank": 3})"),
            "D/rank-0.stats.json: 'rank': is 3 but the file name says rank 0");
  json bad = j;
  bad["steps"] = "many";
  EXPECT_EQ(ErrorFor(bad.dump()), "D/rank-0.stats.json: 'steps': expected a number, got \"many\"");
  bad = j;
  bad["step_seconds"]["p99"] = nullptr;  // null is missing
  EXPECT_EQ(ErrorFor(bad.dump()), "no error");
  bad["step_seconds"]["p99"] = true;
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/rank-0.stats.json: 'step_seconds.p99': expected a number, got true");
  bad = j;
  bad["straggler"]["culprit_steps"] = {{"x", 1}};
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/rank-0.stats.json: 'straggler.culprit_steps': 'x' is not a rank");
  bad = j;
  bad["input_wait_seconds"]["steps"] = -1;
  EXPECT_EQ(
      ErrorFor(bad.dump()),
      "D/rank-0.stats.json: 'input_wait_seconds.steps': expected a whole number >= 0, got -1");
  bad = j;
  bad["collectives"] = {{"op", "allreduce"}};
  EXPECT_EQ(ErrorFor(bad.dump()), "D/rank-0.stats.json: 'collectives': expected a list");
  bad = j;
  bad["collectives"][1].erase("op");
  EXPECT_EQ(ErrorFor(bad.dump()), "D/rank-0.stats.json: 'collectives[1].op': missing");
  bad = j;
  bad["collectives"][0]["bytes_total"] = 1.5;
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/rank-0.stats.json: 'collectives[0].bytes_total': expected a whole number >= 0, "
            "got 1.5");
  bad = j;
  bad["world_size"] = 1e30;
  EXPECT_EQ(ErrorFor(bad.dump())
                .rfind("D/rank-0.stats.json: 'world_size': expected a whole "
                       "number in [0, ",
                       0),
            0u);
  TempDir dir;
  try {
    ReadRankStats(dir.path() + "/rank-0.stats.json", 0);
    ADD_FAILURE() << "a missing file was read";
  } catch (const RecordError& e) {
    EXPECT_EQ(std::string(e.what()), dir.path() + "/rank-0.stats.json: cannot be read");
  }
}

}  // namespace
}  // namespace ringpilot::history
