#include "comm/communicator.h"

#include <ATen/core/grad_mode.h>

namespace ringpilot::comm {

at::Tensor Communicator::AllocateCollectiveBuffer(int64_t numel, const at::TensorOptions& options) {
  return at::zeros({numel}, options);
}

void BroadcastCoalesced(Communicator& comm, const std::vector<at::Tensor>& tensors, int root) {
  if (comm.size() == 1 || tensors.empty()) return;
  // Group by (dtype, device) keeping first-seen order, so every rank groups identically.
  std::vector<std::vector<at::Tensor>> groups;
  for (const auto& t : tensors) {
    bool placed = false;
    for (auto& g : groups) {
      if (g.front().scalar_type() == t.scalar_type() && g.front().device() == t.device()) {
        g.push_back(t);
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({t});
  }
  for (auto& group : groups) {
    std::vector<at::Tensor> flat;
    flat.reserve(group.size());
    for (auto& t : group) flat.push_back(t.detach().reshape({-1}));
    at::Tensor buffer = at::cat(flat);
    comm.Broadcast(buffer, root)->Wait();
    int64_t offset = 0;
    at::NoGradGuard no_grad;
    for (auto& t : group) {
      const int64_t n = t.numel();
      t.detach().copy_(buffer.narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
}

}  // namespace ringpilot::comm
