// trainer/options.h: the one mapping from the job to the components' options.
#include <gtest/gtest.h>

#include "trainer/input/dataset_factory.h"
#include "trainer/options.h"

namespace ringpilot::trainer {
namespace {

TEST(Options, ReducerBucketsFromMegabytes) {
  config::CommConfig comm;  // the job defaults: 25 MB buckets, 1 MB first bucket, fp32
  comm::ReducerOptions r = ReducerOptionsFor(comm);
  EXPECT_EQ(r.bucket_bytes, 25LL << 20);
  EXPECT_EQ(r.first_bucket_bytes, 1LL << 20);
  EXPECT_EQ(r.comm_dtype, c10::kFloat);
  comm.bucket_mb = 0.5;
  comm.first_bucket_mb = 2;
  comm.grad_dtype = config::GradDtype::kBf16;
  r = ReducerOptionsFor(comm);
  EXPECT_EQ(r.bucket_bytes, 512LL << 10);
  EXPECT_EQ(r.first_bucket_bytes, 2LL << 20);
  EXPECT_EQ(r.comm_dtype, c10::kBFloat16);
}

TEST(Options, ModelAndOptimizerCarryEveryJobField) {
  config::JobConfig job;
  job.model.name = config::ModelName::kBertBase;
  job.model.seq_len = 64;
  job.model.dropout = 0.25;
  job.model.mixed_linear = false;
  job.model.vocab_size = 0;  // follows the data
  job.train.label_smoothing = 0.1;
  models::TokenSpec tokens;
  tokens.vocab = 1200;  // the run's (RunPlan::tokens): here the shards'; the job stays 0
  const models::ModelOptions m = ModelOptionsFor(job, tokens);
  EXPECT_DOUBLE_EQ(m.label_smoothing, 0.1);
  EXPECT_EQ(m.name, config::ModelName::kBertBase);
  EXPECT_EQ(m.seq_len, 64);
  EXPECT_EQ(m.vocab_size, 1200);
  EXPECT_EQ(ModelOptionsFor(job, std::nullopt).vocab_size, 0);  // image models: none
  EXPECT_DOUBLE_EQ(m.dropout, 0.25);
  EXPECT_FALSE(m.mixed_linear);
  EXPECT_EQ(m.fused_residual_norm, job.model.fused_residual_norm);
  EXPECT_EQ(m.num_classes, job.model.num_classes);

  job.train.optimizer = config::Optimizer::kAdamW;
  job.train.beta2 = 0.98;
  const step::OptimizerOptions o = OptimizerOptionsFor(job, job.train.steps);
  EXPECT_EQ(o.kind, config::Optimizer::kAdamW);
  EXPECT_DOUBLE_EQ(o.beta2, 0.98);
  EXPECT_DOUBLE_EQ(o.lr, job.train.lr);
  EXPECT_DOUBLE_EQ(o.eps, job.train.eps);
}

TEST(Options, StartUpStepAndTelemetryCarryTheirJobKeys) {
  config::JobConfig job;
  job.world.device = config::Device::kCpu;
  job.placement.bind = config::BindMode::kCores;
  const startup::PlacementOptions place = PlacementOptionsFor(job);
  EXPECT_EQ(place.device, config::Device::kCpu);
  EXPECT_EQ(place.bind, topology::BindPolicy::kCores);

  job.train.threads_per_rank = 3;
  job.train.retain_host_memory = !job.train.retain_host_memory;
  job.train.deterministic = true;
  job.train.tf32 = !job.train.tf32;
  job.train.precision = config::Precision::kBf16;
  const startup::DeviceOptions device = DeviceOptionsFor(job, /*cuda_visible=*/true, "node-a");
  EXPECT_FALSE(device.plan.cuda);  // world.device cpu, whatever the host has
  EXPECT_EQ(device.plan.precision, config::Precision::kBf16);
  EXPECT_EQ(device.threads_per_rank, 3);
  EXPECT_EQ(device.retain_host_memory, job.train.retain_host_memory);
  EXPECT_TRUE(device.deterministic);
  EXPECT_EQ(device.tf32, job.train.tf32);

  job.comm.timeout_s = 42;
  job.model.sync_batchnorm = true;
  const startup::CommunicatorOptions comms = CommunicatorOptionsFor(job);
  EXPECT_DOUBLE_EQ(comms.timeout_s, 42);
  EXPECT_TRUE(comms.sync_batchnorm);

  job.comm.backward_sm_carveout = 8;
  job.comm.overlap_optimizer = false;
  job.fault.straggler_rank = 1;
  job.fault.straggler_ms = 250;
  job.train.grad_accum_steps = 4;
  job.train.max_grad_norm = 1.5;
  job.model.mixed_linear = true;
  job.model.mixed_linear_optimizer_copies = true;
  startup::RankDevice bf16;
  bf16.precision = config::Precision::kBf16;
  const step::TrainStepOptions straggler = TrainStepOptionsFor(job, bf16, /*rank=*/1);
  EXPECT_EQ(straggler.autocast, c10::kBFloat16);
  EXPECT_FALSE(straggler.update.overlap);
  EXPECT_EQ(straggler.backward_sm_carveout, 8);
  EXPECT_DOUBLE_EQ(straggler.straggle_s, 0.25);
  EXPECT_EQ(straggler.grad_accum_steps, 4);
  EXPECT_DOUBLE_EQ(straggler.max_grad_norm, 1.5);
  EXPECT_TRUE(straggler.optimizer_writes_copies);
  job.model.mixed_linear = false;  // the copies are MixedLinear's: no effect without it
  EXPECT_FALSE(TrainStepOptionsFor(job, bf16, 1).optimizer_writes_copies);
  const step::TrainStepOptions other = TrainStepOptionsFor(job, startup::RankDevice{}, /*rank=*/0);
  EXPECT_FALSE(other.autocast.has_value());  // fp32 as the device plan applies it
  EXPECT_DOUBLE_EQ(other.straggle_s, 0);

  job.metrics.gpu_sample_seconds = 2.5;
  job.trace.enabled = false;
  job.trace.max_events = 77;
  const telemetry::RankTelemetryOptions t = RankTelemetryOptionsFor(job);
  EXPECT_DOUBLE_EQ(t.gpu_sample_seconds, 2.5);
  EXPECT_FALSE(t.trace);
  EXPECT_EQ(t.trace_max_events, 77);
}

// The loop, the evaluation, the summary and the training state read the job only through
// these: each key they read changes what options.cpp fills, and the plan's values win
// over the job's (train.steps, model.vocab_size).
TEST(Options, LoopEvaluationSummaryAndStateCarryTheirJobKeys) {
  config::JobConfig job;
  job.name = "carry";
  job.model.name = config::ModelName::kBertTiny;
  job.model.num_classes = 7;
  job.data.batch_per_rank = 12;
  job.eval.batch_per_rank = 0;
  job.eval.every_steps = 9;
  job.checkpoint.every_steps = 11;
  job.train.steps = 1000;  // the plan's steps win
  job.train.grad_accum_steps = 3;
  job.train.host_lead_steps = 2;
  job.train.timing_skip_steps = 6;
  job.train.log_every_s = 2.5;
  job.train.seed = 4242;
  job.train.channels_last = false;
  job.fault.crash_rank = 1;
  job.fault.crash_step = 5;
  RunPlan plan;
  plan.steps = 40;
  plan.steps_per_epoch = 8;
  plan.data = {96, 4};
  models::TokenSpec tokens;
  tokens.vocab = 321;
  plan.tokens = tokens;
  startup::RankDevice bf16;
  bf16.precision = config::Precision::kBf16;

  const TrainingLoopOptions loop = TrainingLoopOptionsFor(job, plan, bf16, "/runs/x", 2);
  EXPECT_EQ(loop.run_dir, "/runs/x");
  EXPECT_EQ(loop.job_name, "carry");
  EXPECT_EQ(loop.attempt, 2);
  EXPECT_EQ(loop.steps, 40);
  EXPECT_EQ(loop.steps_per_epoch, 8);
  EXPECT_EQ(loop.train_samples, 96);
  EXPECT_EQ(loop.train_files, 4);
  EXPECT_EQ(loop.batch_per_rank, 12);
  EXPECT_EQ(loop.grad_accum_steps, 3);
  EXPECT_EQ(loop.host_lead_steps, 2);
  EXPECT_EQ(loop.timing_skip_steps, 6);
  EXPECT_DOUBLE_EQ(loop.log_every_s, 2.5);
  EXPECT_EQ(loop.eval_every_steps, 9);
  EXPECT_EQ(loop.checkpoint_every_steps, 11);
  EXPECT_EQ(loop.crash_rank, 1);
  EXPECT_EQ(loop.crash_step, 5);
  ASSERT_TRUE(loop.tokens.has_value());
  EXPECT_EQ(loop.tokens->vocab, 321);
  EXPECT_EQ(loop.summary.steps, 40);
  EXPECT_EQ(loop.summary.model, "bert-tiny");
  EXPECT_EQ(loop.summary.grad_accum_steps, 3);
  EXPECT_EQ(loop.summary.batch_per_rank, 12);
  EXPECT_EQ(loop.summary.run_dir, "/runs/x");

  // eval.batch_per_rank 0 is data.batch_per_rank; the autocast is the device's precision.
  EXPECT_EQ(loop.evaluation.batch_per_rank, 12);
  EXPECT_EQ(loop.evaluation.num_classes, 7);
  EXPECT_EQ(loop.evaluation.autocast, c10::kBFloat16);
  job.eval.batch_per_rank = 5;
  EXPECT_EQ(EvaluationOptionsFor(job, startup::RankDevice{}).batch_per_rank, 5);
  EXPECT_FALSE(EvaluationOptionsFor(job, startup::RankDevice{}).autocast.has_value());

  const step::TrainingStateOptions state = TrainingStateOptionsFor(job, plan);
  EXPECT_EQ(state.seed, 4242u);
  EXPECT_FALSE(state.channels_last);
  EXPECT_EQ(state.model.vocab_size, 321);
  job.train.channels_last = true;
  EXPECT_TRUE(TrainingStateOptionsFor(job, plan).channels_last);
}

TEST(Options, InputCarriesTheDataKeys) {
  config::JobConfig job;  // the job defaults: synthetic, resnet18-cifar, data.workers 0
  input::InputOptions in = InputOptionsFor(job);
  EXPECT_EQ(in.kind, config::DataKind::kSynthetic);
  EXPECT_EQ(in.model_input, models::InputKind::kImages);
  EXPECT_EQ(in.cifar, data::CifarVariant::kCifar10);
  EXPECT_EQ(in.vocab_size, 0);  // token shards: the shards' vocabulary
  EXPECT_EQ(input::TokenSpecFor(in).vocab, config::kSyntheticVocabSize);  // synthetic
  EXPECT_EQ(in.images.workers, 0);  // from the rank's cores (input::DecodeWorkersFor)
  EXPECT_EQ(in.images.gpu_threads, 8);
  EXPECT_EQ(in.images.worker_nice, 10);  // decode threads yield to training
  EXPECT_EQ(in.images.prefetch, job.data.prefetch);
  EXPECT_DOUBLE_EQ(in.images.max_bad_fraction, job.data.max_bad_fraction);
  EXPECT_EQ(in.images.gpu_decode, config::GpuDecode::kAuto);

  job.data.kind = config::DataKind::kImageShards;
  job.data.train = "/data/train-*.tar";
  job.data.val = "/data/val-*.tar";
  job.data.batch_per_rank = 48;
  job.data.prefetch = 3;
  job.data.workers = 5;
  job.data.worker_nice = 7;
  job.data.max_bad_fraction = 0.05;
  job.data.gpu_decode = config::GpuDecode::kOff;
  job.train.seed = 99;
  job.model.name = config::ModelName::kResnet50;
  job.model.num_classes = 100;
  in = InputOptionsFor(job);
  EXPECT_EQ(in.kind, config::DataKind::kImageShards);
  EXPECT_EQ(in.train, "/data/train-*.tar");
  EXPECT_EQ(in.val, "/data/val-*.tar");
  EXPECT_EQ(in.batch_per_rank, 48);
  EXPECT_EQ(in.seed, 99u);
  EXPECT_EQ(in.model_input, models::InputKind::kImages);
  EXPECT_EQ(in.num_classes, 100);
  EXPECT_EQ(in.cifar, data::CifarVariant::kCifar100);
  EXPECT_EQ(in.images.prefetch, 3);
  EXPECT_EQ(in.images.workers, 5);
  EXPECT_EQ(in.images.gpu_threads, 5);  // data.workers, on the GPU too
  EXPECT_EQ(in.images.worker_nice, 7);
  EXPECT_DOUBLE_EQ(in.images.max_bad_fraction, 0.05);
  EXPECT_EQ(in.images.gpu_decode, config::GpuDecode::kOff);

  job.data.kind = config::DataKind::kTokens;
  job.model.name = config::ModelName::kBertTiny;
  job.model.seq_len = 64;
  job.model.vocab_size = 2048;
  in = InputOptionsFor(job);
  EXPECT_EQ(in.kind, config::DataKind::kTokens);
  EXPECT_EQ(in.model_input, models::InputKind::kTokens);
  EXPECT_EQ(in.seq_len, 64);
  EXPECT_EQ(in.vocab_size, 2048);
}

TEST(Options, EnumsMapOneToOne) {
  EXPECT_EQ(BindPolicyFor(config::BindMode::kAuto), topology::BindPolicy::kAuto);
  EXPECT_EQ(BindPolicyFor(config::BindMode::kNuma), topology::BindPolicy::kNuma);
  EXPECT_EQ(BindPolicyFor(config::BindMode::kCores), topology::BindPolicy::kCores);
  EXPECT_EQ(BindPolicyFor(config::BindMode::kNone), topology::BindPolicy::kNone);
  EXPECT_FALSE(AutocastDtypeFor(config::Precision::kFp32).has_value());
  EXPECT_EQ(AutocastDtypeFor(config::Precision::kBf16), c10::kBFloat16);
  config::CommConfig comm;
  comm.overlap_optimizer = false;
  EXPECT_FALSE(GradientUpdateOptionsFor(comm).overlap);
#ifdef RINGPILOT_WITH_CUDA
  comm.nccl_cta_policy = config::NcclCtaPolicy::kZero;
  comm.nccl_buffer_registration = config::NcclBufferRegistration::kSymmetric;
  comm.timeout_s = 12;
  const comm::NcclOptions n = NcclOptionsFor(comm);
  EXPECT_EQ(n.cta_policy, comm::NcclCtaPolicy::kZero);
  EXPECT_EQ(n.buffer_registration, comm::NcclBufferRegistration::kSymmetric);
  EXPECT_DOUBLE_EQ(n.timeout_s, 12);
  EXPECT_EQ(n.high_priority_stream, comm.high_priority_stream);
#endif
}

}  // namespace
}  // namespace ringpilot::trainer
