#include "comm/gradient_reducer.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>

#include "comm/status.h"

namespace ringpilot::comm {

struct GradientReducer::Bucket {
  at::Tensor storage;  // gradients accumulate here (parameter dtype)
  at::Tensor wire;     // what goes on the wire (== storage unless comm_dtype differs)
  int pending = 0;     // parameters whose gradient has not arrived this step
  bool launched = false;
  std::unique_ptr<Work> work;
};

GradientReducer::GradientReducer(std::vector<at::Tensor> params, Communicator& comm,
                                 ReducerOptions options)
    : params_(std::move(params)), comm_(comm), options_(options) {
  if (params_.empty()) throw CommError("gradient reducer: no parameters");
  if (options_.bucket_bytes <= 0 || options_.first_bucket_bytes <= 0) {
    throw CommError("gradient reducer: bucket sizes must be positive");
  }
  const auto device = params_.front().device();
  const auto dtype = params_.front().scalar_type();
  for (const auto& p : params_) {
    if (!p.requires_grad() || !p.is_leaf() || p.device() != device || p.scalar_type() != dtype) {
      throw CommError(
          "gradient reducer: parameters must be leaves requiring grad, of one "
          "device and dtype");
    }
  }
  std::vector<size_t> order(params_.size());
  // Backward produces gradients roughly in reverse registration order.
  for (size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;
  BuildBuckets(order);
  ready_.assign(params_.size(), 0);

  grad_accumulators_.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    // The accumulator node is owned weakly by the tensor; holding it keeps our hook
    // attached across iterations (the engine would otherwise recreate a bare one).
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          OnGradReady(i);
          return outputs;
        }));
    grad_accumulators_.push_back(std::move(acc));
  }
}

GradientReducer::~GradientReducer() {
  // Outstanding collectives write into bucket storage: let them land first.
  for (auto& b : buckets_) {
    if (b->work) b->work->Wait();
  }
}

void GradientReducer::BuildBuckets(const std::vector<size_t>& order) {
  const int64_t elem = params_.front().element_size();
  layouts_.clear();
  BucketLayout current;
  int64_t cap = options_.first_bucket_bytes;
  for (size_t idx : order) {
    const int64_t n = params_[idx].numel();
    if (!current.params.empty() && (current.numel + n) * elem > cap) {
      layouts_.push_back(std::move(current));
      current = BucketLayout{};
      cap = options_.bucket_bytes;
    }
    current.params.push_back(idx);
    current.numel += n;
  }
  if (!current.params.empty()) layouts_.push_back(std::move(current));

  buckets_.clear();
  locator_.assign(params_.size(), {0, 0});
  const auto opts = params_.front().options().requires_grad(false);
  at::NoGradGuard no_grad;
  // One buffer holds every bucket: allocated once through the communicator (which may
  // register it with NCCL, a collective and costly call) and reused when the buckets are
  // rebuilt from the observed order. Room for every parameter plus one alignment gap per
  // bucket, of which there are at most as many as parameters.
  const int64_t align = std::max<int64_t>(1, kBucketAlignBytes / elem);
  if (!flat_.defined()) {
    int64_t total = 0;
    for (const auto& p : params_) total += p.numel();
    flat_ =
        comm_.AllocateCollectiveBuffer(total + align * static_cast<int64_t>(params_.size()), opts);
  }
  int64_t base = 0;
  for (size_t b = 0; b < layouts_.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    base = (base + align - 1) / align * align;
    bucket->storage = flat_.narrow(0, base, layouts_[b].numel);
    base += layouts_[b].numel;
    bucket->wire = options_.comm_dtype == bucket->storage.scalar_type()
                       ? bucket->storage
                       : at::zeros({layouts_[b].numel}, opts.dtype(options_.comm_dtype));
    int64_t offset = 0;
    for (size_t idx : layouts_[b].params) {
      auto& p = params_[idx];
      // Same strides as the parameter (channels_last stays channels_last), so the
      // optimizer and AccumulateGrad see the layout they expect.
      p.mutable_grad() = bucket->storage.as_strided(p.sizes(), p.strides(),
                                                    bucket->storage.storage_offset() + offset);
      locator_[idx] = {b, offset};
      offset += p.numel();
    }
    buckets_.push_back(std::move(bucket));
  }
}

void GradientReducer::PrepareForBackward() {
  ZeroGradients();
  ArmForBackward();
}

void GradientReducer::ZeroGradients() {
  if (rebuild_pending_) RebuildFromObservedOrder();
  for (auto& b : buckets_) b->storage.zero_();
}

void GradientReducer::ArmForBackward() {
  for (auto& b : buckets_) {
    b->pending = 0;
    b->launched = false;
    b->work.reset();
  }
  for (size_t b = 0; b < layouts_.size(); ++b) {
    buckets_[b]->pending = static_cast<int>(layouts_[b].params.size());
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  next_to_launch_ = 0;
  hooks_fired_ = 0;
  stats_ = ReducerStepStats{};
  stats_.buckets = static_cast<int>(buckets_.size());
  in_backward_ = true;
}

void GradientReducer::OnGradReady(size_t param_index) {
  if (!in_backward_ || ready_[param_index]) return;
  ready_[param_index] = 1;
  ++hooks_fired_;
  if (record_order_) observed_order_.push_back(param_index);
  const auto start = std::chrono::steady_clock::now();
  auto& bucket = *buckets_[locator_[param_index].first];
  if (--bucket.pending == 0) LaunchReadyBuckets();
  comm_.Progress();
  stats_.hook_comm_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void GradientReducer::LaunchReadyBuckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_]->pending == 0) {
    Launch(next_to_launch_);
    ++stats_.buckets_launched_during_backward;
    ++next_to_launch_;
  }
}

void GradientReducer::Launch(size_t bucket_index) {
  auto& b = *buckets_[bucket_index];
  if (stats_.hooks_before_first_launch < 0) {
    stats_.hooks_before_first_launch = hooks_fired_;
    if (options_.on_first_launch) options_.on_first_launch();
  }
  if (!b.wire.is_same(b.storage)) b.wire.copy_(b.storage);
  b.work = comm_.AllReduce(b.wire, ReduceOp::kAvg);
  b.launched = true;
  stats_.bytes += b.wire.nbytes();
}

void GradientReducer::FinishBackward() {
  LaunchRemaining();
  WaitBuckets(0, buckets_.size());
  EndBackward();
}

void GradientReducer::LaunchRemaining() {
  if (!in_backward_) throw CommError("gradient reducer: FinishBackward without PrepareForBackward");
  stats_.hooks_total = hooks_fired_;
  stats_.finish_wait_seconds = 0.0;
  // Buckets still short of gradients (unused parameters) go out now, in bucket order.
  while (next_to_launch_ < buckets_.size()) Launch(next_to_launch_++);
}

void GradientReducer::WaitBuckets(size_t begin, size_t end) {
  if (!in_backward_ || begin > end || end > buckets_.size()) {
    throw CommError("gradient reducer: WaitBuckets out of order or range");
  }
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = begin; i < end; ++i) {
    Bucket& b = *buckets_[i];
    if (!b.work) throw CommError("gradient reducer: WaitBuckets before LaunchRemaining");
    b.work->Wait();
    if (!b.wire.is_same(b.storage)) b.storage.copy_(b.wire);
  }
  stats_.finish_wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void GradientReducer::EndBackward() {
  in_backward_ = false;
  if (record_order_) {
    record_order_ = false;
    rebuild_pending_ = options_.rebuild_from_observed_order;
  }
}

void GradientReducer::RebuildFromObservedOrder() {
  rebuild_pending_ = false;
  // Parameters that produced no gradient go last, in reverse registration order.
  std::vector<char> seen(params_.size(), 0);
  std::vector<int64_t> order;
  order.reserve(params_.size());
  for (size_t i : observed_order_) {
    seen[i] = 1;
    order.push_back(static_cast<int64_t>(i));
  }
  for (size_t i = params_.size(); i-- > 0;) {
    if (!seen[i]) order.push_back(static_cast<int64_t>(i));
  }
  // Ranks may observe different orders (GPU streams); rank 0's is the one all use.
  at::Tensor t = at::tensor(order, at::kLong);
  if (comm_.backend() == "nccl") t = t.to(params_.front().device());
  comm_.Broadcast(t, 0)->Wait();
  t = t.cpu();
  std::vector<size_t> agreed(params_.size());
  for (size_t i = 0; i < agreed.size(); ++i) agreed[i] = static_cast<size_t>(t[i].item<int64_t>());
  BuildBuckets(agreed);
  observed_order_.clear();
}

}  // namespace ringpilot::comm
