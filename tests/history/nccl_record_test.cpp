// logs/rank-N.nccl.json (history/nccl_record.h): what the NCCL profiler plugin writes is what
// diagnose and the launcher read back; a file the plugin wrote before the format moved here
// is read and written again byte for byte; truncated, foreign and mistyped files give one
// line naming the file and the key.
#include "history/nccl_record.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history/record_fields.h"
#include "tests/test_util.h"

namespace ringpilot::history {
namespace {

using testing::TempDir;
using testing::WriteFile;

NcclRecord Sample() {
  NcclRecord r;
  r.rank = 3;
  r.node = "gpu-07";
  r.local_rank = 1;
  r.job = "bert";
  r.profiler_api_version = 5;
  r.written_unix = 1700000010.25;
  NcclCommRecord& world = r.communicators.emplace_back();
  world.comm = "00000000c0ffee00";
  world.name = "world";
  world.comm_rank = 3;
  world.comm_size = 8;
  world.nodes = 2;
  world.gpu_timing = true;
  world.init_unix = 1700000000.5;
  world.operations.push_back(
      {"allreduce", "4MiB-16MiB", "ring", "simple", 7, 29360128, 6, 0.021, 1.5e9});
  world.operations.push_back({"allgather", "<1KiB", "ring", "ll", 2, 512, 0, 0, 0});
  world.collectives_started = 10;
  world.collectives_completed = 9;
  world.p2p_started = 4;
  world.p2p_completed = 4;
  world.in_flight = 1;
  world.oldest_in_flight = NcclInFlight{"allreduce", 10, 1700000009.75, 0.5};
  world.untracked_ops = 2;
  world.recent_collectives.push_back({8, "allreduce", 4194304, 1700000009.5, 1010000000, 0.003});
  world.recent_collectives.push_back({9, "allgather", 256, 1700000009.625, 0, 0.0015});
  NcclCommRecord& aborted = r.communicators.emplace_back();
  aborted.comm = "0000000000000abc";
  aborted.comm_size = 2;
  aborted.finalized = true;
  aborted.abandoned_ops = 1;
  aborted.abandoned_oldest = NcclInFlight{"broadcast", 3, 1700000001, 42.5};
  return r;
}

void ExpectInFlight(const std::optional<NcclInFlight>& a, const std::optional<NcclInFlight>& b) {
  ASSERT_EQ(a.has_value(), b.has_value());
  if (!a) return;
  EXPECT_EQ(a->op, b->op);
  EXPECT_EQ(a->seq, b->seq);
  EXPECT_DOUBLE_EQ(a->start_unix, b->start_unix);
  EXPECT_DOUBLE_EQ(a->age_seconds, b->age_seconds);
}

TEST(NcclRecord, WhatIsWrittenIsReadBack) {
  TempDir dir;
  const NcclRecord w = Sample();
  const std::string path = NcclRecordPath(dir.path(), 3);
  EXPECT_EQ(NcclRecordPath("/r/logs", 3), "/r/logs/rank-3.nccl.json");
  WriteFile(path, NcclRecordJson(w));
  const NcclRecord r = ReadNcclRecord(path, 3);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.node, "gpu-07");
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.job, "bert");
  EXPECT_EQ(r.profiler_api_version, 5);
  EXPECT_DOUBLE_EQ(r.written_unix, w.written_unix);
  ASSERT_EQ(r.communicators.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const NcclCommRecord& a = r.communicators[i];
    const NcclCommRecord& b = w.communicators[i];
    EXPECT_EQ(a.comm, b.comm);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.comm_rank, b.comm_rank);
    EXPECT_EQ(a.comm_size, b.comm_size);
    EXPECT_EQ(a.nodes, b.nodes);
    EXPECT_EQ(a.gpu_timing, b.gpu_timing);
    EXPECT_EQ(a.finalized, b.finalized);
    EXPECT_DOUBLE_EQ(a.init_unix, b.init_unix);
    ASSERT_EQ(a.operations.size(), b.operations.size());
    for (std::size_t k = 0; k < a.operations.size(); ++k) {
      const NcclOperationTotals& x = a.operations[k];
      const NcclOperationTotals& y = b.operations[k];
      EXPECT_EQ(x.op, y.op);
      EXPECT_EQ(x.size_bucket, y.size_bucket);
      EXPECT_EQ(x.algo, y.algo);
      EXPECT_EQ(x.proto, y.proto);
      EXPECT_EQ(x.count, y.count);
      EXPECT_EQ(x.bytes_total, y.bytes_total);
      EXPECT_EQ(x.timed_count, y.timed_count);
      EXPECT_DOUBLE_EQ(x.seconds_total, y.seconds_total);
      EXPECT_DOUBLE_EQ(x.busbw_bytes_per_second, y.busbw_bytes_per_second);
    }
    EXPECT_EQ(a.collectives_started, b.collectives_started);
    EXPECT_EQ(a.collectives_completed, b.collectives_completed);
    EXPECT_EQ(a.p2p_started, b.p2p_started);
    EXPECT_EQ(a.p2p_completed, b.p2p_completed);
    EXPECT_EQ(a.in_flight, b.in_flight);
    EXPECT_EQ(a.untracked_ops, b.untracked_ops);
    EXPECT_EQ(a.abandoned_ops, b.abandoned_ops);
    ExpectInFlight(a.oldest_in_flight, b.oldest_in_flight);
    ExpectInFlight(a.abandoned_oldest, b.abandoned_oldest);
    ASSERT_EQ(a.recent_collectives.size(), b.recent_collectives.size());
    for (std::size_t k = 0; k < a.recent_collectives.size(); ++k) {
      const NcclRecentCollective& x = a.recent_collectives[k];
      const NcclRecentCollective& y = b.recent_collectives[k];
      EXPECT_EQ(x.seq, y.seq);
      EXPECT_EQ(x.op, y.op);
      EXPECT_EQ(x.bytes, y.bytes);
      EXPECT_DOUBLE_EQ(x.enqueue_unix, y.enqueue_unix);
      EXPECT_EQ(x.kernel_start_ns, y.kernel_start_ns);
      EXPECT_DOUBLE_EQ(x.seconds, y.seconds);
    }
  }
  // Written again, the same text: nothing is lost on the way.
  EXPECT_EQ(NcclRecordJson(r), NcclRecordJson(w));
}

// tests/fixtures/nccl_record/rank-0.nccl.json: what the plugin wrote (nccl_profiler_record,
// 2 ranks, rank 1 stuck, then aborted) when it still formatted the file itself.
TEST(NcclRecord, ThePluginsFileIsReadAndWrittenAgainByteForByte) {
  const char* src = std::getenv("RINGPILOT_SOURCE_DIR");
  const std::string path =
      std::string(src ? src : ".") + "/tests/fixtures/nccl_record/rank-0.nccl.json";
  const NcclRecord r = ReadNcclRecord(path, 0);
  ASSERT_EQ(r.communicators.size(), 1u);
  EXPECT_TRUE(r.communicators[0].finalized);
  EXPECT_TRUE(r.communicators[0].abandoned_oldest.has_value());
  EXPECT_EQ(NcclRecordJson(r), testing::ReadFile(path));
}

// What ReadNcclRecord throws for `text` in DIR/rank-0.nccl.json, with DIR replaced by "D".
std::string ErrorFor(const std::string& text) {
  TempDir dir;
  const std::string path = NcclRecordPath(dir.path(), 0);
  WriteFile(path, text);
  try {
    ReadNcclRecord(path, 0);
  } catch (const RecordError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return "D" + what.substr(dir.path().size());
  }
  return "no error";
}

TEST(NcclRecord, TruncatedForeignAndMistypedFilesAreOneLineNamingFileAndKey) {
  std::string whole = NcclRecordJson(Sample());
  nlohmann::json j = nlohmann::json::parse(whole);
  j["rank"] = 0;
  whole = j.dump(2);
  EXPECT_EQ(ErrorFor(whole), "no error");
  // Half written (the plugin writes through a rename, but a copy may be cut).
  EXPECT_EQ(
      ErrorFor(whole.substr(0, whole.size() / 2)).rfind("D/rank-0.nccl.json: malformed JSON: ", 0),
      0u);
  EXPECT_EQ(ErrorFor("[1, 2]"), "D/rank-0.nccl.json: expected a JSON object");
  EXPECT_EQ(ErrorFor(R"({"rank": 4})"),
            "D/rank-0.nccl.json: 'rank': is 4 but the file name says rank 0");
  EXPECT_EQ(ErrorFor(R"({"communicators": {}})"),
            "D/rank-0.nccl.json: 'communicators': expected a list");
  EXPECT_EQ(ErrorFor(R"({"communicators": [{"name": "world"}]})"),
            "D/rank-0.nccl.json: 'communicators[0].comm': missing");
  nlohmann::json bad = j;
  bad["communicators"][0]["operations"][1]["count"] = "two";
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/rank-0.nccl.json: 'communicators[0].operations[1].count': expected a number, got "
            "\"two\"");
  bad = j;
  bad["communicators"][0]["collective_seq"]["started"] = -1;
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/rank-0.nccl.json: 'communicators[0].collective_seq.started': expected a whole "
            "number >= 0, got -1");
  bad = j;
  bad["communicators"][0]["recent_collectives"][1] = "late";
  EXPECT_EQ(ErrorFor(bad.dump()),
            "D/rank-0.nccl.json: 'communicators[0].recent_collectives[1]': expected [seq, op, "
            "bytes, enqueue_unix, kernel_start_ns, seconds], got \"late\"");
  TempDir dir;
  EXPECT_THROW(ReadNcclRecord(dir.path() + "/rank-0.nccl.json", 0), RecordError);
}

}  // namespace
}  // namespace ringpilot::history
