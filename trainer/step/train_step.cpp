#include "trainer/step/train_step.h"

#include <algorithm>

#include <ATen/autocast_mode.h>

#include "trainer/input/mlm_masking.h"
#include "trainer/step/autocast_region.h"
#include "trainer/telemetry/nvtx_range.h"

namespace ringpilot::trainer::step {

TrainStep::TrainStep(const TrainStepOptions& options, const startup::RankDevice& device,
                     TrainingState& state, comm::GradientReducer& reducer, StepPhases& phases,
                     const input::InputFeed& input, const std::optional<models::TokenSpec>& tokens)
    : state_(state),
      reducer_(reducer),
      phases_(phases),
      input_(input),
      tokens_(tokens),
      cuda_(device.cuda),
      device_type_(device.device.type()),
      autocast_(options.autocast),
      update_options_(options.update),
      carveout_(options.backward_sm_carveout, device.cuda),
      straggle_s_(options.straggle_s),
      micro_scale_(1.0 / std::max(1, options.grad_accum_steps)),
      optimizer_writes_copies_(options.optimizer_writes_copies) {
  if (options.max_grad_norm > 0) clipper_.emplace(state.params, options.max_grad_norm);
  if (autocast_) at::autocast::set_autocast_dtype(device_type_, *autocast_);
  // The autocast weight cache would hold tensors from the capture's memory pool.
  if (device.cuda_graphs) at::autocast::set_autocast_cache_enabled(false);
}

void TrainStep::Run() {
  phases_.Begin();
  reducer_.PrepareForBackward();
  const at::Tensor loss = ForwardBackward(1.0);
  {
    telemetry::NvtxRange range("reduce+update");
    ReduceAndUpdate(reducer_, *state_.optimizer, phases_, update_options_,
                    clipper_ ? &*clipper_ : nullptr);
  }
  if (!loss_.defined()) loss_ = at::empty_like(loss);  // before any capture
  loss_.copy_(loss);
}

void TrainStep::BeginAccumulation() {
  phases_.Begin();
  reducer_.ZeroGradients();
  if (!loss_.defined()) {
    loss_ = at::zeros({}, state_.params.front().options().dtype(at::kFloat).requires_grad(false));
  }
  loss_.zero_();
}

void TrainStep::RunMicroBatch() { loss_.add_(ForwardBackward(micro_scale_)); }

void TrainStep::RunLastMicroBatch() {
  reducer_.ArmForBackward();
  const at::Tensor loss = ForwardBackward(micro_scale_);
  {
    telemetry::NvtxRange range("reduce+update");
    ReduceAndUpdate(reducer_, *state_.optimizer, phases_, update_options_,
                    clipper_ ? &*clipper_ : nullptr);
  }
  loss_.add_(loss);
}

at::Tensor TrainStep::ForwardBackward(double scale) {
  at::Tensor loss;
  {
    telemetry::NvtxRange range("forward");
    const input::Batch& batch = input_.device_batch();
    at::Tensor in = batch.input;
    at::Tensor target = batch.target;
    if (input_.images()) {
      in = input::NormalizeImages(in, at::kFloat);
      if (state_.channels_last) in = in.contiguous(at::MemoryFormat::ChannelsLast);
    } else if (batch.keys.defined()) {
      // Real text: this step's masking, on the device (inside the graph when captured).
      input::MaskedTokens masked = input::MaskTokens(in, batch.keys, *tokens_);
      in = std::move(masked.input);
      target = std::move(masked.target);
    }
    {
      const AutocastRegion region(device_type_, autocast_);
      loss = state_.model->Loss(in, target);
    }
    // Mean losses: 1/k of each of k equal micro-batches adds up to the gradient of the mean
    // over their union (BERT: every row masks as many tokens). BatchNorm still normalises
    // each micro-batch by its own statistics, as any accumulation does.
    if (scale != 1.0) loss = loss * scale;
    // After this forward the model's weight copies (if it keeps any) are current, and the
    // optimizer step that follows is the first to write them.
    if (optimizer_writes_copies_ && !copies_handed_over_) {
      std::vector<at::Tensor> copies = state_.model->HandOverLowPrecisionCopies(state_.params);
      if (!copies.empty()) {
        state_.optimizer->SetLowPrecisionCopies(std::move(copies));
        copies_handed_over_ = true;
      }
    }
    phases_.ForwardDone();
  }
  {
    telemetry::NvtxRange range("backward");
    // fault.straggler_*: this rank's compute takes longer. On GPUs before backward, so
    // every bucket's all-reduce waits for it (the buckets are issued during backward);
    // on CPU after it, where MPI progresses only inside our calls and the other ranks
    // then wait in FinishBackward (and ranks sharing cores compute alike).
    if (cuda_) phases_.SlowDown(straggle_s_);
    carveout_.Arm(loss);
    loss.backward();
    carveout_.Disarm();
    if (!cuda_) phases_.SlowDown(straggle_s_);
    phases_.BackwardDone();
  }
  return loss.detach();
}

}  // namespace ringpilot::trainer::step
