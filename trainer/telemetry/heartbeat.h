// Where a rank is, for the launcher's failure report: RUN_DIR/logs/rank-N.heartbeat, one
// JSON object rewritten (write + rename) once a second by a thread of its own, so a rank
// blocked in a collective keeps beating while a stopped one (SIGSTOP, a dead host) does
// not. After a hang the ranks that timed out name the collective they waited in, and the
// heartbeats say which rank was behind (fewer collectives completed or started, or silent)
// and what each was doing. The format: history/trainer_beat.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "comm/communicator.h"

namespace ringpilot::trainer::telemetry {

/// Beat is called by the training thread; the file is written by the heartbeat's thread.
class Heartbeat {
 public:
  /// Starts beating. `comm` (the gradient communicator, may be null) must outlive the
  /// heartbeat: its started/completed collective counts go into each beat.
  Heartbeat(std::string path, int rank, const comm::Communicator* comm);
  /// Writes a last beat and stops the thread.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  /// Records that this rank is at `step` (0-based, the step being run) doing `phase` (a
  /// string literal: "step", "eval", "checkpoint", "done"). Two atomic stores.
  void Beat(int64_t step, const char* phase);

  /// Writes a beat now with `phase` (a string literal), from any thread: the last word of a
  /// rank that gives up (comm::AbortJob's reporter), so the rank that waited always has a
  /// newer beat than the one it waited for, even if its heartbeat thread was starved.
  void BeatNow(const char* phase);

  /// The attempt's step target (train.steps, or what train.epochs came to), for
  /// `ringpilot status`. One atomic store.
  void SetTotalSteps(int64_t steps);
  /// The latest loss this rank computed (rank 0's progress line), for `ringpilot status`.
  void SetLoss(double loss);

 private:
  void Loop();
  // Writes the file now. A failed write is ignored: the heartbeat is a diagnosis aid and
  // the run must not stop for it.
  void Write();

  const std::string path_;
  const std::string tmp_path_;
  const int rank_;
  const comm::Communicator* comm_;
  std::atomic<int64_t> step_{0};
  std::atomic<const char*> phase_{"start"};
  std::atomic<int64_t> total_steps_{0};  // 0: not known yet
  std::atomic<double> loss_{-1};         // negative: none yet (losses are never negative)
  std::mutex mutex_;
  std::mutex write_mutex_;  // one writer of the file at a time; guards the two below
  double last_write_unix_ = 0;
  double max_gap_s_ = 0;  // longest silence between two beats: a stopped (SIGSTOP) rank's
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ringpilot::trainer::telemetry
