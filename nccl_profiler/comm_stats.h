// Per-communicator state of the NCCL profiler plugin: a fixed pool of in-flight operation
// slots and the aggregates of completed operations, all atomics.
//
// Hot path (NCCL's threads: the thread that enqueues, the proxy progress thread): StartOp,
// StopOp, StartChannel, RecordChannelStop, StopChannel. They take no lock and allocate
// nothing: a slot is claimed by compare-and-swap from the pool made at construction,
// aggregates are relaxed atomic adds. Snapshot (a scrape, the stats writer) reads the same
// atomics from any thread; a snapshot taken while operations complete may mix one
// operation's count with the previous one's time, never more.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_op.h"
#include "metrics/buckets.h"
#include "nccl_profiler/op_table.h"

namespace ringpilot::nccl_profiler {

/// Who a communicator is (from NCCL's init; v2/v3 learn hash and rank from the first op).
struct CommIdentity {
  uint64_t hash = 0;
  std::string name;  ///< the user's commName; "" when none
  int rank = -1;     ///< rank in this communicator; -1 unknown
  int nranks = 0;    ///< 0 unknown (v2/v3): then no bus bandwidth
  int nnodes = 0;
};

/// How completion and time are known, by profiler API version.
enum class Timing {
  /// v4/v5: an operation completes when all its kernel channels reported their stop; its
  /// time is the GPU globaltimer span from the first channel's start to the last's stop.
  kKernelChannels,
  /// v2/v3: NCCL's events do not tell completion reliably; an operation counts (ops, bytes,
  /// sequence) when it is enqueued, with no time.
  kEnqueueOnly,
};

/// Seconds bounds of the `ringpilot_collective_seconds` histogram: the trainer's
/// (metrics/buckets.h kCollectiveSecondsBounds); one more bucket for +Inf.
inline constexpr int kHistogramBounds = static_cast<int>(metrics::kCollectiveSecondsBounds.size());
double HistogramBound(int i);

/// What NCCL's Coll/P2p descriptor says about one operation.
struct OpStart {
  NcclOp op = NcclOp::kOther;
  int64_t bytes = 0;  ///< MessageBytes
  int algo = kAlgoNone;
  int proto = 3;
  int channels = 0;  ///< kernel channel events to expect (v4/v5); 0 = none will come
};

class CommStats;

/// What NCCL holds as an event handle. Every handle this plugin returns points to one, so
/// stopEvent and recordEventState (which get only the handle) know what it is.
enum class HandleKind : uint8_t { kOp, kChannel, kApiEager, kApiCaptured };
struct Handle {
  HandleKind kind;
  struct Slot* slot;
};

/// One in-flight operation. Fields read by Snapshot are atomics.
struct alignas(64) Slot {
  Handle op_handle{HandleKind::kOp, nullptr};
  Handle channel_handle{HandleKind::kChannel, nullptr};
  CommStats* comm = nullptr;
  std::atomic<uint32_t> busy{0};    ///< 0 free, 1 claimed
  std::atomic<int32_t> pending{0};  ///< op stop + expected channel stops still to come
  std::atomic<uint32_t> generation{0};
  std::atomic<uint8_t> op{0};
  std::atomic<uint8_t> algo{0};
  std::atomic<uint8_t> proto{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<uint64_t> seq{0};            ///< this rank's sequence number on the comm
  std::atomic<uint64_t> host_start_ns{0};  ///< CLOCK_MONOTONIC at StartOp
  std::atomic<uint64_t> gpu_first_start{UINT64_MAX};
  std::atomic<uint64_t> gpu_last_stop{0};
  std::atomic<uint64_t> host_first_channel{UINT64_MAX};
  std::atomic<uint64_t> host_last_channel{0};
  std::atomic<uint32_t> channels_started{0};
};

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC).
uint64_t MonotonicNs();

/// The aggregates of one (op, size class, algorithm, protocol).
struct CellSnapshot {
  NcclOp op = NcclOp::kOther;
  int size_bucket = 0;
  int algo = kAlgoNone;
  int proto = 3;
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t timed_count = 0;  ///< operations with a time (GPU span)
  uint64_t timed_bytes = 0;
  double seconds = 0;  ///< sum of their times
  double busbw = 0;    ///< timed_bytes * factor / seconds; 0 without time or ranks
};

/// The time histogram of one (op, size class): counts per bucket (kHistogramBounds + 1,
/// the last is +Inf), not cumulative.
struct HistogramSnapshot {
  NcclOp op = NcclOp::kOther;
  int size_bucket = 0;
  std::array<uint64_t, kHistogramBounds + 1> buckets{};
  uint64_t count = 0;
  double sum_seconds = 0;
};

/// The oldest operation still in flight.
struct InFlight {
  NcclOp op = NcclOp::kOther;
  uint64_t seq = 0;
  bool p2p = false;
  double start_unix = 0;   ///< when it was enqueued, Unix seconds
  double age_seconds = 0;  ///< how long ago
};

/// One completed, timed collective, for lining up the ranks' views of the same sequence
/// number (`ringpilot diagnose`: who arrived last, who waited).
struct RecentCollective {
  uint64_t seq = 0;
  NcclOp op = NcclOp::kOther;
  int64_t bytes = 0;
  double enqueue_unix = 0;       ///< when this rank enqueued it (host clock), Unix seconds
  uint64_t kernel_start_ns = 0;  ///< its first channel's GPU start (globaltimer); 0 = none
  double seconds = 0;            ///< its time, as in the aggregates
};

struct CommSnapshot {
  CommIdentity id;
  double init_unix = 0;  ///< when NCCL reported the communicator, Unix seconds
  Timing timing = Timing::kEnqueueOnly;
  bool finalized = false;
  std::vector<CellSnapshot> cells;                ///< count > 0 only
  std::vector<HistogramSnapshot> histograms;      ///< count > 0 only
  uint64_t coll_started = 0, coll_completed = 0;  ///< collective sequence numbers
  uint64_t p2p_started = 0, p2p_completed = 0;
  uint64_t in_flight = 0;
  bool has_oldest = false;
  InFlight oldest;
  uint64_t dropped = 0;    ///< operations not tracked: the slot pool was full
  uint64_t abandoned = 0;  ///< in flight when the communicator was finalized (abort)
  /// Finalized with operations in flight: the oldest of them as it was at finalize (what
  /// the rank was stuck in when the communicator was aborted).
  bool has_abandoned_oldest = false;
  InFlight abandoned_oldest;
  /// The last CommStats::kRecentCollectives timed collectives, ascending by seq.
  std::vector<RecentCollective> recent;
};

class CommStats {
 public:
  /// Slots in the pool: operations that can be in flight at once (enqueued, not yet
  /// completed); more are counted in `dropped` and otherwise ignored.
  static constexpr int kDefaultSlots = 1024;
  /// Timed collectives kept for CommSnapshot::recent.
  static constexpr int kRecentCollectives = 256;

  CommStats(CommIdentity id, Timing timing, int slots = kDefaultSlots);
  CommStats(const CommStats&) = delete;
  CommStats& operator=(const CommStats&) = delete;

  /// v2/v3: hash and rank arrive with the first operation. Call before the op's StartOp
  /// (the thread that enqueues), at most once with a non-zero hash.
  void LearnIdentity(uint64_t hash, int rank);

  /// NCCL's startEvent of a Coll/P2p: claims a slot, the operation is in flight. Returns
  /// the handle to give NCCL, or null when the pool is full (counted as dropped).
  Handle* StartOp(const OpStart& op, uint64_t host_ns);
  /// NCCL's stopEvent of that handle (the operation is enqueued).
  void StopOp(Slot* slot);
  /// A kernel channel of the operation started (v4/v5); gpu_ns its GPU timestamp (0 when
  /// NCCL gave none). host_ns: the host clock, needed only without a GPU timestamp (0 =
  /// not taken: a clock read per channel event is most of the hook's cost). Returns the
  /// handle for the channel event.
  Handle* StartChannel(Slot* slot, uint64_t gpu_ns, uint64_t host_ns);
  /// recordEventState(KernelChStop): the channel's GPU stop timestamp; host_ns as above.
  void RecordChannelStop(Slot* slot, uint64_t gpu_ns, uint64_t host_ns);
  /// stopEvent of a channel handle.
  void StopChannel(Slot* slot);

  /// Marks the communicator finalized: operations still in flight count as abandoned (the
  /// oldest is kept). NCCL sends no event for it afterwards.
  void Finalize();

  CommSnapshot Snapshot() const;
  const CommIdentity& identity() const { return id_; }
  Timing timing() const { return timing_; }

 private:
  struct Cell {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> timed_count{0};
    std::atomic<uint64_t> timed_bytes{0};
    std::atomic<uint64_t> time_ns{0};
  };
  struct Histogram {
    std::array<std::atomic<uint64_t>, kHistogramBounds + 1> buckets{};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> sum_ns{0};
  };
  static constexpr int kCells = kNumOps * comm::kSizeBuckets * kNumAlgos * kNumProtos;
  // One timed collective; `seq` is written last (0 while the entry is rewritten), so a
  // reader that sees the same non-zero seq before and after the fields read a whole entry.
  struct Recent {
    std::atomic<uint64_t> seq{0};
    std::atomic<uint8_t> op{0};
    std::atomic<int64_t> bytes{0};
    std::atomic<uint64_t> enqueue_ns{0};  // CLOCK_MONOTONIC
    std::atomic<uint64_t> kernel_start_ns{0};
    std::atomic<uint64_t> time_ns{0};
  };

  void Release(Slot* slot);
  bool OldestInFlight(uint64_t now_ns, double now_unix, InFlight* oldest, uint64_t* count) const;
  void Complete(Slot* slot);
  Cell& CellFor(int op, int size_bucket, int algo, int proto);

  CommIdentity id_;
  std::atomic<uint64_t> hash_{0};
  std::atomic<int> rank_{-1};
  const Timing timing_;
  std::unique_ptr<Slot[]> slots_;
  const int nslots_;
  std::atomic<uint32_t> cursor_{0};
  std::unique_ptr<Cell[]> cells_;
  std::unique_ptr<Histogram[]> histograms_;  // kNumOps * kSizeBuckets
  std::atomic<uint64_t> coll_started_{0}, coll_completed_{0};
  std::atomic<uint64_t> p2p_started_{0}, p2p_completed_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> abandoned_{0};
  std::atomic<bool> finalized_{false};
  const double init_unix_;
  const double unix_minus_monotonic_;  // converts CLOCK_MONOTONIC stamps to Unix time
  std::unique_ptr<Recent[]> recent_;
  // Written by Finalize before finalized_ (release); read after it (acquire).
  bool has_abandoned_oldest_ = false;
  InFlight abandoned_oldest_;
};

}  // namespace ringpilot::nccl_profiler
