#include "trainer/checkpoint/rng_state.h"

#include <torch/torch.h>

namespace ringpilot::trainer::checkpoint {

namespace {

at::Generator CpuGenerator() { return at::detail::getDefaultCPUGenerator(); }

// The current CUDA device's default generator, through ATen's context: no CUDA headers.
at::Generator CudaGenerator() {
  return at::globalContext().defaultGenerator(at::Device(at::kCUDA));
}

uint64_t RankSeed(uint64_t seed, int rank) {
  return seed * 1000003ULL + 17ULL * static_cast<uint64_t>(rank) + 1;
}

}  // namespace

RankRngState::RankRngState(uint64_t seed, int rank, int world, bool cuda)
    : rank_(rank), cuda_(cuda) {
  // Seeds the CPU generator and every CUDA device's.
  torch::manual_seed(RankSeed(seed, rank));
  cpu_table_ = at::zeros({world, CpuGenerator().get_state().numel()}, at::kByte);
  if (cuda_) cuda_table_ = at::zeros({world, CudaGenerator().get_state().numel()}, at::kByte);
}

std::vector<NamedTensor> RankRngState::Entries() const {
  std::vector<NamedTensor> entries = {{kCpuEntry, cpu_table_}};
  if (cuda_) entries.push_back({kCudaEntry, cuda_table_, /*optional=*/true});
  return entries;
}

void RankRngState::Gather(comm::Communicator& host) {
  host.AllGather(CpuGenerator().get_state(), cpu_table_)->Wait();
  if (cuda_) host.AllGather(CudaGenerator().get_state(), cuda_table_)->Wait();
}

void RankRngState::Restore(comm::Communicator& host, bool cuda_loaded) {
  host.Broadcast(cpu_table_, 0)->Wait();
  CpuGenerator().set_state(cpu_table_[rank_].clone());
  if (!cuda_) return;
  at::Tensor loaded = at::full({1}, cuda_loaded ? 1 : 0, at::kLong);
  host.Broadcast(loaded, 0)->Wait();
  if (loaded.item<int64_t>() == 0) return;
  host.Broadcast(cuda_table_, 0)->Wait();
  CudaGenerator().set_state(cuda_table_[rank_].clone());
}

}  // namespace ringpilot::trainer::checkpoint

namespace ringpilot::trainer::checkpoint {

void RankRngState::Reseed(uint64_t seed, int64_t step) {
  // splitmix64's finaliser over (rank seed, step): distinct from every RankSeed of step 0.
  uint64_t z = RankSeed(seed, rank_) ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step + 1));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  torch::manual_seed(z ^ (z >> 31));
}

bool RankRngState::IsEntry(const std::string& name) { return name.rfind("rng/", 0) == 0; }

}  // namespace ringpilot::trainer::checkpoint
