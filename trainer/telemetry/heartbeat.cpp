#include "trainer/telemetry/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "base/time.h"
#include "history/trainer_beat.h"

namespace ringpilot::trainer::telemetry {

Heartbeat::Heartbeat(std::string path, int rank, const comm::Communicator* comm)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), rank_(rank), comm_(comm) {
  Write();
  thread_ = std::thread([this] { Loop(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  Write();
}

void Heartbeat::Beat(int64_t step, const char* phase) {
  step_.store(step, std::memory_order_relaxed);
  phase_.store(phase, std::memory_order_relaxed);
}

void Heartbeat::BeatNow(const char* phase) {
  phase_.store(phase, std::memory_order_relaxed);
  Write();
}

void Heartbeat::SetTotalSteps(int64_t steps) {
  total_steps_.store(steps, std::memory_order_relaxed);
}

void Heartbeat::SetLoss(double loss) { loss_.store(loss, std::memory_order_relaxed); }

void Heartbeat::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
    lock.unlock();
    Write();
    lock.lock();
  }
}

void Heartbeat::Write() {
  const std::lock_guard<std::mutex> lock(write_mutex_);
  const double now = base::UnixNow();
  // A stopped process's thread misses its beats; the gap shows in the first beat after it
  // runs again (mpirun revives stopped ranks with SIGCONT before it kills them).
  if (last_write_unix_ > 0) max_gap_s_ = std::max(max_gap_s_, now - last_write_unix_);
  last_write_unix_ = now;
  history::TrainerBeat beat;
  beat.rank = rank_;
  beat.step = step_.load(std::memory_order_relaxed);
  beat.steps = total_steps_.load(std::memory_order_relaxed);
  beat.phase = phase_.load(std::memory_order_relaxed);
  beat.unix = now;
  beat.max_silence_s = max_gap_s_;
  // Negative: no loss logged yet.
  const double loss = loss_.load(std::memory_order_relaxed);
  if (loss >= 0) beat.loss = loss;
  beat.collectives_started = comm_ ? comm_->started_seq() : 0;
  beat.collectives_completed = comm_ ? comm_->completed_seq() : 0;
  char line[512];
  const size_t n = history::FormatTrainerBeat(beat, line, sizeof line);
  if (n == 0) return;
  // No fsync: a beat lost in a host crash is harmless, and a second's cadence of syncs on a
  // shared file system is not.
  const int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool ok = ::write(fd, line, n) == static_cast<ssize_t>(n);
  ::close(fd);
  if (ok) ::rename(tmp_path_.c_str(), path_.c_str());
}

}  // namespace ringpilot::trainer::telemetry
