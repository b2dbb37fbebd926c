#include "comm/device_timeline_kernels.h"

namespace ringpilot::comm::kernels {

namespace {

__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ int Row(const TimelineBuffers& b) {
  return static_cast<int>(*b.counter % static_cast<unsigned long long>(b.slots));
}

__global__ void BeginKernel(TimelineBuffers b) {
  const unsigned long long n = *b.counter + 1;
  *b.counter = n;
  const int row = static_cast<int>(n % static_cast<unsigned long long>(b.slots));
  // Invalidate the row before reusing it, so the host never pairs old marks with a
  // new sequence number.
  *reinterpret_cast<volatile unsigned long long*>(&b.seqs[row]) = 0;
  __threadfence_system();
  *reinterpret_cast<volatile unsigned long long*>(&b.marks[row * b.stride]) = GlobalTimer();
}

__global__ void MarkKernel(TimelineBuffers b, int index) {
  *reinterpret_cast<volatile unsigned long long*>(&b.marks[Row(b) * b.stride + index]) =
      GlobalTimer();
}

__global__ void EndKernel(TimelineBuffers b) {
  __threadfence_system();  // the row's marks become visible before its sequence word
  *reinterpret_cast<volatile unsigned long long*>(&b.seqs[Row(b)]) = *b.counter;
}

__global__ void ReadTimerKernel(unsigned long long* out) {
  *reinterpret_cast<volatile unsigned long long*>(out) = GlobalTimer();
}

__global__ void SpinKernel(unsigned long long ns) {
  const unsigned long long end = GlobalTimer() + ns;
  while (GlobalTimer() < end) __nanosleep(1000);
}

}  // namespace

cudaError_t LaunchTimelineBegin(const TimelineBuffers& b, cudaStream_t stream) {
  BeginKernel<<<1, 1, 0, stream>>>(b);
  return cudaGetLastError();
}

cudaError_t LaunchTimelineMark(const TimelineBuffers& b, int index, cudaStream_t stream) {
  MarkKernel<<<1, 1, 0, stream>>>(b, index);
  return cudaGetLastError();
}

cudaError_t LaunchTimelineEnd(const TimelineBuffers& b, cudaStream_t stream) {
  EndKernel<<<1, 1, 0, stream>>>(b);
  return cudaGetLastError();
}

cudaError_t LaunchReadGlobalTimer(unsigned long long* out, cudaStream_t stream) {
  ReadTimerKernel<<<1, 1, 0, stream>>>(out);
  return cudaGetLastError();
}

cudaError_t LaunchSpin(unsigned long long nanoseconds, cudaStream_t stream) {
  SpinKernel<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

}  // namespace ringpilot::comm::kernels
