// Trace: the ring buffer keeps the newest events, the JSON is valid Chrome Trace Event
// format, timestamps carry the clock offset, and SIGUSR2 writes the file.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "metrics/trace.h"

namespace ringpilot::metrics {
namespace {

using nlohmann::json;

TraceEvent Event(const char* name, std::int64_t ts) {
  TraceEvent e;
  e.name = name;
  e.cat = "phase";
  e.ts_us = ts;
  e.dur_us = 5;
  return e;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

TEST(Trace, RingKeepsNewestInOrder) {
  Trace t(0, "rank 0 (n)", 3, 0.0);
  for (int i = 0; i < 5; ++i) t.Record(Event("e", 100 + i));
  const std::vector<TraceEvent> events = t.Snapshot();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].ts_us, 102);
  EXPECT_EQ(events[1].ts_us, 103);
  EXPECT_EQ(events[2].ts_us, 104);
  EXPECT_EQ(t.recorded(), 5u);
}

TEST(Trace, PartialRingAndZeroCapacity) {
  Trace t(0, "p", 8, 0.0);
  t.Record(Event("a", 1));
  t.Record(Event("b", 2));
  ASSERT_EQ(t.Snapshot().size(), 2u);
  EXPECT_STREQ(t.Snapshot()[0].name, "a");
  EXPECT_THROW(Trace(0, "p", 0, 0.0), std::invalid_argument);
}

TEST(Trace, JsonIsChromeTraceFormat) {
  Trace t(3, "rank 3 (node \"x\")", 2, 0.0);
  t.Record(Event("dropped", 1));
  TraceEvent e = Event("allreduce", 1000);
  e.cat = "collective";
  e.tid = Trace::kCommTid;
  e.arg_name = "bytes";
  e.arg = 4096;
  t.Record(e);
  t.Record(Event("forward", 2000));
  const json doc = json::parse(t.ToJson());
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  EXPECT_EQ(doc.at("otherData").at("events_dropped"), 1);
  int complete = 0;
  bool named = false;
  for (const json& ev : doc.at("traceEvents")) {
    EXPECT_EQ(ev.at("pid"), 3);
    if (ev.at("ph") == "M" && ev.at("name") == "process_name") {
      EXPECT_EQ(ev.at("args").at("name"), "rank 3 (node \"x\")");
      named = true;
    }
    if (ev.at("ph") != "X") continue;
    ++complete;
    EXPECT_NE(ev.at("name"), "dropped");
    if (ev.at("name") == "allreduce") {
      EXPECT_EQ(ev.at("cat"), "collective");
      EXPECT_EQ(ev.at("ts"), 1000);
      EXPECT_EQ(ev.at("dur"), 5);
      EXPECT_EQ(ev.at("tid"), Trace::kCommTid);
      EXPECT_EQ(ev.at("args").at("bytes"), 4096);
    }
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(complete, 2);
}

TEST(Trace, CompleteEndsNowOnRankZerosClock) {
  const auto now_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  Trace t(0, "p", 4, /*clock_offset_seconds=*/10.0);
  const std::int64_t before = now_us();
  t.Complete("forward", "phase", Trace::kTrainTid, 0.25, "n", 7);
  const std::int64_t after = now_us();
  const TraceEvent e = t.Snapshot().at(0);
  EXPECT_EQ(e.dur_us, 250000);
  EXPECT_GE(e.ts_us + e.dur_us, before + 10000000);
  EXPECT_LE(e.ts_us + e.dur_us, after + 10000000);
  EXPECT_STREQ(e.arg_name, "n");
  EXPECT_EQ(e.arg, 7);
}

TEST(Trace, CompleteAtPlacesAnEventGivenItsStartOnThisHostsClock) {
  Trace t(1, "p", 4, /*clock_offset_seconds=*/-2.5);
  t.CompleteAt("allreduce", "collective", Trace::kCommTid, 1700000000.125, 0.003, "bytes", 64);
  const TraceEvent e = t.Snapshot().at(0);
  EXPECT_EQ(e.ts_us, 1700000000125000 - 2500000);
  EXPECT_EQ(e.dur_us, 3000);
  EXPECT_EQ(e.tid, Trace::kCommTid);
  EXPECT_EQ(e.arg, 64);
}

TEST(Trace, WriteFileAndSigusr2Flush) {
  char dir[] = "/tmp/ringpilot-trace-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/trace-rank-0.json";
  {
    Trace t(0, "rank 0", 16, 0.0);
    t.FlushOnSigusr2(path);
    EXPECT_THROW(t.FlushOnSigusr2(path), std::logic_error);
    t.Record(Event("forward", 42));
    ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
    std::string text;
    for (int i = 0; i < 500 && text.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      text = ReadAll(path);
    }
    const json doc = json::parse(text);
    EXPECT_EQ(doc.at("traceEvents").back().at("ts"), 42);
    t.Record(Event("backward", 43));
    t.WriteFile(path);
    EXPECT_EQ(json::parse(ReadAll(path)).at("traceEvents").back().at("ts"), 43);
  }
  // The destructor restored the previous disposition; a new trace may take SIGUSR2 again.
  Trace again(0, "rank 0", 4, 0.0);
  again.FlushOnSigusr2(path);
  std::remove(path.c_str());
  ::rmdir(dir);
  EXPECT_THROW(Trace(0, "p", 1, 0).WriteFile("/nonexistent-dir/x.json"), std::runtime_error);
}

TEST(Trace, ProcessNameIsEscapedByTheJsonLibrary) {
  Trace t(0, "a\"b\\c\nd\x01", 1, 0.0);
  const std::string text = t.ToJson();
  EXPECT_NE(text.find(R"("name":"a\"b\\c\nd\u0001")"), std::string::npos) << text;
  const json doc = json::parse(text);
  EXPECT_EQ(doc.at("traceEvents").at(0).at("args").at("name"), "a\"b\\c\nd\x01");
  // Not UTF-8: replaced, not thrown.
  json replaced;
  EXPECT_NO_THROW(replaced = json::parse(Trace(0, "bad \xff byte", 1, 0.0).ToJson()));
  EXPECT_TRUE(replaced.contains("traceEvents"));
}

}  // namespace
}  // namespace ringpilot::metrics
