// `ringpilot diagnose` merging per-rank Chrome traces (tests/fixtures/diagnose/traces/)
// into RUN_DIR/trace.json.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "diagnose/command.h"
#include "diagnose/diagnose.h"
#include "tests/test_util.h"

namespace ringpilot::diagnose {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ReadFile;
using testing::TempDir;

std::string Fixture(const std::string& name) {
  const char* src = std::getenv("RINGPILOT_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/diagnose/" + name;
}

// A run directory with the straggler fixture's statistics and the given rank traces.
void MakeRun(const std::string& dir, std::initializer_list<int> ranks) {
  fs::copy(Fixture("straggler"), dir, fs::copy_options::recursive);
  for (int r : ranks) {
    const std::string name = "trace-rank-" + std::to_string(r) + ".json";
    fs::copy_file(Fixture("traces/" + name), dir + "/" + name);
  }
}

TEST(DiagnoseTrace, MergesRanksIntoOneTimeline) {
  TempDir tmp;
  MakeRun(tmp.path(), {0, 1});
  const TraceMerge m = MergeTraces(tmp.path());
  EXPECT_EQ(m.path, tmp.path() + "/trace.json");
  EXPECT_EQ(m.ranks, 2);
  EXPECT_EQ(m.events, 7u);
  EXPECT_TRUE(m.warnings.empty());
  const json doc = json::parse(ReadFile(m.path));
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  std::map<int, std::string> names;
  std::map<int, int> complete;
  for (const json& ev : doc.at("traceEvents")) {
    const int pid = ev.at("pid").get<int>();
    if (ev.at("ph") == "M" && ev.at("name") == "process_name") {
      EXPECT_EQ(names.count(pid), 0u) << "one process_name per rank";
      names[pid] = ev.at("args").at("name");
    }
    if (ev.at("ph") == "X") ++complete[pid];
  }
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "rank 0 (node-a)"}, {1, "rank 1 (node-b)"}}));
  EXPECT_EQ(complete, (std::map<int, int>{{0, 4}, {1, 3}}));
}

TEST(DiagnoseTrace, MalformedRankFileIsSkippedWithWarning) {
  TempDir tmp;
  MakeRun(tmp.path(), {0, 2});
  const TraceMerge m = MergeTraces(tmp.path());
  EXPECT_EQ(m.ranks, 1);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("trace-rank-2.json"), std::string::npos) << m.warnings[0];
}

TEST(DiagnoseTrace, NoTracesNoFile) {
  TempDir tmp;
  MakeRun(tmp.path(), {});
  const TraceMerge m = MergeTraces(tmp.path());
  EXPECT_TRUE(m.path.empty());
  EXPECT_FALSE(fs::exists(tmp.path() + "/trace.json"));
}

TEST(DiagnoseTrace, ReportSaysWhere) {
  TempDir tmp;
  MakeRun(tmp.path(), {0, 1});
  DiagnoseArgs args;
  args.run_dir = tmp.path();
  args.infiniband_dir = "/nonexistent";
  std::ostringstream out, err;
  ASSERT_EQ(RunDiagnose(args, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("trace: " + tmp.path() + "/trace.json (2 rank(s), 7 events"),
            std::string::npos)
      << out.str();
  args.json = true;
  std::ostringstream jout;
  ASSERT_EQ(RunDiagnose(args, jout, err), 0);
  EXPECT_EQ(json::parse(jout.str()).at("trace"), tmp.path() + "/trace.json");
}

}  // namespace
}  // namespace ringpilot::diagnose
