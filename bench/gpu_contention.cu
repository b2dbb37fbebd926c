#include <cuda_runtime.h>

#include <stdexcept>

#include "base/thread_priority.h"
#include "bench/gpu_contention.h"

namespace ringpilot::bench {
namespace {

// ~50 us of arithmetic on every SM: the length of a typical ResNet-50 kernel.
__global__ void SpinKernel(long long cycles, float* sink) {
  const long long start = clock64();
  float x = threadIdx.x;
  while (clock64() - start < cycles) x = x * 0.999f + 1.0f;
  if (x == -1.0f) sink[0] = x;  // never true; keeps the loop
}

// Streams `n` floats from one buffer to another: HBM-bound, as batch norm's passes are.
__global__ void StreamKernel(const float4* in, float4* out, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float4 v = in[i];
    v.x += 1.0f;
    out[i] = v;
  }
}

void GpuLoad(bool hbm, int device, std::atomic<bool>& stop, std::atomic<long long>& launches) {
  cudaSetDevice(device);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  int sms = 0, clock_khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  const size_t n = (size_t{1} << 30) / sizeof(float4);  // 1 GiB each way
  float4 *in = nullptr, *out = nullptr;
  float* sink = nullptr;
  if (hbm) {
    cudaMalloc(&in, n * sizeof(float4));
    cudaMalloc(&out, n * sizeof(float4));
    cudaMemset(in, 0, n * sizeof(float4));
  }
  cudaMalloc(&sink, sizeof(float));
  cudaEvent_t marks[4];
  for (cudaEvent_t& e : marks) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  for (long long k = 0; !stop.load(); ++k) {
    cudaEvent_t& mark = marks[k % 4];
    cudaEventSynchronize(mark);  // at most four launches queued
    if (hbm) {
      StreamKernel<<<sms * 4, 512, 0, stream>>>(in, out, n);
    } else {
      SpinKernel<<<sms * 2, 1024, 0, stream>>>(static_cast<long long>(clock_khz) * 50 / 1000, sink);
    }
    cudaEventRecord(mark, stream);
    launches.fetch_add(1);
  }
  cudaStreamSynchronize(stream);
  for (cudaEvent_t& e : marks) cudaEventDestroy(e);
  cudaFree(in);
  cudaFree(out);
  cudaFree(sink);
  cudaStreamDestroy(stream);
}

}  // namespace

GpuContention::GpuContention(const std::string& kind, int device) {
  if (kind == "none") return;
  if (kind == "sm" || kind == "hbm") {
    const bool hbm = kind == "hbm";
    threads_.emplace_back([this, hbm, device] { GpuLoad(hbm, device, stop_, launches_); });
    return;
  }
  if (kind.rfind("cpu:", 0) == 0 || kind.rfind("cpu-nice:", 0) == 0) {
    const bool niced = kind[3] == '-';
    const int n = std::stoi(kind.substr(kind.find(':') + 1));
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, niced] {
        if (niced) base::SetThisThreadNice(10);
        volatile double x = 1;
        while (!stop_.load(std::memory_order_relaxed)) {
          for (int k = 0; k < 100000; ++k) x = x * 1.0000001 + 1e-9;
          launches_.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    return;
  }
  throw std::invalid_argument("--contend " + kind + ": not none, sm, hbm, cpu:N or cpu-nice:N");
}

GpuContention::~GpuContention() {
  stop_.store(true);
  for (std::thread& t : threads_) t.join();
}

}  // namespace ringpilot::bench
