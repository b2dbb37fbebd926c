// A fixed set of threads that run one function over [0, n) and return when all are done,
// for the GPU image pipeline's reading, parsing and decoding. Each thread leaves CUDA graph
// capture of other threads alone (relaxed capture mode), so it may call CUDA while the
// training thread captures.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/thread_priority.h"

namespace ringpilot::data::cuda {

/// Run is called by one thread at a time (the pipeline's); fn runs on the workers.
class WorkerPool {
 public:
  /// `nice` > 0: every worker runs at that nice value (base/thread_priority.h).
  explicit WorkerPool(int threads, int nice = 0) {
    for (int t = 0; t < threads; ++t) {
      workers_.emplace_back([this, t, nice] {
        base::SetThisThreadNice(nice);
        Work(t);
      });
    }
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  int size() const { return static_cast<int>(workers_.size()); }

  // fn(thread, item) for every item; returns after all ran.
  void Run(int n, const std::function<void(int, int)>& fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_.store(0);
    running_ = static_cast<int>(workers_.size());
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [this] { return running_ == 0; });
    fn_ = nullptr;
  }

 private:
  void Work(int thread) {
    // Graph capture on the training thread must not see this thread's CUDA calls.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int, int)>* fn;
      int n;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        fn = fn_;
        n = n_;
      }
      for (int i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) (*fn)(thread, i);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--running_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int, int)>* fn_ = nullptr;
  int n_ = 0;
  std::atomic<int> next_{0};
  int running_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

}  // namespace ringpilot::data::cuda
