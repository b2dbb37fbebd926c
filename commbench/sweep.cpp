#include "commbench/sweep.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ringpilot::commbench {
namespace {

// True for the operations whose buffers hold one block per rank.
bool IsChunked(Op op) {
  return op == Op::kAllGather || op == Op::kReduceScatter || op == Op::kAllToAll;
}

double Gbps(std::size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

}  // namespace

const std::vector<Op>& AllOps() {
  static const std::vector<Op> ops = {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter,
                                      Op::kBroadcast, Op::kAllToAll,  Op::kSendRecv};
  return ops;
}

std::vector<Op> ParseOpList(const std::string& text) {
  if (text == "all") return AllOps();
  std::vector<Op> ops;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    const std::optional<Op> op = comm::ParseCollectiveOp(name);
    if (!op || std::find(AllOps().begin(), AllOps().end(), *op) == AllOps().end()) {
      throw std::invalid_argument("unknown operation '" + name +
                                  "' (allreduce, allgather, reduce_scatter, broadcast, "
                                  "alltoall, sendrecv or all)");
    }
    if (std::find(ops.begin(), ops.end(), *op) == ops.end()) ops.push_back(*op);
    start = comma + 1;
  }
  return ops;
}

Layout MakeLayout(Op op, std::size_t size_bytes, int ranks) {
  if (ranks < 1) throw std::invalid_argument("ranks must be >= 1");
  const std::size_t n = static_cast<std::size_t>(ranks);
  const std::size_t elems = size_bytes / kElementBytes;
  Layout l;
  if (IsChunked(op)) {
    l.chunk = elems / n;
    l.count = l.chunk;
    const std::size_t total = l.chunk * n;
    l.send_elems = op == Op::kAllGather ? l.chunk : total;
    l.recv_elems = op == Op::kReduceScatter ? l.chunk : total;
    l.bytes = total * kElementBytes;
  } else {
    l.chunk = elems;
    l.count = elems;
    l.send_elems = elems;
    l.recv_elems = elems;
    l.bytes = elems * kElementBytes;
  }
  if (l.count == 0) l.bytes = 0;
  return l;
}

std::vector<std::size_t> SweepSizes(std::size_t min_bytes, std::size_t max_bytes, int factor) {
  if (min_bytes < kElementBytes) throw std::invalid_argument("--min-bytes must be at least 4");
  if (max_bytes < min_bytes) throw std::invalid_argument("--max-bytes is below --min-bytes");
  if (factor < 2) throw std::invalid_argument("--step-factor must be at least 2");
  std::vector<std::size_t> sizes;
  for (std::size_t s = min_bytes; s <= max_bytes; s *= static_cast<std::size_t>(factor)) {
    sizes.push_back(s);
    if (s > max_bytes / static_cast<std::size_t>(factor)) break;  // the next would overflow
  }
  return sizes;
}

TimeStats Summarize(std::vector<double> seconds) {
  if (seconds.empty()) throw std::invalid_argument("no iterations to summarize");
  std::sort(seconds.begin(), seconds.end());
  TimeStats t;
  double sum = 0;
  for (double s : seconds) sum += s;
  t.mean = sum / static_cast<double>(seconds.size());
  t.min = seconds.front();
  t.max = seconds.back();
  const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(seconds.size())));
  t.p99 = seconds[std::max<std::size_t>(rank, 1) - 1];
  return t;
}

float FillValue(int rank, std::size_t index) {
  return static_cast<float>((static_cast<std::size_t>(rank + 1) * 131u + index * 7u) % 1009u);
}

Placement MakePlacement(Op op, const Layout& layout, bool in_place, bool nccl, int rank,
                        int ranks) {
  const std::size_t r = static_cast<std::size_t>(rank);
  Placement p;
  p.input_elems = layout.send_elems;
  p.output_elems = layout.recv_elems;
  if (!in_place) return p;
  p.input_in_recv = true;
  if (op == Op::kAllGather) p.input_offset = r * layout.chunk;
  if (op == Op::kReduceScatter && nccl) p.output_offset = r * layout.chunk;
  (void)ranks;
  return p;
}

float ExpectedValue(Op op, const Layout& layout, int rank, int ranks, std::size_t j) {
  const std::size_t r = static_cast<std::size_t>(rank);
  switch (op) {
    case Op::kAllReduce: {
      float sum = 0;
      for (int s = 0; s < ranks; ++s) sum += FillValue(s, j);
      return sum;
    }
    case Op::kAllGather:
      return FillValue(static_cast<int>(j / layout.chunk), j % layout.chunk);
    case Op::kReduceScatter: {
      float sum = 0;
      for (int s = 0; s < ranks; ++s) sum += FillValue(s, r * layout.chunk + j);
      return sum;
    }
    case Op::kBroadcast:
      return FillValue(0, j);
    case Op::kAllToAll:
      return FillValue(static_cast<int>(j / layout.chunk), r * layout.chunk + j % layout.chunk);
    case Op::kSendRecv:
      return FillValue((rank + ranks - 1) % ranks, j);
    case Op::kBarrier:  // no output buffer
      return 0;
  }
  return 0;
}

std::size_t CountWrong(Op op, const Layout& layout, int rank, int ranks,
                       const std::vector<float>& output) {
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < output.size(); ++j) {
    if (output[j] != ExpectedValue(op, layout, rank, ranks, j)) ++wrong;
  }
  return wrong;
}

void ComputeBandwidth(Result* r, int ranks) {
  r->algbw_gbps = Gbps(r->bytes, r->time.mean);
  r->busbw_gbps = r->algbw_gbps * BusBandwidthFactor(r->op, ranks);
}

nlohmann::ordered_json ToJson(const Result& r) {
  nlohmann::ordered_json j;
  j["op"] = ToString(r.op);
  j["bytes"] = r.bytes;
  j["in_place"] = r.in_place;
  j["time_us"] = r.time.mean * 1e6;
  j["time_us_min"] = r.time.min * 1e6;
  j["time_us_max"] = r.time.max * 1e6;
  j["time_us_p99"] = r.time.p99 * 1e6;
  j["algbw_gbps"] = r.algbw_gbps;
  j["busbw_gbps"] = r.busbw_gbps;
  if (r.expected_busbw_gbps && *r.expected_busbw_gbps > 0) {
    j["expected_busbw_gbps"] = *r.expected_busbw_gbps;
    j["ratio"] = r.busbw_gbps / *r.expected_busbw_gbps;
  } else {
    j["expected_busbw_gbps"] = nullptr;
    j["ratio"] = nullptr;
  }
  j["wrong"] = r.wrong;
  return j;
}

}  // namespace ringpilot::commbench
