#include "data/cuda/batched_decoder.h"

#include <algorithm>
#include <numeric>

#include "data/cuda/nvjpeg_decode.h"

namespace ringpilot::data::cuda {

BatchedJpegDecoder::BatchedJpegDecoder(nvjpegHandle_t handle, nvjpegOutputFormat_t preferred,
                                       int max_batch, int cpu_threads, int stream_priority)
    : handle_(handle), cpu_threads_(cpu_threads), priority_(stream_priority) {
  // Which format the backend writes: a throwaway state initialised with the preferred one.
  nvjpegJpegState_t probe = nullptr;
  PIPELINE_NVJPEG(nvjpegJpegStateCreate(handle_, &probe));
  format_ = nvjpegDecodeBatchedInitialize(handle_, probe, max_batch, cpu_threads_, preferred) ==
                    NVJPEG_STATUS_SUCCESS
                ? preferred
                : NVJPEG_OUTPUT_RGB;
  nvjpegJpegStateDestroy(probe);
}

BatchedJpegDecoder::~BatchedJpegDecoder() {
  for (auto& [css, g] : groups_) {
    if (g->stream) cudaStreamSynchronize(g->stream);
    if (g->state) nvjpegJpegStateDestroy(g->state);
    if (g->done) cudaEventDestroy(g->done);
    if (g->stream) cudaStreamDestroy(g->stream);
  }
}

BatchedJpegDecoder::Group& BatchedJpegDecoder::GroupOf(nvjpegChromaSubsampling_t css) {
  std::unique_ptr<Group>& g = groups_[static_cast<int>(css)];
  if (!g) {
    g = std::make_unique<Group>();
    PIPELINE_NVJPEG(nvjpegJpegStateCreate(handle_, &g->state));
    PIPELINE_CUDA(cudaStreamCreateWithPriority(&g->stream, cudaStreamNonBlocking, priority_));
    PIPELINE_CUDA(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming));
  }
  return *g;
}

void BatchedJpegDecoder::Clear() {
  for (Group* g : active_) {
    g->bitstreams.clear();
    g->lengths.clear();
    g->outputs.clear();
    g->pixels.clear();
  }
  active_.clear();
}

void BatchedJpegDecoder::Add(nvjpegChromaSubsampling_t css, const uint8_t* bytes, size_t length,
                             const nvjpegImage_t& out, int64_t pixels) {
  Group& g = GroupOf(css);
  if (g.bitstreams.empty()) active_.push_back(&g);
  g.bitstreams.push_back(bytes);
  g.lengths.push_back(length);
  g.outputs.push_back(out);
  g.pixels.push_back(pixels);
}

bool BatchedJpegDecoder::DecodeGroup(int index, cudaEvent_t ready) {
  Group& g = *active_[index];
  const int n = static_cast<int>(g.bitstreams.size());
  g.order.resize(n);
  std::iota(g.order.begin(), g.order.end(), 0);
  std::stable_sort(g.order.begin(), g.order.end(),
                   [&](int a, int b) { return g.pixels[a] > g.pixels[b]; });
  g.sorted_bitstreams.clear();
  g.sorted_lengths.clear();
  g.sorted_outputs.clear();
  for (int k : g.order) {
    g.sorted_bitstreams.push_back(g.bitstreams[k]);
    g.sorted_lengths.push_back(g.lengths[k]);
    g.sorted_outputs.push_back(g.outputs[k]);
  }
  // Initialising for another size is cheap (measured: the same batch time either way).
  if (g.initialized != n) {
    if (nvjpegDecodeBatchedInitialize(handle_, g.state, n, cpu_threads_, format_) !=
        NVJPEG_STATUS_SUCCESS) {
      g.initialized = -1;
      return false;
    }
    g.initialized = n;
  }
  if (cudaStreamWaitEvent(g.stream, ready, 0) != cudaSuccess) return false;
  const bool ok =
      nvjpegDecodeBatched(handle_, g.state, g.sorted_bitstreams.data(), g.sorted_lengths.data(),
                          g.sorted_outputs.data(), g.stream) == NVJPEG_STATUS_SUCCESS;
  if (!ok) g.initialized = -1;  // start it afresh next time
  return cudaEventRecord(g.done, g.stream) == cudaSuccess && ok;
}

cudaError_t BatchedJpegDecoder::JoinInto(cudaStream_t stream) {
  for (Group* g : active_) {
    const cudaError_t e = cudaStreamWaitEvent(stream, g->done, 0);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace ringpilot::data::cuda
