// Unit tests of ringpilot-commbench's arithmetic (nccl-tests byte accounting and busbw
// factors, sweep sizes, statistics, result checking) and of `ringpilot bench comm`'s
// front end (sizes, mpirun argv, table, SVG plot, pairwise flags).
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/shell.h"
#include "commbench/command.h"
#include "commbench/svg_plots.h"
#include "commbench/sweep.h"
#include "mpirun/flags.h"

namespace ringpilot {
namespace {

using commbench::Op;

TEST(CommbenchLayout, PerRankBufferOps) {
  const auto l = commbench::MakeLayout(Op::kAllReduce, 1024, 4);
  EXPECT_EQ(l.count, 256u);
  EXPECT_EQ(l.send_elems, 256u);
  EXPECT_EQ(l.recv_elems, 256u);
  EXPECT_EQ(l.bytes, 1024u);
  EXPECT_EQ(commbench::MakeLayout(Op::kBroadcast, 1026, 4).bytes, 1024u);
}

TEST(CommbenchLayout, ChunkedOpsCountTheWholeBuffer) {
  const auto ag = commbench::MakeLayout(Op::kAllGather, 1024, 3);
  EXPECT_EQ(ag.chunk, 85u);
  EXPECT_EQ(ag.count, 85u);
  EXPECT_EQ(ag.send_elems, 85u);
  EXPECT_EQ(ag.recv_elems, 255u);
  EXPECT_EQ(ag.bytes, 1020u);
  const auto rs = commbench::MakeLayout(Op::kReduceScatter, 1024, 3);
  EXPECT_EQ(rs.send_elems, 255u);
  EXPECT_EQ(rs.recv_elems, 85u);
  EXPECT_EQ(rs.bytes, 1020u);
  const auto a2a = commbench::MakeLayout(Op::kAllToAll, 4096, 8);
  EXPECT_EQ(a2a.count, 128u);
  EXPECT_EQ(a2a.send_elems, 1024u);
  EXPECT_EQ(a2a.recv_elems, 1024u);
  EXPECT_EQ(a2a.bytes, 4096u);
  EXPECT_EQ(commbench::MakeLayout(Op::kAllGather, 16, 8).bytes, 0u);  // < 1 element each
}

TEST(CommbenchBandwidth, AlgbwAndBusbw) {
  commbench::Result r;
  r.op = Op::kAllReduce;
  r.bytes = 1000000000;
  r.time.mean = 0.1;
  commbench::ComputeBandwidth(&r, 8);
  EXPECT_DOUBLE_EQ(r.algbw_gbps, 10.0);
  EXPECT_DOUBLE_EQ(r.busbw_gbps, 17.5);
  r.op = Op::kAllGather;
  commbench::ComputeBandwidth(&r, 4);
  EXPECT_DOUBLE_EQ(r.busbw_gbps, 7.5);
  auto j = commbench::ToJson(r);
  EXPECT_TRUE(j["expected_busbw_gbps"].is_null());
  EXPECT_TRUE(j["ratio"].is_null());
  r.expected_busbw_gbps = 15.0;
  j = commbench::ToJson(r);
  EXPECT_DOUBLE_EQ(j["ratio"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["time_us"].get<double>(), 100000.0);
  const std::vector<std::string> keys = {
      "op",          "bytes",       "in_place",   "time_us",    "time_us_min",
      "time_us_max", "time_us_p99", "algbw_gbps", "busbw_gbps", "expected_busbw_gbps",
      "ratio",       "wrong"};
  std::vector<std::string> got;
  for (const auto& [k, v] : j.items()) got.push_back(k);
  EXPECT_EQ(got, keys);
}

TEST(CommbenchSweep, Sizes) {
  EXPECT_EQ(commbench::SweepSizes(1024, 1 << 20, 2).size(), 11u);
  EXPECT_EQ(commbench::SweepSizes(1024, 1 << 20, 4),
            (std::vector<std::size_t>{1024, 4096, 16384, 65536, 262144, 1048576}));
  EXPECT_EQ(commbench::SweepSizes(1000, 5000, 2), (std::vector<std::size_t>{1000, 2000, 4000}));
  EXPECT_EQ(commbench::SweepSizes(64, 64, 2), (std::vector<std::size_t>{64}));
  EXPECT_THROW(commbench::SweepSizes(2, 64, 2), std::invalid_argument);
  EXPECT_THROW(commbench::SweepSizes(128, 64, 2), std::invalid_argument);
  EXPECT_THROW(commbench::SweepSizes(64, 128, 1), std::invalid_argument);
}

TEST(CommbenchStats, MeanMinMaxP99) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const auto t = commbench::Summarize(v);
  EXPECT_DOUBLE_EQ(t.mean, 50.5);
  EXPECT_DOUBLE_EQ(t.min, 1);
  EXPECT_DOUBLE_EQ(t.max, 100);
  EXPECT_DOUBLE_EQ(t.p99, 99);
  EXPECT_DOUBLE_EQ(commbench::Summarize({3, 1, 2}).p99, 3);
  EXPECT_THROW(commbench::Summarize({}), std::invalid_argument);
}

TEST(CommbenchOps, ParseList) {
  EXPECT_EQ(commbench::ParseOpList("all").size(), 6u);
  EXPECT_EQ(commbench::ParseOpList("sendrecv,allreduce,sendrecv"),
            (std::vector<Op>{Op::kSendRecv, Op::kAllReduce}));
  EXPECT_THROW(commbench::ParseOpList("allreduce,gather"), std::invalid_argument);
  EXPECT_THROW(commbench::ParseOpList(""), std::invalid_argument);
  for (Op op : commbench::AllOps()) EXPECT_EQ(comm::ParseCollectiveOp(ToString(op)), op);
}

// Host simulations of the collectives agree with the checker, and a corrupt element counts.
TEST(CommbenchCheck, SimulatedCollectivesCheckClean) {
  const int n = 3;
  for (Op op : commbench::AllOps()) {
    const auto l = commbench::MakeLayout(op, 96, n);
    for (int rank = 0; rank < n; ++rank) {
      std::vector<float> out(l.recv_elems);
      for (std::size_t j = 0; j < out.size(); ++j) {
        const std::size_t c = l.chunk;
        switch (op) {
          case Op::kAllReduce:
            for (int s = 0; s < n; ++s) out[j] += commbench::FillValue(s, j);
            break;
          case Op::kAllGather:
            out[j] = commbench::FillValue(static_cast<int>(j / c), j % c);
            break;
          case Op::kReduceScatter:
            for (int s = 0; s < n; ++s) out[j] += commbench::FillValue(s, rank * c + j);
            break;
          case Op::kBroadcast:
            out[j] = commbench::FillValue(0, j);
            break;
          case Op::kAllToAll:
            out[j] = commbench::FillValue(static_cast<int>(j / c), rank * c + j % c);
            break;
          case Op::kSendRecv:
            out[j] = commbench::FillValue((rank + n - 1) % n, j);
            break;
          case Op::kBarrier:
            FAIL() << "AllOps() has no barrier";
        }
      }
      EXPECT_EQ(commbench::CountWrong(op, l, rank, n, out), 0u) << ToString(op);
      out[1] += 1;
      EXPECT_EQ(commbench::CountWrong(op, l, rank, n, out), 1u) << ToString(op);
    }
  }
}

TEST(CommbenchCheck, InPlacePlacement) {
  const auto ag = commbench::MakeLayout(Op::kAllGather, 96, 3);
  const auto p = commbench::MakePlacement(Op::kAllGather, ag, true, false, 2, 3);
  EXPECT_TRUE(p.input_in_recv);
  EXPECT_EQ(p.input_offset, 2 * ag.chunk);
  const auto rs = commbench::MakeLayout(Op::kReduceScatter, 96, 3);
  EXPECT_EQ(commbench::MakePlacement(Op::kReduceScatter, rs, true, true, 1, 3).output_offset,
            rs.chunk);
  EXPECT_EQ(commbench::MakePlacement(Op::kReduceScatter, rs, true, false, 1, 3).output_offset, 0u);
  EXPECT_FALSE(commbench::MakePlacement(Op::kAllReduce, rs, false, true, 1, 3).input_in_recv);
}

TEST(BenchFrontEnd, ByteSizes) {
  EXPECT_EQ(commbench::ParseByteSize("4096"), 4096u);
  EXPECT_EQ(commbench::ParseByteSize("64K"), 65536u);
  EXPECT_EQ(commbench::ParseByteSize("1M"), 1048576u);
  EXPECT_EQ(commbench::ParseByteSize("2GB"), 2147483648u);
  for (const char* bad : {"", "K", "0", "-1", "1.5M", "12X", "1e6"}) {
    EXPECT_THROW(commbench::ParseByteSize(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(commbench::FormatByteSize(65536), "64K");
  EXPECT_EQ(commbench::FormatByteSize(1000), "1000");
  EXPECT_EQ(commbench::FormatByteSize(std::size_t{1} << 30), "1G");
}

TEST(BenchFrontEnd, MpirunArgv) {
  commbench::BenchCommArgs a;
  a.np = 4;
  a.max_bytes = "1M";
  a.both = true;
  commbench::BenchContext ctx;
  ctx.commbench = "/b/ringpilot-commbench";
  ctx.output = "/tmp/out.json";
  ctx.euid = 0;
  ctx.env = {{"NCCL_DEBUG", "INFO"}, {"HOME", "/root"}};
  const auto argv = commbench::BuildCommbenchArgv(a, ctx);
  const std::string line = base::ShellJoin(argv);
  EXPECT_EQ(line,
            "mpirun -np 4 --oversubscribe --bind-to none --allow-run-as-root --mca "
            "btl_vader_single_copy_mechanism none -x NCCL_DEBUG /b/ringpilot-commbench "
            "--device cpu --op all --min-bytes 1024 --max-bytes 1048576 --step-factor 2 "
            "--iters 20 --warmup 5 --mode both --output /tmp/out.json");
  a.device = "cuda";
  a.both = false;
  a.in_place = true;
  a.pairwise = true;
  ctx.euid = 1000;
  const std::string gpu = base::ShellJoin(commbench::BuildCommbenchArgv(a, ctx));
  EXPECT_EQ(gpu.find("--oversubscribe"), std::string::npos);
  EXPECT_EQ(gpu.find("--allow-run-as-root"), std::string::npos);
  EXPECT_NE(gpu.find("--mode in-place --pairwise"), std::string::npos);
  a.min_bytes = "2M";
  a.pairwise = false;
  EXPECT_THROW(commbench::BuildCommbenchArgv(a, ctx), std::invalid_argument);
}

TEST(BenchFrontEnd, GraphsOnlyForTheNcclSweep) {
  commbench::BenchCommArgs a;
  a.np = 2;
  a.max_bytes = "1M";
  a.graphs = 10;
  commbench::BenchContext ctx;
  ctx.commbench = "ringpilot-commbench";
  ctx.output = "/tmp/out.json";
  // CPU ranks run MPI on host buffers: no CUDA graph to capture.
  EXPECT_THROW(commbench::BuildCommbenchArgv(a, ctx), std::invalid_argument);
  a.device = "cuda";
  const std::string line = base::ShellJoin(commbench::BuildCommbenchArgv(a, ctx));
  EXPECT_NE(line.find("--warmup 5 --mode out-of-place --graphs 10 --output"), std::string::npos)
      << line;
  a.pairwise = true;
  EXPECT_THROW(commbench::BuildCommbenchArgv(a, ctx), std::invalid_argument);
  // The table says how the means were timed.
  nlohmann::json doc = {{"device", "cuda"},
                        {"ranks", 2},
                        {"nodes", 1},
                        {"graph_replays", 10},
                        {"results", nlohmann::json::array()}};
  EXPECT_NE(commbench::FormatResultsTable(doc).find("CUDA graph, replayed 10 times"),
            std::string::npos);
}

nlohmann::json SampleResults() {
  nlohmann::json results = nlohmann::json::array();
  for (const char* op : {"allreduce", "allgather"}) {
    for (int i = 0; i < 3; ++i) {
      results.push_back({{"op", op},
                         {"bytes", 1024 << (2 * i)},
                         {"in_place", false},
                         {"time_us", 1.0},
                         {"time_us_min", 1.0},
                         {"time_us_max", 1.0},
                         {"time_us_p99", 1.0},
                         {"algbw_gbps", 1.0 + i},
                         {"busbw_gbps", std::string(op) == "allreduce" ? 2.0 + i : 1.0 + i},
                         {"expected_busbw_gbps", nullptr},
                         {"ratio", nullptr},
                         {"wrong", 0}});
    }
  }
  return results;
}

TEST(BenchFrontEnd, SvgPlot) {
  const std::string svg = commbench::RenderBusBandwidthSvg(SampleResults(), "a <b> & c");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; c"), std::string::npos);
  EXPECT_NE(svg.find(">allreduce</text>"), std::string::npos);
  EXPECT_NE(svg.find(">allgather</text>"), std::string::npos);
  EXPECT_NE(svg.find(">16K</text>"), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  // One polyline per op, 3 points each, equally spaced on x (sizes x4: log2 steps of 2).
  const std::regex poly("<polyline[^>]*points=\"([^\"]*)\"");
  std::vector<std::vector<std::pair<double, double>>> lines;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), poly); it != std::sregex_iterator();
       ++it) {
    std::vector<std::pair<double, double>> pts;
    const std::string s = (*it)[1];
    const std::regex pt("([0-9.]+),([0-9.]+)");
    for (auto p = std::sregex_iterator(s.begin(), s.end(), pt); p != std::sregex_iterator(); ++p) {
      pts.emplace_back(std::stod((*p)[1]), std::stod((*p)[2]));
    }
    lines.push_back(pts);
  }
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& pts : lines) {
    ASSERT_EQ(pts.size(), 3u);
    EXPECT_NEAR(pts[1].first - pts[0].first, pts[2].first - pts[1].first, 0.2);
    EXPECT_GT(pts[0].second, pts[2].second);  // higher busbw is higher up (smaller y)
  }
  // allreduce's busbw is above allgather's at every size.
  for (int i = 0; i < 3; ++i) EXPECT_LT(lines[0][i].second, lines[1][i].second);
  // Balanced tags.
  const auto count = [&](const std::string& s) {
    std::size_t n = 0;
    for (std::size_t p = svg.find(s); p != std::string::npos; p = svg.find(s, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<text"), count("</text>"));
  EXPECT_EQ(commbench::RenderBusBandwidthSvg(nlohmann::json::array(), "empty").find("<polyline"),
            std::string::npos);
}

TEST(BenchFrontEnd, Table) {
  nlohmann::json doc = {
      {"device", "cpu"}, {"ranks", 2}, {"nodes", 1}, {"results", SampleResults()}};
  doc["results"][1]["wrong"] = 3;
  const std::string t = commbench::FormatResultsTable(doc);
  EXPECT_NE(t.find("# allreduce\n"), std::string::npos);
  EXPECT_NE(t.find("# allgather\n"), std::string::npos);
  EXPECT_NE(t.find("# Out of bounds values : 1 FAILED"), std::string::npos);
  EXPECT_NE(t.find("# Avg bus bandwidth    : 2.500 GB/s"), std::string::npos);
}

TEST(BenchFrontEnd, PairwiseFlagsTheSlowLink) {
  std::vector<std::vector<double>> m(4, std::vector<double>(4, 10.0));
  for (int i = 0; i < 4; ++i) m[i][i] = 0;
  m[2][3] = 3.0;
  EXPECT_DOUBLE_EQ(commbench::OffDiagonalMedian(m), 10.0);
  EXPECT_EQ(commbench::FindSlowPairs(m), (std::vector<std::pair<int, int>>{{2, 3}}));
  const std::string text = commbench::FormatPairwiseMatrix(m, 1 << 20);
  EXPECT_NE(text.find("3.00*"), std::string::npos);
  EXPECT_NE(text.find("# slow: rank 2 -> rank 3: 3.00 GB/s"), std::string::npos);
  m[2][3] = 6.0;
  EXPECT_TRUE(commbench::FindSlowPairs(m).empty());
}

TEST(BenchFrontEnd, PairwiseHeatMapMarksTheSlowLink) {
  const auto count = [](const std::string& text, const std::string& s) {
    std::size_t n = 0;
    for (std::size_t p = text.find(s); p != std::string::npos; p = text.find(s, p + 1)) ++n;
    return n;
  };
  std::vector<std::vector<double>> m(4, std::vector<double>(4, 10.0));
  for (int i = 0; i < 4; ++i) m[i][i] = 0;
  m[2][3] = 3.0;
  m[0][1] = 20.0;  // the fastest pair: the darkest cell
  const std::string svg = commbench::RenderPairwiseSvg(m, 1 << 20, "pairs <a> & b");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("pairs &lt;a&gt; &amp; b"), std::string::npos);
  EXPECT_EQ(count(svg, "<rect class=\"pair\""), 16u);
  EXPECT_EQ(count(svg, "fill=\"#dddddd\""), 4u) << "the diagonal";
  // The one slow pair: outlined, titled and listed.
  EXPECT_EQ(count(svg, "stroke=\"#d62728\""), 1u);
  EXPECT_NE(svg.find("<title>2 -> 3: 3.00 GB/s</title>"), std::string::npos);
  EXPECT_NE(svg.find("slow: rank 2 -> rank 3: 3.00 GB/s"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"#08306b\""), std::string::npos) << "the fastest pair's shade";
  EXPECT_NE(svg.find(">3.0</text>"), std::string::npos) << "values written in 4 x 4 cells";
  EXPECT_NE(svg.find("1M per transfer"), std::string::npos);
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));

  // 64 ranks: cells too small for numbers, every pair still drawn, no slow pair.
  std::vector<std::vector<double>> big(64, std::vector<double>(64, 300.0));
  const std::string many = commbench::RenderPairwiseSvg(big, 256 << 20, "64");
  EXPECT_EQ(count(many, "<rect class=\"pair\""), 64u * 64u);
  EXPECT_EQ(count(many, "font-size=\"11\""), 0u);
  EXPECT_NE(many.find("no pair below 50% of the median"), std::string::npos);
}

}  // namespace
}  // namespace ringpilot
