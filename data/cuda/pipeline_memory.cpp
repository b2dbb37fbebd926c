#include "data/cuda/pipeline_memory.h"

#include <algorithm>
#include <limits>

namespace ringpilot::data::cuda {

DevicePool::DevicePool(int device) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  if (cudaMemPoolCreate(&pool_, &props) != cudaSuccess) {
    pool_ = nullptr;
    return;
  }
  // Keep everything freed: a pool that trims gives memory back at each synchronisation and
  // takes it again (from the device, synchronising it) at the next allocation.
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep);
}

DevicePool::~DevicePool() {
  if (pool_) cudaMemPoolDestroy(pool_);
}

cudaError_t DevicePool::Allocate(void** ptr, size_t bytes, cudaStream_t stream) {
  if (!pool_) return cudaErrorNotSupported;
  return cudaMallocFromPoolAsync(ptr, std::max<size_t>(bytes, 1), pool_, stream);
}

cudaError_t DevicePool::Free(void* ptr, cudaStream_t stream) {
  return ptr ? cudaFreeAsync(ptr, stream) : cudaSuccess;
}

uint64_t DevicePool::reserved_bytes() const {
  uint64_t bytes = 0;
  if (pool_) cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &bytes);
  return bytes;
}

PinnedCache::~PinnedCache() {
  for (Block& b : blocks_) {
    if (b.released) {
      cudaEventSynchronize(b.released);
      cudaEventDestroy(b.released);
    }
    cudaFreeHost(b.ptr);
  }
}

cudaError_t PinnedCache::Allocate(void** ptr, size_t bytes) {
  // Power-of-two size classes from 64 KiB: requests that vary a little (staging for a
  // batch's PNGs, nvJPEG's buffers) share blocks, so the cache stops growing soon.
  size_t size = size_t{64} << 10;
  while (size < bytes) size *= 2;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Block& b : blocks_) {
    if (b.in_use || b.bytes != size) continue;
    if (b.released && cudaEventQuery(b.released) != cudaSuccess) continue;  // still in use
    b.in_use = true;
    *ptr = b.ptr;
    return cudaSuccess;
  }
  Block b;
  b.bytes = size;
  const cudaError_t e = cudaHostAlloc(&b.ptr, size, cudaHostAllocDefault);
  if (e != cudaSuccess) return e;
  ++system_allocations_;
  b.in_use = true;
  *ptr = b.ptr;
  blocks_.push_back(b);
  return cudaSuccess;
}

cudaError_t PinnedCache::Free(void* ptr, cudaStream_t stream) {
  if (!ptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Block& b : blocks_) {
    if (b.ptr != ptr) continue;
    b.in_use = false;
    if (!stream) {
      if (b.released) cudaEventDestroy(b.released);
      b.released = nullptr;
      return cudaSuccess;
    }
    if (!b.released) {
      const cudaError_t e = cudaEventCreateWithFlags(&b.released, cudaEventDisableTiming);
      if (e != cudaSuccess) return e;
    }
    return cudaEventRecord(b.released, stream);
  }
  return cudaErrorInvalidValue;
}

namespace {

int DeviceMalloc(void* ctx, void** ptr, size_t size, cudaStream_t stream) {
  return static_cast<DevicePool*>(ctx)->Allocate(ptr, size, stream) == cudaSuccess ? 0 : 1;
}
int DeviceFree(void* ctx, void* ptr, size_t, cudaStream_t stream) {
  return static_cast<DevicePool*>(ctx)->Free(ptr, stream) == cudaSuccess ? 0 : 1;
}
int PinnedMalloc(void* ctx, void** ptr, size_t size, cudaStream_t) {
  return static_cast<PinnedCache*>(ctx)->Allocate(ptr, size) == cudaSuccess ? 0 : 1;
}
int PinnedFree(void* ctx, void* ptr, size_t, cudaStream_t stream) {
  return static_cast<PinnedCache*>(ctx)->Free(ptr, stream) == cudaSuccess ? 0 : 1;
}

}  // namespace

nvjpegDevAllocatorV2_t NvjpegDeviceAllocator(DevicePool* pool) {
  return nvjpegDevAllocatorV2_t{&DeviceMalloc, &DeviceFree, pool};
}

nvjpegPinnedAllocatorV2_t NvjpegPinnedAllocator(PinnedCache* cache) {
  return nvjpegPinnedAllocatorV2_t{&PinnedMalloc, &PinnedFree, cache};
}

PinnedArena::~PinnedArena() {
  for (Chunk& c : chunks_) cudaFreeHost(c.data);
}

void PinnedArena::Reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  chunk_ = 0;
  offset_ = 0;
}

uint8_t* PinnedArena::Take(size_t bytes) {
  constexpr size_t kAlign = 64;
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> lock(mutex_);
  for (; chunk_ < chunks_.size(); ++chunk_, offset_ = 0) {
    Chunk& c = chunks_[chunk_];
    if (c.bytes - offset_ >= bytes) {
      uint8_t* p = c.data + offset_;
      offset_ += bytes;
      return p;
    }
  }
  // Past the last chunk: a new one, kept for every later batch.
  Chunk c;
  c.bytes = std::max(chunk_bytes_, bytes);
  if (cudaHostAlloc(reinterpret_cast<void**>(&c.data), c.bytes, cudaHostAllocDefault) !=
      cudaSuccess) {
    return nullptr;
  }
  ++system_allocations_;
  chunks_.push_back(c);
  chunk_ = chunks_.size() - 1;
  offset_ = bytes;
  return c.data;
}

}  // namespace ringpilot::data::cuda
