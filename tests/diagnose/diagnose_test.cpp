// `ringpilot diagnose` against the run directories in tests/fixtures/diagnose/, its
// parsers, the binary end to end, and the Grafana dashboard in deploy/grafana/.
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "diagnose/command.h"
#include "diagnose/diagnose.h"
#include "tests/test_util.h"

namespace ringpilot::diagnose {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::RingpilotBinary;
using testing::RunProcess;
using testing::SplitLines;
using testing::TempDir;
using testing::WriteFile;

std::string Source(const std::string& rel) {
  const char* src = std::getenv("RINGPILOT_SOURCE_DIR");
  return std::string(src ? src : ".") + "/" + rel;
}
std::string Fixture(const std::string& name) { return Source("tests/fixtures/diagnose/" + name); }

struct Result {
  int status;
  std::string out, err;
};

Result Diagnose(const std::string& run_dir, bool as_json,
                const std::string& ib_dir = "/nonexistent", const std::string& svg_dir = "") {
  DiagnoseArgs args;
  args.run_dir = run_dir;
  args.json = as_json;
  args.svg_dir = svg_dir;
  args.infiniband_dir = ib_dir;
  std::ostringstream out, err;
  const int status = RunDiagnose(args, out, err);
  return {status, out.str(), err.str()};
}

TEST(DiagnoseParse, NcclChannelLines) {
  int from = -1, to = -1;
  std::string t;
  EXPECT_TRUE(ParseNcclChannelLine("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
                                   &from, &to, &t));
  EXPECT_EQ(from, 0);
  EXPECT_EQ(to, 1);
  EXPECT_EQ(t, "P2P");
  EXPECT_TRUE(ParseNcclChannelLine(
      "h:1:2 [1] NCCL INFO Channel 03/0 : 12[1] -> 3[0] [send] via NET/Socket/0", &from, &to, &t));
  EXPECT_EQ(from, 12);
  EXPECT_EQ(to, 3);
  EXPECT_EQ(t, "NET_Socket");
  EXPECT_TRUE(ParseNcclChannelLine("x NCCL INFO Channel 01 : 2[0] -> 3[1] via SHM/direct/direct",
                                   &from, &to, &t));
  EXPECT_EQ(t, "SHM");
  EXPECT_TRUE(ParseNcclChannelLine(
      "x NCCL INFO Channel 00/1 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA", &from, &to, &t));
  EXPECT_EQ(t, "NET_IB");
  EXPECT_FALSE(ParseNcclChannelLine("x NCCL INFO Connected all rings", &from, &to, &t));
  EXPECT_FALSE(ParseNcclChannelLine(
      "x NCCL INFO Channel 00/0 : 99999999999999999999[0] -> 1[1] via P2P/IPC", &from, &to, &t));
  EXPECT_FALSE(ParseNcclChannelLine("x NCCL INFO NET/Socket : Using [0]eth0", &from, &to, &t));
  EXPECT_EQ(ClassifyTransport("NET/IBext/0"), "NET_IB");
  EXPECT_EQ(ClassifyTransport("NET/AWS Libfabric/0"), "NET_AWS_Libfabric");
  EXPECT_EQ(ClassifyTransport("something"), "");
}

TEST(DiagnoseParse, SizeBuckets) {
  EXPECT_EQ(ParseSizeBucket("1MiB-4MiB"), std::make_pair(1048576.0, 4194304.0));
  EXPECT_EQ(ParseSizeBucket("<1KiB"), std::make_pair(-1.0, 1024.0));
  EXPECT_EQ(ParseSizeBucket(">=1GiB"), std::make_pair(1073741824.0, -1.0));
  EXPECT_EQ(ParseSizeBucket("large"), std::make_pair(-1.0, -1.0));
}

TEST(Diagnose, NamesTheStragglerAndFlagsLowBandwidth) {
  const Result r = Diagnose(Fixture("straggler"), true);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const json j = json::parse(r.out);
  EXPECT_EQ(j["straggler"]["rank"], 2);
  EXPECT_NEAR(j["straggler"]["wait_seconds"].get<double>(), 2.7, 1e-9);
  EXPECT_NEAR(j["straggler"]["wait_seconds_per_rank_step"].get<double>(), 0.045, 1e-9);
  EXPECT_EQ(j["straggler"]["node"], "host-b");
  ASSERT_EQ(j["straggler_ranking"].size(), 2u);
  EXPECT_EQ(j["straggler_ranking"][1]["rank"], 0);
  EXPECT_NEAR(j["straggler_ranking"][1]["wait_seconds"].get<double>(), 0.005, 1e-9);
  ASSERT_EQ(j["ranks"].size(), 4u);
  EXPECT_EQ(j["ranks"][3]["node"], "host-b");
  // comm_exposed 1.1 s of 20 * 0.112 s.
  EXPECT_NEAR(j["ranks"][0]["comm_exposed_share"].get<double>(), 1.1 / 2.24, 1e-9);
  EXPECT_NEAR(j["comm"]["overlap_ratio"].get<double>(), 0.4, 1e-9);
  EXPECT_NEAR(j["comm"]["exposed_share"].get<double>(), 3.5 / 8.96, 1e-9);
  const json& coll = j["comm"]["collectives"];
  ASSERT_EQ(coll.size(), 4u);
  // Sorted by op, then size; below half of the expected 1 GB/s are the two small buckets.
  EXPECT_EQ(coll[0]["size_bucket"], "64KiB-256KiB");
  EXPECT_TRUE(coll[0]["below_half_of_expected"].get<bool>());
  EXPECT_EQ(coll[1]["size_bucket"], "1MiB-4MiB");
  EXPECT_NEAR(coll[1]["busbw_bytes_per_second"].get<double>(), 2.05e8, 1);
  EXPECT_EQ(coll[1]["busbw_min_rank"], 3);
  EXPECT_EQ(coll[1]["count"], 160);
  EXPECT_TRUE(coll[1]["below_half_of_expected"].get<bool>());
  EXPECT_EQ(coll[2]["size_bucket"], "16MiB-64MiB");
  EXPECT_FALSE(coll[2]["below_half_of_expected"].get<bool>());
  EXPECT_EQ(coll[3]["op"], "broadcast");
  EXPECT_TRUE(coll[3]["expected_busbw_bytes_per_second"].is_null());
  EXPECT_EQ(j["restarts"], 1);
  // Transports per peer, from the NCCL logs; no InfiniBand here, so no socket warning.
  ASSERT_EQ(j["transports"].size(), 8u);
  EXPECT_EQ(j["transports"][1], json({{"rank", 0}, {"peer", 3}, {"transports", {"NET_Socket"}}}));
  EXPECT_EQ(j["transports"][0]["transports"], json({"P2P"}));
  std::string warnings = j["warnings"].dump();
  EXPECT_NE(warnings.find("straggler: rank 2"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("allreduce 1MiB-4MiB: bus bandwidth 0.205 GB/s is 20.5%"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("restarted 1 time"), std::string::npos);
  EXPECT_EQ(warnings.find("NET/Socket"), std::string::npos) << warnings;
  EXPECT_TRUE(j["missing"].empty());
}

TEST(Diagnose, WarnsOnSocketFallbackWhenInfinibandPortsExist) {
  const Result r = Diagnose(Fixture("straggler"), true, Fixture("sysfs-ib"));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["infiniband_ports"], json({"mlx5_0/1"}));
  std::vector<std::string> socket;
  for (const auto& w : j["warnings"]) {
    if (w.get<std::string>().find("NET/Socket") != std::string::npos) socket.push_back(w);
  }
  ASSERT_EQ(socket.size(), 2u) << j["warnings"].dump();
  EXPECT_EQ(socket[0].rfind("rank 0 reaches rank 3 via NET/Socket although this machine has "
                            "InfiniBand ports (mlx5_0/1)",
                            0),
            0u)
      << socket[0];
  EXPECT_EQ(socket[1].rfind("rank 1 reaches rank 2 via NET/Socket", 0), 0u) << socket[1];
}

TEST(Diagnose, TextReportHasEverySection) {
  const Result r = Diagnose(Fixture("straggler"), false);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* want :
       {"straggler: rank 2 (host-b): the others waited 2.700 s on it in total (0.0450 s per rank "
        "and step); last to be ready on 18.0 of 20 steps",
        "per-rank step time (s):",
        "communication: exposed 39.1% of the step time, overlap ratio 0.40",
        "allreduce  1MiB-4MiB     160", "LOW", "transports (NCCL):", "warnings:",
        "summary: name=diag-straggler world_size=4 steps=20 final_loss=2.31 "
        "samples_per_second=512.5 step_seconds_p50=0.111 step_seconds_p99=0.121 restarts=1\n"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  for (const std::string& line : SplitLines(r.out)) {
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing space: '" << line << "'";
  }
}

TEST(Diagnose, WritesSvgPlots) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/plots/sub";
  const Result r = Diagnose(Fixture("straggler"), true, "/nonexistent", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["plots"].size(), 2u);
  const std::string busbw = ReadFile(dir + "/busbw-vs-size.svg");
  const std::string steps = ReadFile(dir + "/step-time-per-rank.svg");
  for (const std::string* svg : {&busbw, &steps}) {
    EXPECT_EQ(svg->rfind("<?xml", 0), 0u);
    EXPECT_NE(svg->find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
    EXPECT_EQ(svg->substr(svg->size() - 7), "</svg>\n");
  }
  EXPECT_NE(busbw.find("allreduce 1MiB-4MiB: 0.205 GB/s"), std::string::npos);
  EXPECT_NE(busbw.find("allreduce expected"), std::string::npos);
  EXPECT_NE(steps.find("rank 2 (host-b): p50 0.109 s, p99 0.121 s"), std::string::npos);
  EXPECT_NE(steps.find("#d62728"), std::string::npos);  // the straggler's bar

  // A plot directory that cannot be created: exit 1, one line.
  WriteFile(tmp.path() + "/file", "x");
  const Result bad = Diagnose(Fixture("straggler"), false, "/nonexistent", tmp.path() + "/file/d");
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(SplitLines(bad.err).size(), 1u) << bad.err;
}

TEST(Diagnose, SummaryOnlyRunSaysWhatIsMissing) {
  const Result r = Diagnose(Fixture("summary-only"), true);
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["straggler"]["rank"].is_null());
  EXPECT_TRUE(j["ranks"].empty());
  ASSERT_EQ(j["missing"].size(), 1u);
  EXPECT_NE(j["missing"][0].get<std::string>().find("logs/rank-<N>.stats.json"), std::string::npos);
  EXPECT_EQ(j["summary"]["name"], "old-run");
  const Result text = Diagnose(Fixture("summary-only"), false);
  EXPECT_NE(text.out.find("missing: logs/rank-<N>.stats.json"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("samples_per_second=456.7"), std::string::npos) << text.out;
}

TEST(Diagnose, FailureBeforeTheFirstStepIsReported) {
  // What a run that failed before its first step leaves (a bad data file, a metrics port
  // taken): job.yaml, launcher.json, failure.json and logs/, no attempts/ or summary.json.
  // `status` read it; diagnose said "not a run directory" and exited 2.
  TempDir tmp;
  WriteFile(tmp.path() + "/job.yaml", "name: t\nmodel: {name: resnet18-cifar}\n");
  WriteFile(tmp.path() + "/launcher.json",
            R"({"pid": 1, "state": "failed", "attempt": 1, "max_attempts": 3})");
  const std::string fatal =
      "/d/data_batch_1.bin: 5000 records, but CIFAR-10's data_batch_1.bin "
      "holds 10000 (cut short? a file of other records must not have a "
      "distribution name)";
  WriteFile(tmp.path() + "/failure.json", json({{"attempts", 1},
                                                {"exit_code", 78},
                                                {"first_failing_rank", 0},
                                                {"first_failing_rank_source", "fatal_line"},
                                                {"fatal_message", fatal},
                                                {"ranks", json::object()}})
                                              .dump());
  std::filesystem::create_directories(tmp.path() + "/logs");
  const Result text = Diagnose(tmp.path(), false);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("\nfailure: attempt 1 failed before its first step (exit 78): rank 0: " +
                          fatal + " (failure.json)\n"),
            std::string::npos)
      << text.out;
  const Result as_json = Diagnose(tmp.path(), true);
  ASSERT_EQ(as_json.status, 0) << as_json.err;
  const json j = json::parse(as_json.out)["attempts"]["failure"];
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["before_first_step"], true);
  EXPECT_EQ(j["exit_code"], 78);
  EXPECT_EQ(j["first_failing_rank"], 0);
  EXPECT_EQ(j["fatal_message"], fatal);
  // Without launcher.json (an older launcher) the failure.json alone says it failed; killed
  // by a signal, the exit is the signal.
  std::filesystem::remove(tmp.path() + "/launcher.json");
  WriteFile(
      tmp.path() + "/failure.json",
      json({{"attempts", 2}, {"signal", 9}, {"signal_name", "SIGKILL"}, {"first_failing_rank", -1}})
          .dump());
  const Result killed = Diagnose(tmp.path(), false);
  ASSERT_EQ(killed.status, 0) << killed.err;
  EXPECT_NE(killed.out.find("failure: attempt 2 failed before its first step (killed by SIGKILL): "
                            "rank unknown (failure.json)"),
            std::string::npos)
      << killed.out;
  // A job file alone (a run whose launcher is starting): a report that says what is missing.
  std::filesystem::remove(tmp.path() + "/failure.json");
  EXPECT_EQ(Diagnose(tmp.path(), false).status, 0);
}

// A program on gloo: no NCCL records, only what `ringpilot exec` saw of its processes.
TEST(Diagnose, AProgramWithoutNcclIsReportedFromItsProcesses) {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path() + "/logs");
  WriteFile(tmp.path() + "/logs/rank-0.program.json",
            R"({"rank": 0, "pid": 41, "command": "python3 train.py --steps 600", "state": "exited",
 "started_unix": 1000, "unix": 1060, "cpu_seconds": 110.5, "rss_bytes": 524288000,
 "progress": {"step": 600, "steps": 600, "loss": 0.3012, "unix": 1059}, "status": 0})");
  WriteFile(tmp.path() + "/logs/rank-1.program.json",
            R"({"rank": 1, "pid": 42, "command": "python3 train.py --steps 600", "state": "exited",
 "started_unix": 1000, "unix": 1060, "status": 0})");
  const Result text = Diagnose(tmp.path(), false);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("\nprogram: python3 train.py --steps 600\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("progress: step 600/600 loss 0.3012 (rank 0's last progress line"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("communication: no NCCL records"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("missing: summary.json"), std::string::npos) << text.out;
  const Result j = Diagnose(tmp.path(), true);
  ASSERT_EQ(j.status, 0) << j.err;
  const json program = json::parse(j.out)["program"];
  EXPECT_EQ(program["command"], "python3 train.py --steps 600");
  EXPECT_EQ(program["nccl"], false);
  ASSERT_EQ(program["processes"].size(), 2u);
  EXPECT_EQ(program["processes"][0]["progress"]["step"], 600);
  EXPECT_EQ(program["processes"][0]["cpu_seconds"], 110.5);
  EXPECT_TRUE(program["processes"][1]["progress"].is_null());
}

TEST(Diagnose, BadInputIsOneLineAndExit2) {
  const Result malformed = Diagnose(Fixture("malformed"), false);
  EXPECT_EQ(malformed.status, 2);
  EXPECT_EQ(malformed.out, "");
  ASSERT_EQ(SplitLines(malformed.err).size(), 1u) << malformed.err;
  EXPECT_NE(malformed.err.find("malformed/logs/rank-1.stats.json: malformed JSON: parse error at "
                               "line 2"),
            std::string::npos)
      << malformed.err;

  const Result missing = Diagnose("/nonexistent/run-dir", false);
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err, "ringpilot diagnose: /nonexistent/run-dir: no such run directory\n");

  TempDir tmp;
  const Result empty = Diagnose(tmp.path(), false);
  EXPECT_EQ(empty.status, 2);
  EXPECT_NE(empty.err.find("not a run directory"), std::string::npos) << empty.err;

  std::filesystem::create_directories(tmp.path() + "/logs");
  WriteFile(tmp.path() + "/logs/rank-0.stats.json", R"({"rank": 0, "steps": "many"})");
  const Result typed = Diagnose(tmp.path(), false);
  EXPECT_EQ(typed.status, 2);
  EXPECT_EQ(typed.err, "ringpilot diagnose: " + tmp.path() +
                           "/logs/rank-0.stats.json: 'steps': expected a number, got \"many\"\n");

  WriteFile(tmp.path() + "/logs/rank-0.stats.json",
            R"({"rank": 0, "straggler": {"culprit_steps": {"x": 1}}})");
  const Result key = Diagnose(tmp.path(), false);
  EXPECT_EQ(key.status, 2);
  EXPECT_NE(key.err.find("'straggler.culprit_steps': 'x' is not a rank"), std::string::npos)
      << key.err;

  WriteFile(tmp.path() + "/logs/rank-0.stats.json", R"({"rank": 0, "world_size": 1e30})");
  const Result huge = Diagnose(tmp.path(), false);
  EXPECT_EQ(huge.status, 2);
  EXPECT_NE(huge.err.find("'world_size': expected a whole number"), std::string::npos) << huge.err;

  WriteFile(tmp.path() + "/logs/rank-0.stats.json", R"({"rank": 0, "collectives": [3]})");
  const Result item = Diagnose(tmp.path(), false);
  EXPECT_EQ(item.status, 2);
  EXPECT_NE(item.err.find("'collectives[0]': expected a JSON object"), std::string::npos)
      << item.err;

  WriteFile(tmp.path() + "/logs/rank-0.stats.json", R"({"rank": 1})");
  const Result mismatch = Diagnose(tmp.path(), false);
  EXPECT_EQ(mismatch.status, 2);
  EXPECT_NE(mismatch.err.find("'rank': is 1 but the file name says rank 0"), std::string::npos)
      << mismatch.err;

  // launcher.json is read through history/launcher_record.h as well.
  std::filesystem::remove(tmp.path() + "/logs/rank-0.stats.json");
  WriteFile(tmp.path() + "/launcher.json", R"({"state": "running"})");
  const Result launcher = Diagnose(tmp.path(), false);
  EXPECT_EQ(launcher.status, 2);
  EXPECT_EQ(launcher.err, "ringpilot diagnose: " + tmp.path() + "/launcher.json: 'pid': missing\n");

  // And summary.json through history/run_summary.h.
  std::filesystem::remove(tmp.path() + "/launcher.json");
  WriteFile(tmp.path() + "/summary.json", R"({"name": "x", "world_size": 2})");
  const Result summary = Diagnose(tmp.path(), false);
  EXPECT_EQ(summary.status, 2);
  EXPECT_EQ(summary.err, "ringpilot diagnose: " + tmp.path() + "/summary.json: 'steps': missing\n");
  WriteFile(tmp.path() + "/summary.json", R"({"steps": 5, "restarts": "two"})");
  const Result restarts = Diagnose(tmp.path(), false);
  EXPECT_EQ(restarts.status, 2);
  EXPECT_EQ(restarts.err, "ringpilot diagnose: " + tmp.path() +
                              "/summary.json: 'restarts': expected a number, got \"two\"\n");
}

TEST(Diagnose, MissingRanksAreNamed) {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path() + "/logs");
  WriteFile(tmp.path() + "/summary.json",
            R"({"name": "x", "world_size": 3, "steps": 4, "restarts": 0})");
  WriteFile(tmp.path() + "/logs/rank-1.stats.json",
            R"({"rank": 1, "world_size": 3, "steps": 4, "step_seconds": {"p50": 0.1}})");
  const Result r = Diagnose(tmp.path(), true);
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["missing"], json({"logs/rank-<N>.stats.json of rank(s) 0,2"}));
  EXPECT_EQ(j["straggler"], json({{"rank", nullptr}, {"wait_seconds", 0.0}}));
}

TEST(DiagnoseBinary, EndToEnd) {
  const auto ok = RunProcess({RingpilotBinary(), "diagnose", Fixture("straggler"), "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(json::parse(ok.out)["straggler"]["rank"], 2);
  const auto bad = RunProcess({RingpilotBinary(), "diagnose", "/nonexistent/run"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "ringpilot diagnose: /nonexistent/run: no such run directory\n");
  const auto usage = RunProcess({RingpilotBinary(), "diagnose"});
  EXPECT_EQ(usage.exit_code, 2);
}

TEST(GrafanaDashboard, IsValidWithTheExpectedPanels) {
  const std::string path = Source("deploy/grafana/ringpilot.json");
  json d;
  ASSERT_NO_THROW(d = json::parse(ReadFile(path))) << path;
  const json& vars = d["templating"]["list"];
  ASSERT_GE(vars.size(), 1u);
  EXPECT_EQ(vars[0]["type"], "datasource");
  EXPECT_EQ(vars[0]["query"], "prometheus");
  std::set<int> ids;
  std::string all_exprs;
  for (const json& p : d["panels"]) {
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate panel id " << p["id"];
    EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << p["title"];
    ASSERT_FALSE(p["targets"].empty()) << p["title"];
    for (const json& t : p["targets"]) all_exprs += t["expr"].get<std::string>() + "\n";
  }
  for (const char* want : {
           "rate(ringpilot_samples_total{",
           "histogram_quantile(0.5, sum by (rank, le) (rate(ringpilot_step_seconds_bucket{",
           "histogram_quantile(0.99, sum by (rank, le) (rate(ringpilot_step_seconds_bucket{",
           "rate(ringpilot_step_phase_seconds_sum{",
           "sum by (culprit_rank) (rate(ringpilot_straggler_wait_seconds_total{",
           "ringpilot_collective_bus_bandwidth_bytes_per_second{",
           "ringpilot_expected_bus_bandwidth_bytes_per_second{",
           "ringpilot_comm_overlap_ratio{",
           "ringpilot_collective_last_started_seq{",
           "ringpilot_collective_last_completed_seq{",
           "ringpilot_gpu_",
           "sum by (rank, cause) (rate(ringpilot_gpu_clock_limited_seconds_total{",
           "ringpilot_gpu_sm_clock_hertz{",
           "ringpilot_gpu_power_watts{",
       }) {
    EXPECT_NE(all_exprs.find(want), std::string::npos) << want;
  }
  bool stacked = false;
  for (const json& p : d["panels"]) {
    if (p["title"].get<std::string>().rfind("Step phases", 0) == 0) {
      stacked = p["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal";
    }
  }
  EXPECT_TRUE(stacked);
}

// RUN/logs/ and the summary.json of a finished 2-rank, 10-step run named `name`.
void MakeTwoRankRun(const std::string& run, const std::string& name) {
  std::filesystem::create_directories(run + "/logs");
  WriteFile(run + "/summary.json",
            R"({"name": ")" + name + R"(", "world_size": 2, "steps": 10, "restarts": 0})");
}

// Input wait (the data phase) over kInputBoundShare of a rank's step time: "input-bound on
// rank N", in the warnings and the JSON; a rank that waits little is not named.
TEST(Diagnose, NamesAnInputBoundRank) {
  TempDir run;
  ASSERT_FALSE(run.path().empty());
  MakeTwoRankRun(run.path(), "diag-input");
  auto stats = [&](int rank, double data_total, double p50, double p99) {
    const json j = {
        {"rank", rank},
        {"node", "host-a"},
        {"local_rank", rank},
        {"world_size", 2},
        {"steps", 10},
        {"step_seconds", {{"p50", 0.1}, {"p99", 0.12}, {"mean", 0.1}}},
        {"phase_seconds_total",
         {{"data", data_total},
          {"forward", 0.2},
          {"backward", 0.3},
          {"optimizer", 0.05},
          {"comm_exposed", 0.01}}},
        {"input_wait_seconds",
         {{"steps", 10}, {"total", data_total}, {"p50", p50}, {"p99", p99}, {"max", p99}}},
        {"straggler",
         {{"wait_seconds_total", 0},
          {"culprit_steps", json::object()},
          {"wait_by_culprit_seconds", json::object()},
          {"compute_skew_seconds_mean", 0}}},
        {"collectives", json::array()},
        {"expected_busbw_bytes_per_second", {{"allreduce", 0}}}};
    WriteFile(run.path() + "/logs/rank-" + std::to_string(rank) + ".stats.json", j.dump());
  };
  stats(0, 0.05, 0.005, 0.006);  // 5% of 1 s
  stats(1, 0.45, 0.044, 0.06);   // 45% of 1 s
  const Result r = Diagnose(run.path(), true);
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["input_bound_ranks"], json::array({1}));
  EXPECT_NEAR(j["ranks"][1]["input_wait_share"].get<double>(), 0.45, 1e-9);
  EXPECT_NEAR(j["ranks"][0]["input_wait_share"].get<double>(), 0.05, 1e-9);
  std::string warnings;
  for (const json& w : j["warnings"]) warnings += w.get<std::string>() + "\n";
  EXPECT_NE(warnings.find("input-bound on rank 1: waiting for input is 45.0% of its step time; "
                          "per step p50 0.0440 s, p99 0.0600 s"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(warnings.find("input-bound on rank 0"), std::string::npos) << warnings;
  const Result text = Diagnose(run.path(), false);
  EXPECT_NE(text.out.find("input-bound on rank 1"), std::string::npos) << text.out;
}

// An image rank's statistics say how it decoded (image_decode): the warning names the
// decoder that set the pace, the images/s its input made, and what would help.
TEST(Diagnose, SaysWhichDecoderHeldAnInputBoundImageRank) {
  TempDir run;
  ASSERT_FALSE(run.path().empty());
  MakeTwoRankRun(run.path(), "diag-decode");
  auto stats = [&](int rank, const std::string& where, const std::string& decision) {
    const json j = {
        {"rank", rank},
        {"world_size", 2},
        {"steps", 10},
        {"step_seconds", {{"p50", 0.1}, {"p99", 0.12}, {"mean", 0.1}}},
        {"phase_seconds_total", {{"data", 0.45}, {"forward", 0.2}, {"backward", 0.3}}},
        {"input_wait_seconds",
         {{"steps", 10}, {"total", 0.45}, {"p50", 0.044}, {"p99", 0.06}, {"max", 0.06}}},
        {"image_decode",
         {{"where", where}, {"threads", 15}, {"batch", 256}, {"decision", decision}}}};
    WriteFile(run.path() + "/logs/rank-" + std::to_string(rank) + ".stats.json", j.dump());
  };
  stats(0, "host",
        "decoding images on host threads (data.gpu_decode auto: 16 cores for this rank, at "
        "least 12), 15 threads at nice 10");
  stats(1, "gpu",
        "decoding JPEGs on the GPU with nvJPEG (hardware JPEG engines, 8 reader threads)");
  const Result r = Diagnose(run.path(), true);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string warnings;
  const json report = json::parse(r.out);
  for (const json& w : report["warnings"]) warnings += w.get<std::string>() + "\n";
  // 256 images per 0.1 s step: 2560/s.
  EXPECT_NE(warnings.find("input-bound on rank 0: waiting for input is 45.0% of its step time; "
                          "per step p50 0.0440 s, p99 0.0600 s; its input made 2560 images/s; "
                          "decoding images on host threads "
                          "(data.gpu_decode auto: 16 cores for this rank, at least 12), 15 "
                          "threads at nice 10. The host's decode threads set the pace: more "
                          "cores per rank, data.gpu_decode true where the GPU has JPEG engines, "
                          "or smaller files (ringpilot data pack --max-side 400 --quality 90; "
                          "docs/data.md)\n"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("input-bound on rank 1: waiting for input is 45.0% of its step time; "
                          "per step p50 0.0440 s, p99 0.0600 s; its input made 2560 images/s; "
                          "decoding JPEGs on the GPU with "
                          "nvJPEG (hardware JPEG engines, 8 reader threads). nvJPEG beside the "
                          "step sets the pace: data.gpu_decode false on a rank with many cores, "
                          "or smaller files"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(warnings.find("more data.workers"), std::string::npos) << warnings;
}

// Rank `rank` of a 2-rank run, 200 timed steps of `step_seconds` each.
RankStats TimedRankOfTwo(int rank, double step_seconds) {
  RankStats r;
  r.rank = rank;
  r.world_size = 2;
  r.steps = 200;
  r.step_p50 = r.step_p99 = r.step_mean = step_seconds;
  return r;
}

// The all-reduces of a healthy overlapped run: slow beside backward, but hidden. Their low bus
// bandwidth is marked in the table without a warning; once they are exposed, it warns.
TEST(Diagnose, LowBandwidthOfHiddenCollectivesIsMarkedWithoutAWarning) {
  RunData run;
  run.run_dir = "/runs/x";
  for (int rank : {0, 1}) {
    RankStats r = TimedRankOfTwo(rank, 0.0145);
    r.phase_seconds_total = {{"backward", 1.85}, {"comm_exposed", 0.001}};
    history::CollectiveTotals c;
    c.op = "allreduce";
    c.size_bucket = "16MiB-64MiB";
    c.count = 2800;
    c.bytes_total = 67434117120;
    c.seconds_total = 478;
    c.busbw_bytes_per_second = 1.41e11;
    r.collectives = {c};
    r.expected_busbw = {{"allreduce", 4.78e11}};
    run.ranks.push_back(r);
  }
  Diagnosis d = Analyze(run);
  ASSERT_EQ(d.collectives.size(), 1u);
  EXPECT_TRUE(d.collectives[0].low);
  for (const std::string& w : d.warnings)
    EXPECT_EQ(w.find("bus bandwidth"), std::string::npos) << w;
  EXPECT_NE(RenderDiagnosisText(d).find("stay hidden, so they do not set the step time"),
            std::string::npos)
      << RenderDiagnosisText(d);

  // 5% of the step exposed: the same bandwidth now costs time.
  for (RankStats& r : run.ranks) r.phase_seconds_total["comm_exposed"] = 0.145;
  d = Analyze(run);
  bool warned = false;
  for (const std::string& w : d.warnings) {
    warned |= w.rfind("allreduce 16MiB-64MiB: bus bandwidth 141.000 GB/s is 29.5%", 0) == 0;
  }
  EXPECT_TRUE(warned) << DiagnosisToJson(d)["warnings"].dump();
  EXPECT_EQ(RenderDiagnosisText(d).find("stay hidden"), std::string::npos);
}

// On CUDA the host waits for input while the GPU still runs the step before: a long wait is
// input-bound only when the GPU idled between steps too (gpu_idle_seconds_total).
TEST(Diagnose, ACudaRankWhoseGpuNeverWaitedIsNotInputBound) {
  RunData run;
  run.run_dir = "/runs/x";
  for (int rank : {0, 1}) {
    RankStats r = TimedRankOfTwo(rank, 0.0334);            // 6.68 s of steps
    r.phase_seconds_total = {{"data", 0.28 * 6.68}};       // 28% host wait on both
    r.gpu_idle_seconds = rank == 0 ? 0.004 : 0.25 * 6.68;  // 0.06% / 25% of the time idle
    run.ranks.push_back(r);
  }
  const Diagnosis d = Analyze(run);
  EXPECT_EQ(d.input_bound_ranks, std::vector<int>({1}));
  EXPECT_NEAR(d.gpu_idle_share.at(0), 0.004 / 6.68, 1e-12);
  EXPECT_NEAR(d.gpu_idle_share.at(1), 0.25, 1e-12);
  std::string warnings;
  for (const std::string& w : d.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("input-bound on rank 1: waiting for input is 28.0% of its step time; "
                          "its GPU sat idle 25.0% of the time, waiting for the next step"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(warnings.find("rank 0"), std::string::npos) << warnings;
  EXPECT_NEAR(DiagnosisToJson(d)["ranks"][1]["gpu_idle_share"].get<double>(), 0.25, 1e-12);

  // nvJPEG makes the batches on the GPU: the step's stream also waits for them inside the
  // step, which the idle time between steps does not see, so the host's wait counts.
  run.ranks[0].image_decode =
      history::ImageDecode{history::kDecodeOnGpu, 8, 256, "decoding JPEGs on the GPU"};
  EXPECT_EQ(Analyze(run).input_bound_ranks, std::vector<int>({0, 1}));
}

}  // namespace
}  // namespace ringpilot::diagnose
