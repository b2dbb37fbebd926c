#include "trainer/step/training_state.h"

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "base/run_variables.h"
#include "base/time.h"

namespace ringpilot::trainer::step {

TrainingState BuildTrainingState(const TrainingStateOptions& options,
                                 const startup::RankPlace& place, const startup::RankDevice& device,
                                 comm::Communicator* batch_norm_comm) {
  TrainingState s;
  // The same seed everywhere, then rank 0's weights are broadcast anyway.
  torch::manual_seed(options.seed);
  s.model = models::MakeModel(options.model, batch_norm_comm);
  s.model->to(device.device);
  // channels_last on the CPU too: oneDNN skips reorders (bench/results/*-cpu-ddp.md).
  s.channels_last = options.channels_last && s.model->input_kind() == models::InputKind::kImages;
  if (s.channels_last) {
    for (auto& p : s.model->parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  s.model->train();
  s.params = s.model->parameters();
  for (auto& p : s.model->named_parameters()) {
    s.named.push_back({"model/" + p.key(), p.value()});
    s.broadcast.push_back(p.value());
  }
  for (auto& b : s.model->named_buffers()) {
    s.named.push_back({"model/" + b.key(), b.value()});
    s.broadcast.push_back(b.value());
  }
  s.optimizer = std::make_unique<FusedOptimizer>(s.params, options.optimizer);
  const std::vector<std::string> names = s.optimizer->StateNames();
  const std::vector<at::Tensor> tensors = s.optimizer->StateTensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    s.named.push_back({"optimizer/" + names[i], tensors[i]});
    s.broadcast.push_back(tensors[i]);
  }
  s.rng = std::make_unique<checkpoint::RankRngState>(options.seed, place.rank, place.world,
                                                     device.cuda);
  for (checkpoint::NamedTensor& entry : s.rng->Entries()) s.named.push_back(std::move(entry));
  s.data_position = at::full({2}, -1, at::kLong);
  s.named.push_back({"data/position", s.data_position, /*optional=*/true});
  return s;
}

int64_t ResumeFromCheckpoint(uint64_t seed, int64_t steps, const startup::RankPlace& place,
                             const startup::RankCommunicators& comms,
                             checkpoint::CheckpointStore& store, TrainingState& state,
                             telemetry::RankLog& log) {
  // Rank 0's word: the step to resume at, and whether the checkpoint's per-rank random
  // streams were loaded (not when it was written by another number of ranks).
  at::Tensor resume = at::zeros({2}, at::kLong);
  std::optional<checkpoint::CheckpointInfo> found;
  bool cuda_rng_loaded = true;  // rank 0: the checkpoint had CUDA generator states
  if (place.rank == 0) {
    std::vector<std::string> warnings;
    found = store.FindNewestValid(&warnings);
    for (const std::string& w : warnings) log.Warn(w);
    // What earlier attempts left: unfinished saves, and corrupt checkpoints set aside (the
    // one just set aside included), which would otherwise fill the disk run after run.
    const char* launched = std::getenv(base::kLaunchTimeVar);
    for (const std::string& line : store.Tidy(launched ? std::atof(launched) : base::UnixNow())) {
      log.Info("checkpoints: " + line);
    }
    if (found) {
      if (found->step > steps) {
        throw checkpoint::CheckpointMismatchError(found->path + ": checkpoint is at step " +
                                                  std::to_string(found->step) +
                                                  ", beyond train.steps " + std::to_string(steps));
      }
      const bool same_world = found->world_size == place.world;
      std::vector<checkpoint::NamedTensor> wanted;
      for (const checkpoint::NamedTensor& nt : state.named) {
        if (same_world || !checkpoint::RankRngState::IsEntry(nt.name)) wanted.push_back(nt);
      }
      for (const std::string& name : store.Load(*found, wanted)) {
        cuda_rng_loaded = cuda_rng_loaded && name != checkpoint::RankRngState::kCudaEntry;
      }
      if (!same_world) {
        log.Warn(found->path + " was written by " + std::to_string(found->world_size) +
                 " ranks, this run has " + std::to_string(place.world) +
                 ": the epoch goes on from the recorded data position, re-sharded over the "
                 "ranks; per-rank random streams restart from (train.seed, rank, step)");
      }
      resume[0] = found->step;
      resume[1] = same_world ? 1 : 0;
    }
  }
  comms.host->Broadcast(resume, 0)->Wait();
  const int64_t start_step = resume[0].item<int64_t>();
  comm::BroadcastCoalesced(*comms.device, state.broadcast, 0);
  if (start_step > 0) {
    comms.host->Broadcast(state.data_position, 0)->Wait();
    if (resume[1].item<int64_t>() == 1) {
      state.rng->Restore(*comms.host, cuda_rng_loaded);
    } else {
      state.rng->Reseed(seed, start_step);
    }
    state.optimizer->set_steps_done(start_step);
    if (place.rank == 0) {
      log.Info("resumed from " + found->path + " at step " + std::to_string(start_step));
    }
  }
  return start_step;
}

}  // namespace ringpilot::trainer::step
