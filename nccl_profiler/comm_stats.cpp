#include "nccl_profiler/comm_stats.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "base/time.h"

namespace ringpilot::nccl_profiler {
namespace {

void AtomicMin(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void AtomicMax(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// Decrements `pending` unless it is already 0 (an event NCCL should not have sent); true
// when this call took it to 0, i.e. the caller finishes the operation.
bool DropPending(std::atomic<int32_t>& pending) {
  int32_t cur = pending.load(std::memory_order_acquire);
  while (cur > 0) {
    if (pending.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel)) return cur == 1;
  }
  return false;
}

// prometheus-cpp's rule (an observation goes to the first bound >= it), so the buckets
// read the same as Histogram::Observe would have made them.
int HistogramIndex(double seconds) {
  for (int i = 0; i < kHistogramBounds; ++i) {
    if (seconds <= HistogramBound(i)) return i;
  }
  return kHistogramBounds;
}

}  // namespace

double HistogramBound(int i) {
  // The trainer's layout, so that both write the same `le` values.
  return metrics::kCollectiveSecondsBounds[static_cast<size_t>(i)];
}

uint64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

CommStats::CommStats(CommIdentity id, Timing timing, int slots)
    : id_(std::move(id)),
      timing_(timing),
      slots_(new Slot[static_cast<size_t>(std::max(slots, 1))]),
      nslots_(std::max(slots, 1)),
      cells_(new Cell[kCells]),
      histograms_(new Histogram[kNumOps * comm::kSizeBuckets]),
      init_unix_(base::UnixNow()),
      unix_minus_monotonic_(init_unix_ - MonotonicNs() * 1e-9),
      recent_(new Recent[kRecentCollectives]) {
  hash_.store(id_.hash, std::memory_order_relaxed);
  rank_.store(id_.rank, std::memory_order_relaxed);
  for (int i = 0; i < nslots_; ++i) {
    Slot& s = slots_[i];
    s.op_handle.slot = &s;
    s.channel_handle.slot = &s;
    s.comm = this;
  }
}

void CommStats::LearnIdentity(uint64_t hash, int rank) {
  if (hash == 0 || hash_.load(std::memory_order_relaxed) != 0) return;
  rank_.store(rank, std::memory_order_relaxed);
  hash_.store(hash, std::memory_order_release);
}

CommStats::Cell& CommStats::CellFor(int op, int size_bucket, int algo, int proto) {
  return cells_[((op * comm::kSizeBuckets + size_bucket) * kNumAlgos + algo) * kNumProtos + proto];
}

Handle* CommStats::StartOp(const OpStart& op, uint64_t host_ns) {
  // Operations complete in about the order they start, so the slot after the last one
  // claimed is almost always free: one CAS.
  const uint32_t first = cursor_.load(std::memory_order_relaxed);
  Slot* slot = nullptr;
  for (int i = 0; i < nslots_; ++i) {
    const uint32_t idx = (first + static_cast<uint32_t>(i)) % static_cast<uint32_t>(nslots_);
    uint32_t expected = 0;
    if (slots_[idx].busy.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      slot = &slots_[idx];
      cursor_.store(idx + 1, std::memory_order_relaxed);
      break;
    }
  }
  if (slot == nullptr) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  const bool p2p = IsPointToPoint(op.op);
  const uint64_t seq = (p2p ? p2p_started_ : coll_started_).fetch_add(1) + 1;
  slot->generation.fetch_add(1, std::memory_order_relaxed);
  slot->op.store(static_cast<uint8_t>(op.op), std::memory_order_relaxed);
  slot->algo.store(static_cast<uint8_t>(op.algo), std::memory_order_relaxed);
  slot->proto.store(static_cast<uint8_t>(op.proto), std::memory_order_relaxed);
  slot->bytes.store(op.bytes, std::memory_order_relaxed);
  slot->seq.store(seq, std::memory_order_relaxed);
  slot->gpu_first_start.store(UINT64_MAX, std::memory_order_relaxed);
  slot->gpu_last_stop.store(0, std::memory_order_relaxed);
  slot->host_first_channel.store(UINT64_MAX, std::memory_order_relaxed);
  slot->host_last_channel.store(0, std::memory_order_relaxed);
  slot->channels_started.store(0, std::memory_order_relaxed);
  const int channels = timing_ == Timing::kKernelChannels ? std::max(op.channels, 0) : 0;
  slot->pending.store(1 + channels, std::memory_order_release);
  // Last: a snapshot counts the slot in flight once this is non-zero.
  slot->host_start_ns.store(host_ns == 0 ? 1 : host_ns, std::memory_order_release);
  return &slot->op_handle;
}

void CommStats::StopOp(Slot* slot) {
  if (DropPending(slot->pending)) {
    Complete(slot);
    Release(slot);
  }
}

Handle* CommStats::StartChannel(Slot* slot, uint64_t gpu_ns, uint64_t host_ns) {
  slot->channels_started.fetch_add(1, std::memory_order_relaxed);
  if (gpu_ns != 0) AtomicMin(slot->gpu_first_start, gpu_ns);
  if (host_ns != 0) AtomicMin(slot->host_first_channel, host_ns);
  return &slot->channel_handle;
}

void CommStats::RecordChannelStop(Slot* slot, uint64_t gpu_ns, uint64_t host_ns) {
  if (gpu_ns != 0) AtomicMax(slot->gpu_last_stop, gpu_ns);
  if (host_ns != 0) AtomicMax(slot->host_last_channel, host_ns);
}

void CommStats::StopChannel(Slot* slot) {
  if (DropPending(slot->pending)) {
    Complete(slot);
    Release(slot);
  }
}

void CommStats::Complete(Slot* slot) {
  const int op = slot->op.load(std::memory_order_relaxed);
  const int64_t bytes = slot->bytes.load(std::memory_order_relaxed);
  const int size_bucket = comm::SizeBucketIndex(bytes);
  Cell& cell = CellFor(op, size_bucket, slot->algo.load(std::memory_order_relaxed),
                       slot->proto.load(std::memory_order_relaxed));
  cell.count.fetch_add(1, std::memory_order_relaxed);
  cell.bytes.fetch_add(static_cast<uint64_t>(bytes), std::memory_order_relaxed);

  uint64_t time_ns = 0;
  if (slot->channels_started.load(std::memory_order_relaxed) > 0) {
    const uint64_t g0 = slot->gpu_first_start.load(std::memory_order_relaxed);
    const uint64_t g1 = slot->gpu_last_stop.load(std::memory_order_relaxed);
    const uint64_t h0 = slot->host_first_channel.load(std::memory_order_relaxed);
    const uint64_t h1 = slot->host_last_channel.load(std::memory_order_relaxed);
    if (g0 != UINT64_MAX && g1 > g0) {
      time_ns = g1 - g0;
    } else if (h0 != UINT64_MAX && h1 > h0) {
      time_ns = h1 - h0;  // NCCL gave no GPU timestamps: its proxy thread's view
    }
  }
  const bool p2p = IsPointToPoint(static_cast<NcclOp>(op));
  const uint64_t seq = slot->seq.load(std::memory_order_relaxed);
  if (time_ns > 0 && !p2p) {
    Recent& r = recent_[seq % kRecentCollectives];
    r.seq.store(0, std::memory_order_release);
    r.op.store(static_cast<uint8_t>(op), std::memory_order_relaxed);
    r.bytes.store(bytes, std::memory_order_relaxed);
    r.enqueue_ns.store(slot->host_start_ns.load(std::memory_order_relaxed),
                       std::memory_order_relaxed);
    const uint64_t g0 = slot->gpu_first_start.load(std::memory_order_relaxed);
    r.kernel_start_ns.store(g0 == UINT64_MAX ? 0 : g0, std::memory_order_relaxed);
    r.time_ns.store(time_ns, std::memory_order_relaxed);
    r.seq.store(seq, std::memory_order_release);
  }
  if (time_ns > 0) {
    cell.timed_count.fetch_add(1, std::memory_order_relaxed);
    cell.timed_bytes.fetch_add(static_cast<uint64_t>(bytes), std::memory_order_relaxed);
    cell.time_ns.fetch_add(time_ns, std::memory_order_relaxed);
    Histogram& h = histograms_[op * comm::kSizeBuckets + size_bucket];
    h.buckets[HistogramIndex(time_ns * 1e-9)].fetch_add(1, std::memory_order_relaxed);
    h.sum_ns.fetch_add(time_ns, std::memory_order_relaxed);
    h.count.fetch_add(1, std::memory_order_relaxed);
  }
  AtomicMax(p2p ? p2p_completed_ : coll_completed_, seq);
}

void CommStats::Release(Slot* slot) {
  slot->host_start_ns.store(0, std::memory_order_release);
  slot->busy.store(0, std::memory_order_release);
}

void CommStats::Finalize() {
  uint64_t n = 0;
  has_abandoned_oldest_ = OldestInFlight(MonotonicNs(), base::UnixNow(), &abandoned_oldest_, &n);
  abandoned_.store(n, std::memory_order_relaxed);
  finalized_.store(true, std::memory_order_release);
}

bool CommStats::OldestInFlight(uint64_t now_ns, double now_unix, InFlight* oldest,
                               uint64_t* count) const {
  uint64_t oldest_ns = UINT64_MAX;
  *count = 0;
  for (int i = 0; i < nslots_; ++i) {
    const Slot& slot = slots_[i];
    const uint32_t gen = slot.generation.load(std::memory_order_acquire);
    const uint64_t start = slot.host_start_ns.load(std::memory_order_acquire);
    if (start == 0) continue;
    const auto op = static_cast<NcclOp>(slot.op.load(std::memory_order_relaxed));
    const uint64_t seq = slot.seq.load(std::memory_order_relaxed);
    // A slot released or reused while we read it: skip it, it is not stuck.
    if (slot.generation.load(std::memory_order_acquire) != gen ||
        slot.host_start_ns.load(std::memory_order_acquire) != start) {
      continue;
    }
    ++*count;
    if (start < oldest_ns) {
      oldest_ns = start;
      oldest->op = op;
      oldest->seq = seq;
      oldest->p2p = IsPointToPoint(op);
      oldest->age_seconds = now_ns > start ? (now_ns - start) * 1e-9 : 0.0;
      oldest->start_unix = now_unix - oldest->age_seconds;
    }
  }
  return oldest_ns != UINT64_MAX;
}

CommSnapshot CommStats::Snapshot() const {
  CommSnapshot s;
  s.id = id_;
  s.id.hash = hash_.load(std::memory_order_acquire);
  s.id.rank = rank_.load(std::memory_order_relaxed);
  s.timing = timing_;
  s.finalized = finalized_.load(std::memory_order_acquire);
  for (int op = 0; op < kNumOps; ++op) {
    for (int b = 0; b < comm::kSizeBuckets; ++b) {
      for (int a = 0; a < kNumAlgos; ++a) {
        for (int p = 0; p < kNumProtos; ++p) {
          const Cell& c = cells_[((op * comm::kSizeBuckets + b) * kNumAlgos + a) * kNumProtos + p];
          const uint64_t count = c.count.load(std::memory_order_relaxed);
          if (count == 0) continue;
          CellSnapshot cs;
          cs.op = static_cast<NcclOp>(op);
          cs.size_bucket = b;
          cs.algo = a;
          cs.proto = p;
          cs.count = count;
          cs.bytes = c.bytes.load(std::memory_order_relaxed);
          cs.timed_count = c.timed_count.load(std::memory_order_relaxed);
          cs.timed_bytes = c.timed_bytes.load(std::memory_order_relaxed);
          cs.seconds = c.time_ns.load(std::memory_order_relaxed) * 1e-9;
          const double factor = BusBandwidthFactor(cs.op, id_.nranks);
          cs.busbw = cs.seconds > 0 ? cs.timed_bytes * factor / cs.seconds : 0.0;
          s.cells.push_back(cs);
        }
      }
      const Histogram& h = histograms_[op * comm::kSizeBuckets + b];
      const uint64_t hc = h.count.load(std::memory_order_relaxed);
      if (hc == 0) continue;
      HistogramSnapshot hs;
      hs.op = static_cast<NcclOp>(op);
      hs.size_bucket = b;
      for (int i = 0; i <= kHistogramBounds; ++i) {
        hs.buckets[i] = h.buckets[i].load(std::memory_order_relaxed);
      }
      // The count is the buckets' sum, so that _count equals the +Inf bucket even when an
      // operation completes between the loads.
      hs.count = 0;
      for (uint64_t v : hs.buckets) hs.count += v;
      hs.sum_seconds = h.sum_ns.load(std::memory_order_relaxed) * 1e-9;
      s.histograms.push_back(hs);
    }
  }
  s.coll_started = coll_started_.load(std::memory_order_relaxed);
  s.coll_completed = coll_completed_.load(std::memory_order_relaxed);
  s.p2p_started = p2p_started_.load(std::memory_order_relaxed);
  s.p2p_completed = p2p_completed_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.abandoned = abandoned_.load(std::memory_order_relaxed);
  s.init_unix = init_unix_;
  for (int i = 0; i < kRecentCollectives; ++i) {
    const Recent& r = recent_[i];
    const uint64_t seq = r.seq.load(std::memory_order_acquire);
    if (seq == 0) continue;
    RecentCollective c;
    c.seq = seq;
    c.op = static_cast<NcclOp>(r.op.load(std::memory_order_relaxed));
    c.bytes = r.bytes.load(std::memory_order_relaxed);
    c.enqueue_unix = r.enqueue_ns.load(std::memory_order_relaxed) * 1e-9 + unix_minus_monotonic_;
    c.kernel_start_ns = r.kernel_start_ns.load(std::memory_order_relaxed);
    c.seconds = r.time_ns.load(std::memory_order_relaxed) * 1e-9;
    if (r.seq.load(std::memory_order_acquire) == seq) s.recent.push_back(c);
  }
  std::sort(s.recent.begin(), s.recent.end(),
            [](const RecentCollective& a, const RecentCollective& b) { return a.seq < b.seq; });

  if (s.finalized) {
    // What was in flight is counted in `abandoned`; the oldest is what it was stuck in.
    s.has_abandoned_oldest = has_abandoned_oldest_;
    s.abandoned_oldest = abandoned_oldest_;
    return s;
  }
  s.has_oldest = OldestInFlight(MonotonicNs(), base::UnixNow(), &s.oldest, &s.in_flight);
  return s;
}

}  // namespace ringpilot::nccl_profiler
