#include "trainer/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "base/files.h"
#include "base/run_variables.h"
#include "config/device_plan.h"
#include "metrics/scrape_targets.h"

namespace ringpilot::trainer {
namespace {

constexpr double kBytesPerMiB = 1 << 20;

}  // namespace

models::ModelOptions ModelOptionsFor(const config::JobConfig& job,
                                     const std::optional<models::TokenSpec>& tokens) {
  const config::ModelConfig& model = job.model;
  models::ModelOptions o;
  o.name = model.name;
  o.num_classes = model.num_classes;
  o.seq_len = model.seq_len;
  o.vocab_size = tokens ? tokens->vocab : 0;
  o.dropout = model.dropout;
  o.sync_batchnorm = model.sync_batchnorm;
  o.fused_batchnorm = model.fused_batchnorm;
  o.fused_batchnorm_accumulate = model.fused_batchnorm_accumulate;
  o.maxpool_kernel = model.maxpool_kernel;
  o.stem_space_to_depth = model.stem_space_to_depth;
  o.shortcut_in_gemm = model.shortcut_in_gemm;
  o.mixed_linear = model.mixed_linear;
  o.mixed_linear_accumulate = model.mixed_linear_accumulate;
  o.fused_residual_norm = model.fused_residual_norm;
  o.label_smoothing = job.train.label_smoothing;
  return o;
}

step::OptimizerOptions OptimizerOptionsFor(const config::JobConfig& job, int64_t steps) {
  const config::TrainConfig& train = job.train;
  step::OptimizerOptions o;
  o.kind = train.optimizer;
  o.lr = config::PeakLearningRate(job);
  o.momentum = train.momentum;
  o.weight_decay = train.weight_decay;
  o.beta1 = train.beta1;
  o.beta2 = train.beta2;
  o.eps = train.eps;
  o.exempt_1d_from_decay = !train.decay_norm_and_bias;
  o.lr_on_device = !step::IsConstant(LrScheduleOptionsFor(job, steps));
  return o;
}

step::LrScheduleOptions LrScheduleOptionsFor(const config::JobConfig& job, int64_t steps) {
  const config::TrainConfig& train = job.train;
  step::LrScheduleOptions o;
  o.kind = train.lr_schedule;
  o.lr = config::PeakLearningRate(job);
  o.total_steps = steps;
  o.warmup_steps = WarmupSteps(train, steps);
  o.min_ratio = train.lr_min_ratio;
  o.step_every = train.lr_step_every;
  o.gamma = train.lr_gamma;
  o.power = train.lr_power;
  return o;
}

std::string LearningRateLine(const config::JobConfig& job) {
  char line[200];
  std::snprintf(line, sizeof(line),
                "learning rate %.6g: train.lr %.6g x global batch %lld / train.lr_base_batch %lld",
                config::PeakLearningRate(job), job.train.lr,
                static_cast<long long>(config::GlobalBatch(job)),
                static_cast<long long>(job.train.lr_base_batch));
  return line;
}

int64_t WarmupSteps(const config::TrainConfig& train, int64_t steps) {
  if (train.lr_warmup_epochs <= 0 || train.epochs <= 0) return train.lr_warmup_steps;
  // steps = epochs x batches per epoch / micro-batches, so this is lr_warmup_epochs x the
  // optimizer steps of one epoch.
  const auto warmup = static_cast<int64_t>(std::llround(
      static_cast<double>(steps) * train.lr_warmup_epochs / static_cast<double>(train.epochs)));
  return std::clamp<int64_t>(warmup, 1, std::max<int64_t>(1, steps - 1));
}

comm::ReducerOptions ReducerOptionsFor(const config::CommConfig& comm) {
  comm::ReducerOptions o;
  o.bucket_bytes = static_cast<int64_t>(comm.bucket_mb * kBytesPerMiB);
  o.first_bucket_bytes = static_cast<int64_t>(comm.first_bucket_mb * kBytesPerMiB);
  o.comm_dtype = GradWireDtypeFor(comm.grad_dtype);
  return o;
}

step::GradientUpdateOptions GradientUpdateOptionsFor(const config::CommConfig& comm) {
  step::GradientUpdateOptions o;
  o.overlap = comm.overlap_optimizer;
  return o;
}

c10::ScalarType GradWireDtypeFor(config::GradDtype dtype) {
  switch (dtype) {
    case config::GradDtype::kFp32:
      return c10::kFloat;
    case config::GradDtype::kBf16:
      return c10::kBFloat16;
  }
  return c10::kFloat;
}

std::optional<c10::ScalarType> AutocastDtypeFor(config::Precision precision) {
  switch (precision) {
    case config::Precision::kFp32:
      return std::nullopt;
    case config::Precision::kBf16:
      return c10::kBFloat16;
  }
  return std::nullopt;
}

startup::PlacementOptions PlacementOptionsFor(const config::JobConfig& job) {
  startup::PlacementOptions o;
  o.device = job.world.device;
  o.bind = BindPolicyFor(job.placement.bind);
  return o;
}

startup::DeviceOptions DeviceOptionsFor(const config::JobConfig& job, bool cuda_visible,
                                        const std::string& host) {
  startup::DeviceOptions o;
  o.plan = config::PlanDevice(job, cuda_visible, host);
  o.threads_per_rank = job.train.threads_per_rank;
  o.retain_host_memory = job.train.retain_host_memory;
  o.deterministic = job.train.deterministic;
  o.tf32 = job.train.tf32;
  return o;
}

startup::CommunicatorOptions CommunicatorOptionsFor(const config::JobConfig& job) {
  startup::CommunicatorOptions o;
  o.timeout_s = job.comm.timeout_s;
  o.sync_batchnorm = job.model.sync_batchnorm;
#ifdef RINGPILOT_WITH_CUDA
  o.nccl = NcclOptionsFor(job.comm);
#endif
  return o;
}

step::TrainStepOptions TrainStepOptionsFor(const config::JobConfig& job,
                                           const startup::RankDevice& device, int rank) {
  step::TrainStepOptions o;
  o.autocast = AutocastDtypeFor(device.precision);
  o.update = GradientUpdateOptionsFor(job.comm);
  o.backward_sm_carveout = job.comm.backward_sm_carveout;
  o.straggle_s = rank == job.fault.straggler_rank ? job.fault.straggler_ms / 1000.0 : 0.0;
  o.grad_accum_steps = job.train.grad_accum_steps;
  o.max_grad_norm = job.train.max_grad_norm;
  o.optimizer_writes_copies = job.model.mixed_linear && job.model.mixed_linear_optimizer_copies;
  return o;
}

step::TrainingStateOptions TrainingStateOptionsFor(const config::JobConfig& job,
                                                   const RunPlan& plan) {
  step::TrainingStateOptions o;
  o.model = ModelOptionsFor(job, plan.tokens);
  o.optimizer = OptimizerOptionsFor(job, plan.steps);
  o.seed = job.train.seed;
  o.channels_last = job.train.channels_last;
  return o;
}

EvaluationOptions EvaluationOptionsFor(const config::JobConfig& job,
                                       const startup::RankDevice& device) {
  EvaluationOptions o;
  o.batch_per_rank =
      job.eval.batch_per_rank > 0 ? job.eval.batch_per_rank : job.data.batch_per_rank;
  o.num_classes = job.model.num_classes;
  o.autocast = AutocastDtypeFor(device.precision);
  return o;
}

SummaryOptions SummaryOptionsFor(const config::JobConfig& job, const RunPlan& plan,
                                 const std::string& run_dir) {
  SummaryOptions o;
  o.run_dir = run_dir;
  o.job_name = job.name;
  o.model = config::ToString(job.model.name);
  o.batch_per_rank = job.data.batch_per_rank;
  o.grad_accum_steps = job.train.grad_accum_steps;
  o.steps = plan.steps;
  return o;
}

TrainingLoopOptions TrainingLoopOptionsFor(const config::JobConfig& job, const RunPlan& plan,
                                           const startup::RankDevice& device,
                                           const std::string& run_dir, int attempt) {
  TrainingLoopOptions o;
  o.run_dir = run_dir;
  o.job_name = job.name;
  o.attempt = attempt;
  o.steps = plan.steps;
  o.steps_per_epoch = plan.steps_per_epoch;
  o.train_samples = plan.data.samples;
  o.train_files = plan.data.files;
  o.batch_per_rank = job.data.batch_per_rank;
  o.grad_accum_steps = job.train.grad_accum_steps;
  o.host_lead_steps = job.train.host_lead_steps;
  o.timing_skip_steps = job.train.timing_skip_steps;
  o.log_every_s = job.train.log_every_s;
  o.eval_every_steps = job.eval.every_steps;
  o.checkpoint_every_steps = job.checkpoint.every_steps;
  o.crash_rank = job.fault.crash_rank;
  o.crash_step = job.fault.crash_step;
  o.lr_schedule = LrScheduleOptionsFor(job, plan.steps);
  o.evaluation = EvaluationOptionsFor(job, device);
  o.tokens = plan.tokens;
  o.summary = SummaryOptionsFor(job, plan, run_dir);
  return o;
}

telemetry::RankTelemetryOptions RankTelemetryOptionsFor(const config::JobConfig& job) {
  telemetry::RankTelemetryOptions o;
  o.gpu_sample_seconds = job.metrics.gpu_sample_seconds;
  o.trace = job.trace.enabled;
  o.trace_max_events = job.trace.max_events;
  return o;
}

topology::BindPolicy BindPolicyFor(config::BindMode mode) {
  switch (mode) {
    case config::BindMode::kAuto:
      return topology::BindPolicy::kAuto;
    case config::BindMode::kNuma:
      return topology::BindPolicy::kNuma;
    case config::BindMode::kCores:
      return topology::BindPolicy::kCores;
    case config::BindMode::kNone:
      return topology::BindPolicy::kNone;
  }
  return topology::BindPolicy::kAuto;
}

#ifdef RINGPILOT_WITH_CUDA
comm::NcclOptions NcclOptionsFor(const config::CommConfig& comm) {
  comm::NcclOptions o;
  o.timeout_s = comm.timeout_s;
  o.high_priority_stream = comm.high_priority_stream;
  switch (comm.nccl_cta_policy) {
    case config::NcclCtaPolicy::kDefault:
      o.cta_policy = comm::NcclCtaPolicy::kDefault;
      break;
    case config::NcclCtaPolicy::kEfficiency:
      o.cta_policy = comm::NcclCtaPolicy::kEfficiency;
      break;
    case config::NcclCtaPolicy::kZero:
      o.cta_policy = comm::NcclCtaPolicy::kZero;
      break;
  }
  switch (comm.nccl_buffer_registration) {
    case config::NcclBufferRegistration::kNone:
      o.buffer_registration = comm::NcclBufferRegistration::kNone;
      break;
    case config::NcclBufferRegistration::kRegister:
      o.buffer_registration = comm::NcclBufferRegistration::kRegister;
      break;
    case config::NcclBufferRegistration::kSymmetric:
      o.buffer_registration = comm::NcclBufferRegistration::kSymmetric;
      break;
  }
  return o;
}
#endif

metrics::ExporterOptions ExporterOptionsFor(const config::MetricsConfig& metrics, int local_rank,
                                            bool multi_node, const base::Environment& env) {
  metrics::ExporterOptions o;
  o.bind = metrics::ResolveBind(metrics.bind, env, multi_node);
  o.port = config::MetricsPort(metrics, local_rank);
  // `ringpilot run` on one host found the first free block at or above port_base (another
  // job may hold port_base's): the ranks start there.
  const std::string from = base::Lookup(env, base::kMetricsPortFromVar, "");
  if (metrics.port_base != 0 && !from.empty()) {
    int chosen = 0;
    const auto r = std::from_chars(from.data(), from.data() + from.size(), chosen);
    if (r.ec == std::errc() && r.ptr == from.data() + from.size() && chosen > 0 &&
        chosen <= 65535) {
      o.port = base::MetricsPort(chosen, local_rank);
    }
  }
  o.tls_cert_pem = metrics.tls_cert_file;
  if (!metrics.basic_auth_user.empty()) {
    const std::string& path = metrics.basic_auth_password_file;
    std::string text;
    try {
      text = base::ReadFile(path);
    } catch (const base::FileError& e) {
      throw config::ConfigError(std::string("metrics.basic_auth_password_file: ") + e.what());
    }
    // The first line, without its end (and a CR of a file written on Windows).
    std::string password = text.substr(0, text.find('\n'));
    if (!password.empty() && password.back() == '\r') password.pop_back();
    if (password.empty()) {
      throw config::ConfigError("metrics.basic_auth_password_file: " + path +
                                ": the first line (the password) is empty");
    }
    o.basic_auth_user = metrics.basic_auth_user;
    o.basic_auth_password = password;
  }
  return o;
}

namespace {

// Host threads of the GPU image pipeline when data.workers is 0. nvJPEG's engines do most
// decoding; the threads read files into pinned memory, parse headers, make the batch's
// nvJPEG calls and run the Huffman stage of progressive JPEGs (about 2.7 ms each). 8 kept
// the pipeline at 27k img/s on an H200 (bench/results/2026-11-28-nvidia-h200-image-input.md).
constexpr int kGpuDecodeThreads = 8;

}  // namespace

input::InputOptions InputOptionsFor(const config::JobConfig& job) {
  const config::ModelConfig& model = job.model;
  input::InputOptions o;
  o.kind = job.data.kind;
  o.train = job.data.train;
  o.val = job.data.val;
  o.batch_per_rank = job.data.batch_per_rank;
  o.seed = job.train.seed;
  o.model_input =
      config::IsImageModel(model.name) ? models::InputKind::kImages : models::InputKind::kTokens;
  o.num_classes = model.num_classes;
  // The config checks model.num_classes 10 or 100 for data.kind cifar.
  o.cifar = model.num_classes == 100 ? data::CifarVariant::kCifar100 : data::CifarVariant::kCifar10;
  o.seq_len = model.seq_len;
  o.vocab_size = model.vocab_size;
  o.images.gpu_decode = job.data.gpu_decode;
  o.images.prefetch = job.data.prefetch;
  o.images.workers = job.data.workers;
  o.images.gpu_threads = job.data.workers > 0 ? job.data.workers : kGpuDecodeThreads;
  o.images.worker_nice = job.data.worker_nice;
  o.images.max_bad_fraction = job.data.max_bad_fraction;
  return o;
}

}  // namespace ringpilot::trainer
