#include "trainer/trainer.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "comm/gradient_reducer.h"
#include "comm/mpi_communicator.h"
#include "comm/status.h"
#include "trainer/backward_sm_carveout.h"
#include "trainer/bootstrap.h"
#include "trainer/checkpoint.h"
#include "base/files.h"
#include "trainer/gradient_update.h"
#include "trainer/graphed_step.h"
#include "trainer/host_memory.h"
#include "trainer/kernel_profile.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/preemption.h"
#include "trainer/rank_log.h"
#include "trainer/rank_telemetry.h"
#include "trainer/rng_state.h"
#include "trainer/run_util.h"
#include "trainer/sha256.h"
#include "trainer/step_clock.h"
#include "trainer/step_phases.h"
#include "trainer/step_stats.h"
#include "trainer/synthetic_data.h"
#include "trainer/training_metrics.h"
#include "trainer/versions.h"

#ifdef RINGPILOT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include "comm/nccl_communicator.h"
#endif

namespace ringpilot::trainer {

using launcher::JobConfig;

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

struct Trainer::State {
  JobConfig cfg;
  TrainerOptions opts;
  int rank = 0, world = 1, local_rank = 0, local_size = 1;
  std::string node;
  bool cuda = false;
  at::Device device = at::kCPU;
  std::unique_ptr<RankLog> log;
  std::unique_ptr<comm::MpiCommunicator> host_comm;  // control plane, CPU tensors
  std::unique_ptr<comm::Communicator> device_comm;   // gradients
  std::unique_ptr<comm::MpiCommunicator> norm_comm;  // SyncBatchNorm on CPU
  std::shared_ptr<Model> model;
  std::vector<at::Tensor> params;
  std::vector<NamedTensor> named_state;  // everything a checkpoint holds
  std::unique_ptr<comm::GradientReducer> reducer;
  std::unique_ptr<FusedOptimizer> optimizer;
  std::unique_ptr<TrainingMetrics> metrics;
  std::unique_ptr<RankRngState> rng;  // per-rank generator states, in checkpoints
  int64_t start_step = 0;
};

Trainer::Trainer(JobConfig config, TrainerOptions options) : s_(std::make_unique<State>()) {
  s_->cfg = std::move(config);
  s_->opts = std::move(options);
}

Trainer::~Trainer() = default;

int Trainer::Run() {
  State& s = *s_;
  const JobConfig& cfg = s.cfg;
  PreemptionWatch preemption;  // SIGUSR1: checkpoint at the next step boundary and stop
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &s.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &s.world));
  MPI_Comm local;
  MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &s.local_rank));
  MPI_CHECK(MPI_Comm_size(local, &s.local_size));
  MPI_Comm_free(&local);
  s.node = HostName();
  const std::string logs = s.opts.run_dir + "/logs";
  MakeDirs(logs);
  s.log = std::make_unique<RankLog>(logs + "/rank-" + std::to_string(s.rank) + ".log", s.rank,
                                    s.rank == 0);
  RankLog& log = *s.log;
  log.Info("rank " + std::to_string(s.rank) + "/" + std::to_string(s.world) + " on " + s.node +
           " (local rank " + std::to_string(s.local_rank) + "/" + std::to_string(s.local_size) +
           ", pid " + std::to_string(::getpid()) + ", attempt " + std::to_string(s.opts.restart) +
           ")");
  if (s.world != cfg.world.size()) {
    throw std::runtime_error("world size is " + std::to_string(s.world) + " but the job asks for " +
                             std::to_string(cfg.world.size()) + " (world.nodes x procs_per_node)");
  }

  // Topology, cluster view, plan: NCCL NIC variables and CPU binding (trainer/bootstrap.h).
  const RankPlacement placement = PlaceRank(cfg, s.rank, s.world, s.local_rank, s.local_size, log);

  // Device.
  bool have_cuda = false;
#ifdef RINGPILOT_WITH_CUDA
  have_cuda = torch::cuda::is_available();
#endif
  if (cfg.world.device == launcher::Device::kCuda && !have_cuda) {
    throw std::runtime_error("world.device is cuda but no CUDA device is visible on " + s.node);
  }
  s.cuda = have_cuda && cfg.world.device != launcher::Device::kCpu;
  if (!s.cuda && cfg.train.cuda_graphs) {
    throw std::runtime_error("train.cuda_graphs needs a CUDA device; none is used on " + s.node);
  }
  int threads = cfg.train.threads_per_rank;
  if (threads == 0) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, cores / std::max(1, s.local_size));
  }
  at::set_num_threads(threads);
  const HostMemoryPolicy host_memory = ConfigureHostMemory(cfg.train.retain_host_memory);
  if (s.rank == 0) log.Info(host_memory.detail);

  s.host_comm = std::make_unique<comm::MpiCommunicator>(MPI_COMM_WORLD);
#ifdef RINGPILOT_WITH_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> train_stream;
#endif
#ifdef RINGPILOT_WITH_CUDA
  if (s.cuda) {
    const int devices = static_cast<int>(torch::cuda::device_count());
    const int dev = s.local_rank % devices;
    if (s.local_size > devices) {
      log.Warn(std::to_string(s.local_size) + " ranks on " + s.node + " share " +
               std::to_string(devices) + " GPU(s)");
    }
    c10::cuda::set_device(dev);
    s.device = at::Device(at::kCUDA, dev);
    // All training work goes on a non-default stream, from before the first gradient
    // accumulator exists: autograd runs each AccumulateGrad on the stream it was created
    // on, and the legacy default stream cannot join a CUDA graph capture.
    train_stream.emplace(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, dev));
    PrepareNcclDebugLog(s.opts.run_dir, s.rank);  // transports per peer, in a file
    comm::NcclOptions nopts;
    nopts.timeout_s = cfg.comm.timeout_s;
    nopts.high_priority_stream = cfg.comm.high_priority_stream;
    nopts.cta_policy = static_cast<int>(cfg.comm.nccl_cta_policy);  // NCCL's numbering
    nopts.buffer_registration =
        static_cast<comm::NcclBufferRegistration>(cfg.comm.nccl_buffer_registration);
    s.device_comm = std::make_unique<comm::NcclCommunicator>(MPI_COMM_WORLD, dev, nopts);
    at::globalContext().setBenchmarkCuDNN(!cfg.train.deterministic);
    at::globalContext().setDeterministicCuDNN(cfg.train.deterministic);
    at::globalContext().setAllowTF32CuBLAS(cfg.train.tf32);
    at::globalContext().setAllowTF32CuDNN(cfg.train.tf32);
  }
#endif
  if (!s.device_comm) s.device_comm = std::make_unique<comm::MpiCommunicator>(MPI_COMM_WORLD);

  // Metrics first, so a port clash fails fast, before the model is built.
  RankTelemetry telemetry(cfg, s.opts.run_dir, {cfg.name, s.node, s.rank, s.local_rank, "", ""},
                          s.cuda ? s.device.index() : -1);  // GPU labels, sampler, trace
  s.metrics = std::make_unique<TrainingMetrics>(telemetry.identity());
  s.metrics->SetBuildInfo(BuildInfoLabels(QueryLibraryVersions()));
  s.metrics->SetRestarts(s.opts.restart);
  s.metrics->SetExpectedBusBandwidth(placement.expected_bus_bytes_per_second);
  if (cfg.metrics.enabled) {
    s.metrics->Serve(cfg.metrics.bind,
                     cfg.metrics.port_base == 0 ? 0 : cfg.metrics.port_base + s.rank);
  }
  s.device_comm->set_observer(s.metrics.get());
  StepStats stats(s.rank, s.world, s.node, s.local_rank);
  stats.set_expected_busbw(placement.expected_bus_bytes_per_second);
  const double clock_offset = EstimateClockOffset();
  s.metrics->set_stats(&stats);
  // Phase markers; on CUDA a GPU timeline that also times collectives in graph replays.
  StepPhases phases(s.cuda ? s.device.index() : -1, s.device_comm.get());
  s.metrics->WatchSequences(s.device_comm.get());
  telemetry.Start(*s.metrics, clock_offset, log);

  // Model: the same seed everywhere, then rank 0's weights broadcast anyway.
  torch::manual_seed(cfg.train.seed);
  ModelOptions mo;
  mo.name = cfg.model.name;
  mo.num_classes = cfg.model.num_classes;
  mo.seq_len = cfg.model.seq_len;
  mo.dropout = cfg.model.dropout;
  mo.sync_batchnorm = cfg.model.sync_batchnorm;
  mo.fused_batchnorm = cfg.model.fused_batchnorm;
  mo.mixed_linear = cfg.model.mixed_linear;
  mo.mixed_linear_accumulate = cfg.model.mixed_linear_accumulate;
  mo.fused_residual_norm = cfg.model.fused_residual_norm;
  mo.maxpool_kernel = cfg.model.maxpool_kernel;
  comm::Communicator* norm = s.device_comm.get();
  if (!s.cuda && cfg.model.sync_batchnorm) {
    s.norm_comm = std::make_unique<comm::MpiCommunicator>(MPI_COMM_WORLD);
    norm = s.norm_comm.get();
  }
  s.model = MakeModel(mo, norm);
  s.model->to(s.device);
  // channels_last on the CPU too: oneDNN skips reorders (bench/results/*-cpu-ddp.md).
  const bool channels_last = cfg.train.channels_last && s.model->input_kind() == InputKind::kImages;
  if (channels_last) {
    for (auto& p : s.model->parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  s.model->train();
  s.params = s.model->parameters();
  std::vector<at::Tensor> state_tensors;
  for (auto& p : s.model->named_parameters()) {
    s.named_state.push_back({"model/" + p.key(), p.value()});
    state_tensors.push_back(p.value());
  }
  for (auto& b : s.model->named_buffers()) {
    s.named_state.push_back({"model/" + b.key(), b.value()});
    state_tensors.push_back(b.value());
  }

  OptimizerOptions oo;
  oo.kind = cfg.train.optimizer == launcher::Optimizer::kSgd ? OptimizerOptions::Kind::kSgd
                                                             : OptimizerOptions::Kind::kAdamW;
  oo.lr = cfg.train.lr;
  oo.momentum = cfg.train.momentum;
  oo.weight_decay = cfg.train.weight_decay;
  oo.beta1 = cfg.train.beta1;
  oo.beta2 = cfg.train.beta2;
  oo.eps = cfg.train.eps;
  s.optimizer = std::make_unique<FusedOptimizer>(s.params, oo);
  {
    auto names = s.optimizer->StateNames();
    auto tensors = s.optimizer->StateTensors();
    for (size_t i = 0; i < tensors.size(); ++i) {
      s.named_state.push_back({"optimizer/" + names[i], tensors[i]});
      state_tensors.push_back(tensors[i]);
    }
  }

  // Per-rank RNG state (dropout), gathered to rank 0 for checkpoints.
  s.rng = std::make_unique<RankRngState>(cfg.train.seed, s.rank, s.world, s.cuda);
  for (NamedTensor& entry : s.rng->Entries()) s.named_state.push_back(std::move(entry));

  // Resume: rank 0 picks the newest valid checkpoint, loads it, and broadcasts.
  CheckpointStore store(s.opts.run_dir + "/checkpoints", cfg.checkpoint.keep);
  at::Tensor resume = at::zeros({1}, at::kLong);
  std::optional<CheckpointInfo> found;
  bool cuda_rng_loaded = true;  // rank 0: the checkpoint had CUDA generator states
  if (s.rank == 0) {
    std::vector<std::string> warnings;
    found = store.FindNewestValid(&warnings);
    for (auto& w : warnings) log.Warn(w);
    if (found) {
      if (found->step > cfg.train.steps) {
        throw std::runtime_error(found->path + ": checkpoint is at step " +
                                 std::to_string(found->step) + ", beyond train.steps " +
                                 std::to_string(cfg.train.steps));
      }
      for (const std::string& name : store.Load(*found, s.named_state)) {
        cuda_rng_loaded = cuda_rng_loaded && name != RankRngState::kCudaEntry;
      }
      resume[0] = found->step;
    }
  }
  s.host_comm->Broadcast(resume, 0)->Wait();
  s.start_step = resume[0].item<int64_t>();
  comm::BroadcastCoalesced(*s.device_comm, state_tensors, 0);
  if (s.start_step > 0) {
    s.rng->Restore(*s.host_comm, cuda_rng_loaded);
    s.optimizer->set_steps_done(s.start_step);
    if (s.rank == 0)
      log.Info("resumed from " + found->path + " at step " + std::to_string(s.start_step));
  }

  comm::ReducerOptions ro;
  ro.bucket_bytes = static_cast<int64_t>(cfg.comm.bucket_mb * (1 << 20));
  ro.first_bucket_bytes = static_cast<int64_t>(cfg.comm.first_bucket_mb * (1 << 20));
  ro.comm_dtype = cfg.comm.grad_dtype == launcher::GradDtype::kBf16 ? at::kBFloat16 : at::kFloat;
  ro.on_first_launch = [&phases] { phases.FirstGradientsReady(); };
  s.reducer = std::make_unique<comm::GradientReducer>(s.params, *s.device_comm, ro);
  GradientUpdateOptions update_options;
  update_options.overlap = cfg.comm.overlap_optimizer;

  const int batch = cfg.data.batch_per_rank;
  if (s.rank == 0) {
    int64_t nparams = 0;
    for (auto& p : s.params) nparams += p.numel();
    log.Info("job " + cfg.name + ": " + cfg.model.name + " (" + std::to_string(nparams) +
             " parameters), " + std::to_string(s.world) + " rank(s) x batch " +
             std::to_string(batch) + " on " + (s.cuda ? "cuda" : "cpu") + ", " +
             std::to_string(threads) + " thread(s)/rank, " +
             std::to_string(s.reducer->buckets().size()) + " gradient bucket(s), comm " +
             s.device_comm->backend() +
             (cfg.metrics.enabled ? ", metrics on port " + std::to_string(s.metrics->port()) : ""));
  }

  // Two pinned host batches: the next step's batch is generated on the CPU while the
  // GPU runs this one.
  const bool images = s.model->input_kind() == InputKind::kImages;
  ImageSpec ispec = s.model->image_spec();
  ispec.workers = threads;
  if (images) PrepareImages(cfg.train.seed, ispec);
  TokenSpec tspec = s.model->token_spec();
  const auto pin = at::TensorOptions().pinned_memory(s.cuda);
  Batch host[2];
  for (auto& h : host) {
    h.input = images ? at::empty({batch, 3, ispec.height, ispec.width}, pin.dtype(at::kByte))
                     : at::empty({batch, tspec.seq_len}, pin.dtype(at::kLong));
    h.target = images ? at::empty({batch}, pin.dtype(at::kLong))
                      : at::empty({batch, tspec.seq_len}, pin.dtype(at::kLong));
  }
  std::vector<double> data_times;  // host time generating each batch
  auto fill = [&](int64_t step, Batch& b) {
    NvtxRange range("data");
    const auto t0 = Clock::now();
    const int64_t first = FirstSampleIndex(step, s.rank, s.world, batch);
    if (images) {
      FillImages(cfg.train.seed, first, ispec, b);
    } else {
      FillTokens(cfg.train.seed, first, tspec, b);
    }
    data_times.push_back(Seconds(t0, Clock::now()));
    s.metrics->OnPhase(Phase::kData, data_times.back());
  };
  // Device-side batch with stable addresses: CUDA graphs replay reads from here.
  Batch dev{at::empty_like(host[0].input, at::TensorOptions().device(s.device)),
            at::empty_like(host[0].target, at::TensorOptions().device(s.device))};
  CopyFence copied(s.cuda);  // host buffer i may be refilled once its copy is done

  const bool bf16 = cfg.train.precision == launcher::Precision::kBf16;
  if (bf16) at::autocast::set_autocast_dtype(s.device.type(), at::kBFloat16);
  // The autocast weight cache would hold tensors from the capture's memory pool.
  if (cfg.train.cuda_graphs) at::autocast::set_autocast_cache_enabled(false);
  at::Tensor loss_out;  // the step's loss, on the device
  const BackwardSmCarveout carveout(cfg.comm.backward_sm_carveout, s.cuda);
  // One training step on `dev`; host-sync free so it can be captured.
  const double straggle_s =
      s.rank == cfg.fault.straggler_rank ? cfg.fault.straggler_ms / 1000.0 : 0.0;
  auto train_step = [&]() {
    phases.Begin();
    s.reducer->PrepareForBackward();
    at::Tensor loss;
    {
      NvtxRange range("forward");
      at::Tensor input = dev.input;
      if (images) {
        input = NormalizeImages(input, at::kFloat);
        if (channels_last) input = input.contiguous(at::MemoryFormat::ChannelsLast);
      }
      if (bf16) at::autocast::set_autocast_enabled(s.device.type(), true);
      loss = s.model->Loss(input, dev.target);
      if (bf16) {
        at::autocast::set_autocast_enabled(s.device.type(), false);
        at::autocast::clear_cache();
      }
      phases.ForwardDone();
    }
    {
      NvtxRange range("backward");
      // fault.straggler_*: this rank's compute takes longer. On GPUs before backward, so
      // every bucket's all-reduce waits for it (the buckets are issued during backward);
      // on CPU after it, where MPI progresses only inside our calls and the other ranks
      // then wait in FinishBackward (and ranks sharing cores compute alike).
      if (s.cuda) phases.SlowDown(straggle_s);
      carveout.Arm(loss);
      loss.backward();
      carveout.Disarm();
      if (!s.cuda) phases.SlowDown(straggle_s);
      phases.BackwardDone();
    }
    {
      NvtxRange range("reduce+update");
      ReduceAndUpdate(*s.reducer, *s.optimizer, phases, update_options);
    }
    if (!loss_out.defined()) loss_out = at::empty_like(loss);  // before any capture
    loss_out.copy_(loss.detach());
  };

  // Phases of the oldest finished step, and straggler attribution: every rank shares when
  // its gradients were ready (on rank 0's clock) and its compute time. On CUDA that is
  // the previous step, from GPU timestamps; every rank calls this in the same pattern.
  auto report_phases = [&](bool device_idle) {
    std::optional<StepPhaseTimes> t = phases.Collect(device_idle);
    if (!t) return;
    if (t->valid) {
      s.metrics->OnPhase(Phase::kForward, t->forward, t->start_unix);
      s.metrics->OnPhase(Phase::kBackward, t->backward, t->start_unix + t->forward);
      s.metrics->OnPhase(Phase::kCommExposed, t->comm_exposed, t->ready_unix);
      s.metrics->OnPhase(Phase::kOptimizer, t->optimizer, t->ready_unix + t->comm_exposed);
      if (t->replay) s.device_comm->OnReplayTimed(t->marks);
    }
    if (s.world == 1) return;
    const double nan = std::nan("");
    at::Tensor mine = at::tensor({t->valid ? t->ready_unix + clock_offset : nan,
                                  t->valid ? t->ready_unix - t->start_unix : nan},
                                 at::kDouble);
    at::Tensor all = at::empty({s.world, 2}, at::kDouble);
    s.host_comm->AllGather(mine, all)->Wait();
    std::vector<ArrivalSample> samples(s.world);
    const double* v = all.data_ptr<double>();
    for (int r = 0; r < s.world; ++r) {
      if (std::isnan(v[2 * r])) return;
      samples[r] = {v[2 * r], v[2 * r + 1]};
    }
    s.metrics->OnStraggler(AttributeStraggler(samples, s.rank));
  };

  // Eager steps before capture: the first rebuilds gradient buckets from the observed
  // order, the next ones let cuDNN autotune and the allocator settle.
  constexpr int64_t kGraphWarmupSteps = 3;
  GraphedStep graph;

  StepClock clock(s.cuda, cfg.train.host_lead_steps);
  std::vector<double> step_times;
  double loss_value = std::nan("");
  auto last_report = Clock::now();
  auto timed_start = Clock::now();
  int64_t timed_steps = 0;
  const int64_t total = cfg.train.steps;
  // The clock reports a step `host_lead_steps` steps late: the window shifts with it.
  const int64_t untimed =
      std::max<int64_t>(cfg.train.cuda_graphs ? kGraphWarmupSteps + 1 : 1, cfg.train.warmup_steps) +
      (s.cuda ? cfg.train.host_lead_steps - 1 : 0);
  const int64_t warmup_end = std::min(total - 1, s.start_step + untimed - 1);
  double first_step_s = 0.0;
  double checkpoint_seconds = 0.0;  // inside the timed window
  double launch_unix = UnixNow();
  if (const char* t = std::getenv("RINGPILOT_LAUNCH_UNIX")) launch_unix = std::atof(t);
  KernelProfile profile(s.rank, s.cuda);  // RINGPILOT_KINETO_TRACE (developers)
  if (s.start_step < total) fill(s.start_step, host[s.start_step % 2]);
  for (int64_t step = s.start_step; step < total; ++step) {
    NvtxRange step_range("step");
    profile.BeforeStep(step - s.start_step);
    clock.Begin();
    Batch& cur = host[step % 2];
    dev.input.copy_(cur.input, /*non_blocking=*/true);
    dev.target.copy_(cur.target, /*non_blocking=*/true);
    copied.Record(step % 2);
    if (s.rank == cfg.fault.crash_rank && step + 1 == cfg.fault.crash_step && s.opts.restart == 0) {
      log.Fatal("fault injection: crashing at step " + std::to_string(step + 1) +
                " (fault.crash_rank=" + std::to_string(cfg.fault.crash_rank) + ")");
      std::_Exit(17);
    }
    if (cfg.train.cuda_graphs && step - s.start_step >= kGraphWarmupSteps) {
      if (!graph.captured()) {
        s.device_comm->Barrier();  // drain timing events before capture
        graph.Capture(train_step);
        if (s.rank == 0) log.Info("captured the training step in a CUDA graph");
      }
      graph.Replay();
      phases.Launched(/*replay=*/true);
      s.device_comm->OnReplayLaunched();
    } else {
      train_step();
      phases.Launched(/*replay=*/false);
    }
    // Generate the next batch while the GPU works on this one. Its buffer was last
    // copied from two steps ago; wait for that copy before overwriting.
    if (step + 1 < total) {
      copied.Wait((step + 1) % 2);
      fill(step + 1, host[(step + 1) % 2]);
    }
    const double step_s = clock.End();
    if (auto path = profile.AfterStep(step - s.start_step); !path.empty()) {
      log.Info("kernel profile " + path);
    }
    report_phases(/*device_idle=*/false);
    s.device_comm->Progress();
    if (step == s.start_step) {
      // Time to the end of the first step, from when the front end launched this
      // attempt (one host synchronisation, first step only).
      SynchronizeDevice(s.cuda);
      first_step_s = UnixNow() - launch_unix;
    }
    // Warm-up steps (the first of an attempt; with CUDA graphs, up to the first
    // replay) are left out of rates and percentiles, unless nothing else is left.
    if (step <= warmup_end) {
      if (step == warmup_end) {
        timed_start = Clock::now();
        stats.StartTimedWindow();
      }
      if (step + 1 == total && timed_steps == 0) {
        step_times.push_back(step_s);
        timed_steps = 1;
        timed_start = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(step_s));
      }
    } else {
      step_times.push_back(step_s);
      ++timed_steps;
    }
    s.metrics->OnStep(step_s, batch);
    telemetry.AfterStep(step - s.start_step + 1);
    stats.AddStep(step_s);

    const bool last = step + 1 == total;
    const bool preempt = !last && preemption.AgreeToStop(*s.host_comm);
    const auto now = Clock::now();
    if (s.rank == 0 && (last || Seconds(last_report, now) >= cfg.train.log_every_s)) {
      last_report = now;
      loss_value = loss_out.item<double>();
      s.metrics->SetLoss(loss_value);
      s.metrics->Refresh(stats);
      const double elapsed = Seconds(timed_start, now);
      const double rate =
          timed_steps > 0 && elapsed > 0 ? timed_steps * batch * s.world / elapsed : 0;
      const double per_step = timed_steps > 0 ? elapsed / timed_steps : step_s;
      char line[256];
      std::snprintf(line, sizeof(line),
                    "step %lld/%lld | loss %.4f | %.1f samples/s | %.3f s/step | eta %s",
                    static_cast<long long>(step + 1), static_cast<long long>(total), loss_value,
                    rate, per_step, FormatDuration(per_step * (total - step - 1)).c_str());
      log.Info(line);
    }

    const int64_t done = step + 1;
    if (last || preempt ||
        (cfg.checkpoint.every_steps > 0 && done % cfg.checkpoint.every_steps == 0)) {
      const auto c0 = Clock::now();
      s.rng->Gather(*s.host_comm);  // every rank's RNG state into rank 0's checkpoint
      if (s.rank == 0) {
        auto info = store.Save(done, s.world, cfg.name, s.named_state);
        s.metrics->OnCheckpoint(Seconds(c0, Clock::now()));
        log.Info("checkpoint " + info.path + " (" + FormatDuration(Seconds(c0, Clock::now())) +
                 ")");
      }
      s.host_comm->Barrier();
      if (step > warmup_end) checkpoint_seconds += Seconds(c0, Clock::now());
    }
    if (preempt) return preemption.Stop(log, done);
  }
  SynchronizeDevice(s.cuda);
  report_phases(/*device_idle=*/true);
  // Throughput is training time only: checkpoints are reported separately.
  const double wall = Seconds(timed_start, Clock::now()) - checkpoint_seconds;

  s.metrics->Refresh(stats);
  stats.WriteJson(s.opts.run_dir + "/logs/rank-" + std::to_string(s.rank) + ".stats.json",
                  timed_steps, Percentile(step_times, 0.5), Percentile(step_times, 0.99));

  // Summary: the world-average final loss and a fingerprint of the final weights.
  at::Tensor loss_sum = at::zeros({1}, at::kDouble);
  if (loss_out.defined()) loss_sum[0] = loss_out.item<double>();
  s.host_comm->AllReduce(loss_sum, comm::ReduceOp::kAvg)->Wait();
  if (s.rank == 0) {
    double norm_sq = 0, abs_sum = 0;
    Sha256 sha;
    for (auto& p : s.params) {
      at::Tensor c = p.detach().to(at::kCPU).contiguous();
      at::Tensor d = c.to(at::kDouble);
      norm_sq += d.square().sum().item<double>();
      abs_sum += d.abs().sum().item<double>();
      sha.Update(c.data_ptr(), c.nbytes());
    }
    nlohmann::json summary = {
        {"name", cfg.name},
        {"world_size", s.world},
        {"steps", total},
        // No step in this attempt (resumed at train.steps): nothing measured.
        {"final_loss",
         loss_out.defined() ? nlohmann::json(loss_sum[0].item<double>()) : nlohmann::json(nullptr)},
        {"samples_per_second", timed_steps > 0 && wall > 0
                                   ? nlohmann::json(timed_steps * batch * s.world / wall)
                                   : nlohmann::json(nullptr)},
        {"step_seconds_p50", Percentile(step_times, 0.5)},
        {"step_seconds_p99", Percentile(step_times, 0.99)},
        {"restarts", s.opts.restart},
        {"param_norm", std::sqrt(norm_sq)},
        {"param_abs_sum", abs_sum},
        {"param_sha256", sha.HexDigest()},
        {"resumed_from_step", s.start_step},
        {"device", s.cuda ? "cuda" : "cpu"},
        {"model", cfg.model.name},
        {"batch_per_rank", batch},
        {"first_step_s", first_step_s},
        {"checkpoint_seconds", checkpoint_seconds},
        {"data_seconds_p50", Percentile(data_times, 0.5)},
        {"peak_mem_gb", (PeakDeviceMemoryBytes(s.cuda) + s.device_comm->registered_bytes()) / 1e9},
    };
    WriteJsonAtomically(s.opts.run_dir + "/summary.json", summary);
    log.Info("done: " + std::to_string(total) + " steps, summary " + s.opts.run_dir +
             "/summary.json");
  }
  s.host_comm->Barrier();
  return 0;
}

}  // namespace ringpilot::trainer
