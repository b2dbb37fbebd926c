#include "trainer/step/step_phases.h"

#include <chrono>
#include <thread>

#include "base/time.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "comm/device_timeline.h"
#endif

namespace ringpilot::trainer::step {

namespace {
enum Marker {
  kBegin,
  kForward,
  kBackward,
  kComm,
  kOptimizer,
  kFirstBucket,
  kEarlyUpdate,
  kMarkers
};
}  // namespace

#ifdef RINGPILOT_WITH_CUDA
struct StepPhases::Gpu {
  explicit Gpu(int device) : timeline(device) { first = timeline.AllocateMarks(kMarkers - 1); }
  comm::DeviceTimeline timeline;
  int first = 1;  // timeline index of kForward; kBegin is the row's mark 0
  int Index(Marker m) const { return m == kBegin ? 0 : first + m - 1; }
};

StepPhases::StepPhases(int device, comm::Communicator* comm) {
  if (device < 0) return;
  gpu_ = std::make_unique<Gpu>(device);
  comm_ = comm;
  if (comm_) comm_->set_timeline(&gpu_->timeline);
}
#else
struct StepPhases::Gpu {};
StepPhases::StepPhases(int, comm::Communicator*) {}
#endif

StepPhases::~StepPhases() {
  if (comm_) comm_->set_timeline(nullptr);  // the communicator may outlive the timeline
}

void StepPhases::Begin() {
#ifdef RINGPILOT_WITH_CUDA
  if (gpu_) return gpu_->timeline.BeginStep(c10::cuda::getCurrentCUDAStream().stream());
#endif
  host_[kBegin] = base::UnixNow();
}

void StepPhases::Stamp(int marker) {
#ifdef RINGPILOT_WITH_CUDA
  if (gpu_) {
    auto stream = c10::cuda::getCurrentCUDAStream().stream();
    gpu_->timeline.Mark(gpu_->Index(static_cast<Marker>(marker)), stream);
    if (marker == kOptimizer) gpu_->timeline.EndStep(stream);  // the row is complete
    return;
  }
#endif
  host_[marker] = base::UnixNow();
}

void StepPhases::ForwardDone() { Stamp(kForward); }
void StepPhases::BackwardDone() { Stamp(kBackward); }
void StepPhases::EarlyUpdateDone() { Stamp(kEarlyUpdate); }
void StepPhases::FirstGradientsReady() { Stamp(kFirstBucket); }
void StepPhases::CommDone() { Stamp(kComm); }
void StepPhases::OptimizerDone() { Stamp(kOptimizer); }

void StepPhases::SlowDown(double seconds) {
  if (seconds <= 0) return;
#ifdef RINGPILOT_WITH_CUDA
  if (gpu_) return gpu_->timeline.Spin(seconds, c10::cuda::getCurrentCUDAStream().stream());
#endif
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

void StepPhases::Launched(bool replay) {
  ++launched_;
  replays_.push_back(replay);
}

std::optional<StepPhaseTimes> StepPhases::Collect(bool device_idle) {
  const uint64_t next = collected_ + 1;
  if (next > launched_) return std::nullopt;
  StepPhaseTimes t;
  t.replay = replays_.front();
  double at[kMarkers];
  if (!gpu_) {
    for (int m = 0; m < kMarkers; ++m) at[m] = host_[m];
  } else {
#ifdef RINGPILOT_WITH_CUDA
    if (next == launched_ && !device_idle) return std::nullopt;
    if (!gpu_->timeline.Read(next, &t.marks)) {
      // Not published (should not happen once the step's end event completed): report
      // it as unknown rather than stall the training loop.
      collected_ = next;
      replays_.erase(replays_.begin());
      t.valid = false;
      return t;
    }
    const uint64_t begin = t.marks[0];
    for (int m = 0; m < kMarkers; ++m) {
      const uint64_t v = t.marks[gpu_->Index(static_cast<Marker>(m))];
      at[m] = v >= begin && v > 0 ? gpu_->timeline.ToUnix(begin) + (v - begin) * 1e-9 : 0.0;
    }
#endif
  }
  collected_ = next;
  replays_.erase(replays_.begin());
  t.start_unix = at[kBegin];
  t.forward = at[kForward] - at[kBegin];
  t.backward = at[kBackward] - at[kForward];
  // A step without an early update leaves an older (or no) mark behind: then the first
  // part of the update has zero length.
  const double early = at[kEarlyUpdate] >= at[kBackward] ? at[kEarlyUpdate] : at[kBackward];
  t.comm_exposed = at[kComm] - early;
  t.optimizer = (early - at[kBackward]) + (at[kOptimizer] - at[kComm]);
  t.ready_unix = gpu_ && at[kFirstBucket] > 0 ? at[kFirstBucket] : at[kBackward];
  return t;
}

}  // namespace ringpilot::trainer::step
