// Memory of the GPU image pipeline that never synchronises the device once it is warm:
// cudaMalloc, cudaHostAlloc and their frees each wait for the whole GPU (the training step
// included), so the pipeline and nvJPEG allocate once and reuse.
//   DevicePool     a CUDA memory pool that keeps what is freed (release threshold: all),
//                  allocated and freed in stream order
//   PinnedCache    pinned host blocks, reused once the stream work that last used them is
//                  done (an event recorded at free time says so)
//   PinnedArena    the bytes of a batch's encoded images, read straight into pinned memory so
//                  every copy to the device is asynchronous; bump-allocated, reset per batch
// NvjpegAllocators() gives nvJPEG (nvjpegCreateExV2, nvjpegBuffer*CreateV2) the first two.
#pragma once

#include <cuda_runtime.h>
#include <nvjpeg.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ringpilot::data::cuda {

/// Thread-safe. Allocations come from a pool private to this object, on `device`.
class DevicePool {
 public:
  explicit DevicePool(int device);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  /// Stream-ordered: usable by work on `stream` after this call. Returns the CUDA status.
  cudaError_t Allocate(void** ptr, size_t bytes, cudaStream_t stream);
  /// Stream-ordered: the memory returns to the pool when `stream`'s work so far is done.
  cudaError_t Free(void* ptr, cudaStream_t stream);
  /// Bytes the pool holds from the device (grows while warming up, then stays).
  uint64_t reserved_bytes() const;

 private:
  cudaMemPool_t pool_ = nullptr;
};

/// Thread-safe. Blocks are never returned to the system before destruction.
class PinnedCache {
 public:
  PinnedCache() = default;
  ~PinnedCache();
  PinnedCache(const PinnedCache&) = delete;
  PinnedCache& operator=(const PinnedCache&) = delete;

  /// A block of at least `bytes` (its power-of-two size class, from 64 KiB): a free one of
  /// that class whose last user's work is done, else a new one (cudaHostAlloc).
  cudaError_t Allocate(void** ptr, size_t bytes);
  /// Returns `ptr` to the cache; it is reused only after `stream`'s work so far (null: none).
  cudaError_t Free(void* ptr, cudaStream_t stream);
  /// cudaHostAlloc calls so far (steady state: constant).
  int64_t system_allocations() const { return system_allocations_.load(); }

 private:
  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
    bool in_use = false;
    cudaEvent_t released = nullptr;  // recorded on the freeing stream
  };
  std::mutex mutex_;
  std::vector<Block> blocks_;
  std::atomic<int64_t> system_allocations_{0};
};

/// nvJPEG's allocator interfaces over `pool` and `cache` (which must outlive every handle and
/// buffer made with them).
nvjpegDevAllocatorV2_t NvjpegDeviceAllocator(DevicePool* pool);
nvjpegPinnedAllocatorV2_t NvjpegPinnedAllocator(PinnedCache* cache);

/// Pinned room for one batch's encoded images. Take is thread-safe (the readers call it at
/// once); Reset is called by one thread while no Take runs.
class PinnedArena {
 public:
  explicit PinnedArena(size_t chunk_bytes = size_t{64} << 20) : chunk_bytes_(chunk_bytes) {}
  ~PinnedArena();
  PinnedArena(const PinnedArena&) = delete;
  PinnedArena& operator=(const PinnedArena&) = delete;

  /// Forgets every Take: the memory is reused by the next batch. The caller has made sure
  /// the device no longer reads it (the batch's stream work is done).
  void Reset();
  /// `bytes` of pinned memory until the next Reset; nullptr when cudaHostAlloc fails. Adds a
  /// chunk when the batch outgrows those it has (warm-up; later batches reuse them).
  uint8_t* Take(size_t bytes);
  /// cudaHostAlloc calls so far (steady state: constant).
  int64_t system_allocations() const { return system_allocations_.load(); }

 private:
  struct Chunk {
    uint8_t* data = nullptr;
    size_t bytes = 0;
  };
  const size_t chunk_bytes_;
  std::mutex mutex_;  // Take: the chunks, the cursor and its offset move together
  std::vector<Chunk> chunks_;
  size_t chunk_ = 0;
  size_t offset_ = 0;
  std::atomic<int64_t> system_allocations_{0};
};

}  // namespace ringpilot::data::cuda
