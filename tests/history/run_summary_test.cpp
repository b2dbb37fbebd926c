// RUN_DIR/summary.json (history/run_summary.h): what the trainer writes through
// RunSummaryJson and WriteRunSummary is what `status`, `ringpilot run` and diagnose read
// back, the trainer's other fields and the attempts' view kept as written; truncated,
// foreign and mistyped files give one line naming the file and the key (and nothing,
// quietly, to the readers for whom such a file is no finished run).
#include "history/run_summary.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history/attempts.h"
#include "history/record_fields.h"
#include "tests/test_util.h"

namespace ringpilot::history {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::WriteFile;

RunSummary Sample() {
  RunSummary s;
  s.name = "resnet-cifar";
  s.world_size = 4;
  s.steps = 3000000000;  // beyond int
  s.epochs = 12;
  s.final_loss = 0.8125;
  s.samples_per_second = 1234.5;
  s.step_seconds_p50 = 0.031;
  s.step_seconds_p99 = 0.047;
  s.restarts = 2;
  return s;
}

// The last attempt's summary as the trainer has it when it writes summary.json: the read
// fields, its own, and the attempt's progress.
json LastAttempt(const RunSummary& s) {
  json j = RunSummaryJson(s);
  j.update({{"param_sha256", "ab12"}, {"final_loss_rank0", 0.8}});
  AttemptProgress p;
  p.attempt = 3;
  p.resumed_from_step = 10;
  p.last_step = 20;
  p.outcome = kCompleted;
  j.update(AttemptProgressJson(p));
  return j;
}

TEST(RunSummary, WhatTheTrainerWritesIsReadBack) {
  TempDir dir;
  const std::string path = RunSummaryPath(dir.path());
  EXPECT_EQ(path, dir.path() + "/summary.json");
  EXPECT_FALSE(ReadRunSummary(path).has_value()) << "no file: no summary";
  EXPECT_FALSE(ReadRunSummaryIfValid(path).has_value());
  WriteRunSummary(dir.path(), LastAttempt(Sample()));
  const std::optional<RunSummary> r = ReadRunSummary(path);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->name, "resnet-cifar");
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->steps, 3000000000);
  EXPECT_EQ(r->epochs, 12);
  EXPECT_EQ(r->final_loss, 0.8125);
  EXPECT_EQ(r->samples_per_second, 1234.5);
  EXPECT_EQ(r->step_seconds_p50, 0.031);
  EXPECT_EQ(r->step_seconds_p99, 0.047);
  EXPECT_EQ(r->restarts, 2);
  // The trainer's own fields and the view over the attempts, as written.
  EXPECT_EQ(r->as_written["param_sha256"], "ab12");
  EXPECT_EQ(r->as_written["runs"], 0);  // no attempts/ in this directory
  EXPECT_TRUE(r->as_written["attempts"].is_array());
  EXPECT_FALSE(r->as_written.contains("outcome")) << "the attempt-only fields are not the run's";
  EXPECT_EQ(ReadRunSummaryIfValid(path)->steps, 3000000000);
  // The read fields are written again the same.
  json again = RunSummaryJson(*r);
  for (const auto& [key, value] : again.items()) EXPECT_EQ(r->as_written[key], value) << key;
}

TEST(RunSummary, UnknownNumbersAreNullAndEpochsOnlyWhenCounted) {
  RunSummary s;
  s.steps = 5;
  const json j = RunSummaryJson(s);
  EXPECT_TRUE(j["final_loss"].is_null());
  EXPECT_TRUE(j["samples_per_second"].is_null());
  EXPECT_FALSE(j.contains("epochs"));
  TempDir dir;
  WriteRunSummary(dir.path(), j);
  const std::optional<RunSummary> r = ReadRunSummary(RunSummaryPath(dir.path()));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->steps, 5);
  EXPECT_FALSE(r->final_loss.has_value());
  EXPECT_FALSE(r->samples_per_second.has_value());
  EXPECT_EQ(r->epochs, 0);
}

TEST(RunSummary, OnlyStepsIsRequired) {
  TempDir dir;
  const std::string path = RunSummaryPath(dir.path());
  WriteFile(path, R"({"steps": 7})");
  const std::optional<RunSummary> r = ReadRunSummary(path);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->steps, 7);
  EXPECT_EQ(r->name, "");
  EXPECT_EQ(r->world_size, 0);
  EXPECT_EQ(r->restarts, 0);
  EXPECT_FALSE(r->final_loss.has_value());
}

// What ReadRunSummary throws for `text` in DIR/summary.json, with DIR replaced by "D";
// ReadRunSummaryIfValid must give nothing for it.
std::string ErrorFor(const std::string& text) {
  TempDir dir;
  const std::string path = RunSummaryPath(dir.path());
  WriteFile(path, text);
  try {
    ReadRunSummary(path);
  } catch (const RecordError& e) {
    EXPECT_FALSE(ReadRunSummaryIfValid(path).has_value()) << text;
    std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return "D" + what.substr(dir.path().size());
  }
  EXPECT_TRUE(ReadRunSummaryIfValid(path).has_value()) << text;
  return "no error";
}

TEST(RunSummary, TruncatedForeignAndMistypedFilesAreOneLineNamingFileAndKey) {
  const std::string whole = LastAttempt(Sample()).dump(2);
  const json j = json::parse(whole);
  EXPECT_EQ(ErrorFor(whole), "no error");
  EXPECT_EQ(
      ErrorFor(whole.substr(0, whole.size() / 2)).rfind("D/summary.json: malformed JSON: ", 0), 0u);
  EXPECT_EQ(ErrorFor("").rfind("D/summary.json: malformed JSON: ", 0), 0u);
  EXPECT_EQ(ErrorFor("[1]"), "D/summary.json: expected a JSON object");
  json bad = j;
  bad.erase("steps");
  EXPECT_EQ(ErrorFor(bad.dump()), "D/summary.json: 'steps': missing");
  bad["steps"] = nullptr;
  EXPECT_EQ(ErrorFor(bad.dump()), "D/summary.json: 'steps': missing");
  bad["steps"] = "many";
  EXPECT_EQ(ErrorFor(bad.dump()), "D/summary.json: 'steps': expected a number, got \"many\"");
  bad["steps"] = -1;
  EXPECT_EQ(ErrorFor(bad.dump()), "D/summary.json: 'steps': expected a whole number >= 0, got -1");
  bad = j;
  bad["steps"] = 9223372036854775808ULL;
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/summary.json: 'steps': expected a whole number below 2^63, got "
            "9223372036854775808");
  bad = j;
  bad["epochs"] = 2.5;
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/summary.json: 'epochs': expected a whole number >= 0, got 2.5");
  bad = j;
  bad["final_loss"] = "low";
  EXPECT_EQ(ErrorFor(bad.dump()), "D/summary.json: 'final_loss': expected a number, got \"low\"");
  bad = j;
  bad["world_size"] = 1.5;
  EXPECT_EQ(ErrorFor(bad.dump()).rfind("D/summary.json: 'world_size': expected a whole number", 0),
            0u);
  bad = j;
  bad["restarts"] = -1;
  EXPECT_EQ(ErrorFor(bad.dump()).rfind("D/summary.json: 'restarts': expected a whole number", 0),
            0u);
  bad = j;
  bad["name"] = 3;
  EXPECT_EQ(ErrorFor(bad.dump()), "D/summary.json: 'name': expected a string, got 3");
  bad = j;
  bad["samples_per_second"] = json::array();
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/summary.json: 'samples_per_second': expected a number, got []");
}

TEST(RunSummary, TheQuietReaderGivesNothingForAMissingOrGarbledFile) {
  TempDir dir;
  const std::string path = RunSummaryPath(dir.path());
  EXPECT_FALSE(ReadRunSummaryIfValid(path).has_value());
  WriteFile(path, "{\"steps\": 4");
  EXPECT_FALSE(ReadRunSummaryIfValid(path).has_value());
  WriteFile(path, "\x01\x02 not json");
  EXPECT_FALSE(ReadRunSummaryIfValid(path).has_value());
  WriteFile(path, R"({"final_loss": 1.0})");  // no steps: no finished run
  EXPECT_FALSE(ReadRunSummaryIfValid(path).has_value());
  WriteFile(path, R"({"steps": 4, "final_loss": 1.0})");
  EXPECT_EQ(ReadRunSummaryIfValid(path)->steps, 4);
}

}  // namespace
}  // namespace ringpilot::history
