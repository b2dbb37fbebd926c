// RUN_DIR/launcher.json (history/launcher_record.h): what the launcher writes is what
// `status`, `logs -f`, `stop` and diagnose read back; the text is the launcher's as before
// the format moved here; truncated, foreign and mistyped files give one line naming the file
// and the key (and nothing, quietly, to the readers that go on without a record).
#include "history/launcher_record.h"

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

LauncherRecord Sample() {
  LauncherRecord r;
  r.pid = 4242;
  r.host = "login-1";
  r.executable = "/opt/ringpilot/bin/ringpilot";
  r.started = "2026-01-02T03:04:05.678Z";
  r.updated = "2026-01-02T04:05:06.789Z";
  r.attempt = 3;
  r.max_attempts = 4;
  r.run = 2;
  r.attempts_before = 1;
  r.state = RunState::kStopped;
  r.detail = "stopped by ringpilot stop";
  r.exit_status = 79;
  r.slurm_job_id = "99";
  return r;
}

TEST(LauncherRecord, WhatIsWrittenIsReadBack) {
  TempDir dir;
  const std::string path = LauncherRecordPath(dir.path());
  EXPECT_EQ(path, dir.path() + "/launcher.json");
  EXPECT_FALSE(ReadLauncherRecord(path).has_value()) << "no file: no record";
  WriteLauncherRecord(path, Sample());
  const std::optional<LauncherRecord> r = ReadLauncherRecord(path);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->pid, 4242);
  EXPECT_EQ(r->host, "login-1");
  EXPECT_EQ(r->executable, "/opt/ringpilot/bin/ringpilot");
  EXPECT_EQ(r->started, "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(r->updated, "2026-01-02T04:05:06.789Z");
  EXPECT_EQ(r->attempt, 3);
  EXPECT_EQ(r->max_attempts, 4);
  EXPECT_EQ(r->run, 2);
  EXPECT_EQ(r->attempts_before, 1);
  EXPECT_EQ(r->state, RunState::kStopped);
  EXPECT_EQ(r->detail, "stopped by ringpilot stop");
  EXPECT_EQ(r->exit_status, 79);
  EXPECT_EQ(r->slurm_job_id, "99");
  EXPECT_EQ(LauncherJson(*r), testing::ReadFile(path));
  // The launcher's text, key for key in this order; no exit status or Slurm job while it
  // runs outside Slurm.
  LauncherRecord running = Sample();
  running.state = RunState::kRunning;
  running.detail = "";
  running.exit_status.reset();
  running.slurm_job_id = "";
  EXPECT_EQ(LauncherJson(running),
            "{\n"
            "  \"pid\": 4242,\n"
            "  \"host\": \"login-1\",\n"
            "  \"executable\": \"/opt/ringpilot/bin/ringpilot\",\n"
            "  \"started\": \"2026-01-02T03:04:05.678Z\",\n"
            "  \"updated\": \"2026-01-02T04:05:06.789Z\",\n"
            "  \"attempt\": 3,\n"
            "  \"max_attempts\": 4,\n"
            "  \"run\": 2,\n"
            "  \"attempts_before\": 1,\n"
            "  \"state\": \"running\",\n"
            "  \"detail\": \"\"\n"
            "}\n");
  WriteLauncherRecord(path, running);
  EXPECT_FALSE(ReadLauncherRecord(path)->exit_status.has_value());
  for (const RunState s :
       {RunState::kRunning, RunState::kFinished, RunState::kFailed, RunState::kStopped}) {
    EXPECT_EQ(RunStateFromString(ToString(s)), s);
  }
  EXPECT_FALSE(RunStateFromString("sleeping").has_value());
}

TEST(LauncherRecord, OnlyPidAndStateAreRequired) {
  TempDir dir;
  const std::string path = LauncherRecordPath(dir.path());
  WriteFile(path, R"({"pid": 7, "state": "failed"})");
  const std::optional<LauncherRecord> r = ReadLauncherRecord(path);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->pid, 7);
  EXPECT_EQ(r->state, RunState::kFailed);
  EXPECT_EQ(r->attempt, 0);
  EXPECT_EQ(r->max_attempts, 1);
  EXPECT_EQ(r->run, 1);
  EXPECT_FALSE(r->exit_status.has_value());
}

// What ReadLauncherRecord throws for `text` in DIR/launcher.json, with DIR replaced by "D";
// ReadLauncherRecordIfValid must give nothing for it.
std::string ErrorFor(const std::string& text) {
  TempDir dir;
  const std::string path = LauncherRecordPath(dir.path());
  WriteFile(path, text);
  try {
    ReadLauncherRecord(path);
  } catch (const RecordError& e) {
    EXPECT_FALSE(ReadLauncherRecordIfValid(path).has_value()) << text;
    std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return "D" + what.substr(dir.path().size());
  }
  EXPECT_TRUE(ReadLauncherRecordIfValid(path).has_value()) << text;
  return "no error";
}

TEST(LauncherRecord, TruncatedForeignAndMistypedFilesAreOneLineNamingFileAndKey) {
  const std::string whole = LauncherJson(Sample());
  const json j = json::parse(whole);
  EXPECT_EQ(ErrorFor(whole), "no error");
  EXPECT_EQ(
      ErrorFor(whole.substr(0, whole.size() / 2)).rfind("D/launcher.json: malformed JSON: ", 0),
      0u);
  EXPECT_EQ(ErrorFor("").rfind("D/launcher.json: malformed JSON: ", 0), 0u);
  EXPECT_EQ(ErrorFor("[1]"), "D/launcher.json: expected a JSON object");
  json bad = j;
  bad.erase("pid");
  EXPECT_EQ(ErrorFor(bad.dump()), "D/launcher.json: 'pid': missing");
  bad = j;
  bad.erase("state");
  EXPECT_EQ(ErrorFor(bad.dump()), "D/launcher.json: 'state': missing");
  bad = j;
  bad["state"] = "sleeping";
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/launcher.json: 'state': 'sleeping' is not running, finished, failed or stopped");
  bad = j;
  bad["pid"] = "4242";
  EXPECT_EQ(ErrorFor(bad.dump()), "D/launcher.json: 'pid': expected a number, got \"4242\"");
  bad = j;
  bad["attempt"] = 1.5;
  EXPECT_EQ(ErrorFor(bad.dump()).rfind("D/launcher.json: 'attempt': expected a whole number", 0),
            0u);
  bad = j;
  bad["detail"] = 3;
  EXPECT_EQ(ErrorFor(bad.dump()), "D/launcher.json: 'detail': expected a string, got 3");
  bad = j;
  bad["exit_status"] = 300;
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/launcher.json: 'exit_status': expected a whole number in [0, 255], got 300");
}

}  // namespace
}  // namespace ringpilot::history
