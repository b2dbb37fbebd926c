// The one mapping from the job (config/job.h, where every default lives) to the options
// of the components a rank runs: models, optimizer, gradient reducer, NCCL, placement.
// Enum to enum by exhaustive switches (a new job value fails to compile until it is
// mapped); no component below the trainer reads the job itself.
#pragma once

#include <optional>
#include <string>

#include <ATen/core/ATen_fwd.h>
#include <c10/core/ScalarType.h>

#include "base/environment.h"
#include "comm/gradient_reducer.h"
#include "config/job.h"
#include "metrics/exporter.h"
#include "topology/plan.h"
#include "trainer/evaluation.h"
#include "trainer/input/input_options.h"
#include "trainer/models/model.h"
#include "trainer/run_plan.h"
#include "trainer/startup/bootstrap.h"
#include "trainer/startup/rank_setup.h"
#include "trainer/step/gradient_update.h"
#include "trainer/step/lr_schedule.h"
#include "trainer/step/optimizer.h"
#include "trainer/step/train_step.h"
#include "trainer/step/training_state.h"
#include "trainer/summary.h"
#include "trainer/telemetry/rank_telemetry.h"
#include "trainer/training_loop.h"

#ifdef RINGPILOT_WITH_CUDA
#include "comm/nccl_communicator.h"
#endif

namespace ringpilot::trainer {

/// model.* and the loss settings of train.* (label_smoothing); BERT's vocabulary from
/// `tokens`, the run's ids (RunPlan::tokens: model.vocab_size resolved), nullopt for image
/// models.
models::ModelOptions ModelOptionsFor(const config::JobConfig& job,
                                     const std::optional<models::TokenSpec>& tokens);

/// train.optimizer and its settings at config::PeakLearningRate; the lr lives on the device
/// when the schedule varies it. `steps`: the run's optimizer steps (RunPlan::steps).
step::OptimizerOptions OptimizerOptionsFor(const config::JobConfig& job, int64_t steps);

/// train.lr_* peaking at config::PeakLearningRate over the run's `steps` optimizer steps
/// (RunPlan::steps: train.steps, or what train.epochs makes), train.lr_warmup_epochs
/// resolved by WarmupSteps.
step::LrScheduleOptions LrScheduleOptionsFor(const config::JobConfig& job, int64_t steps);

/// "learning rate 0.4: train.lr 0.1 x global batch 1024 / train.lr_base_batch 256": how
/// train.lr_base_batch scaled the rate (rank 0 logs it).
std::string LearningRateLine(const config::JobConfig& job);

/// The warm-up in optimizer steps of a run of `steps` (RunPlan::steps):
/// train.lr_warmup_steps, or with train.lr_warmup_epochs steps x lr_warmup_epochs /
/// train.epochs rounded, at least 1 and below `steps`.
int64_t WarmupSteps(const config::TrainConfig& train, int64_t steps);

/// Bucket caps from comm.bucket_mb / comm.first_bucket_mb (MiB), the wire dtype from
/// comm.grad_dtype. on_first_launch is left to the caller.
comm::ReducerOptions ReducerOptionsFor(const config::CommConfig& comm);

step::GradientUpdateOptions GradientUpdateOptionsFor(const config::CommConfig& comm);

/// comm.grad_dtype as the gradient buckets' dtype on the wire.
c10::ScalarType GradWireDtypeFor(config::GradDtype dtype);

/// train.precision: the autocast dtype, or nullopt for fp32 (no autocast).
std::optional<c10::ScalarType> AutocastDtypeFor(config::Precision precision);

topology::BindPolicy BindPolicyFor(config::BindMode mode);

/// world.device and placement.bind for startup::PlaceRank.
startup::PlacementOptions PlacementOptionsFor(const config::JobConfig& job);

/// world.device planned for this host (config::PlanDevice with `cuda_visible`, naming
/// `host` in its error) and train.threads_per_rank, retain_host_memory, deterministic,
/// tf32. Throws config::ConfigError for world.device cuda with no CUDA device visible.
startup::DeviceOptions DeviceOptionsFor(const config::JobConfig& job, bool cuda_visible,
                                        const std::string& host);

/// comm.timeout_s, model.sync_batchnorm and, on CUDA builds, the NCCL options.
startup::CommunicatorOptions CommunicatorOptionsFor(const config::JobConfig& job);

/// train.* and comm.* of the step on `device` (its precision as it applies), and this
/// rank's share of fault.straggler_* (`rank`).
step::TrainStepOptions TrainStepOptionsFor(const config::JobConfig& job,
                                           const startup::RankDevice& device, int rank);

/// model.*, train.optimizer and its schedule over the run's steps, train.seed and
/// train.channels_last, with the run plan's vocabulary and steps.
step::TrainingStateOptions TrainingStateOptionsFor(const config::JobConfig& job,
                                                   const RunPlan& plan);
/// eval.batch_per_rank (else data.batch_per_rank), model.num_classes, and train.precision
/// as it applies on `device`.
EvaluationOptions EvaluationOptionsFor(const config::JobConfig& job,
                                       const startup::RankDevice& device);
/// name, model.name, data.batch_per_rank, train.grad_accum_steps and the plan's steps.
SummaryOptions SummaryOptionsFor(const config::JobConfig& job, const RunPlan& plan,
                                 const std::string& run_dir);
/// The loop's keys of train.*, eval.*, checkpoint.* and fault.crash_*, the plan's steps,
/// epochs, data and token ids, and the evaluation and summary options above.
TrainingLoopOptions TrainingLoopOptionsFor(const config::JobConfig& job, const RunPlan& plan,
                                           const startup::RankDevice& device,
                                           const std::string& run_dir, int attempt);
/// metrics.gpu_sample_seconds and trace.*.
telemetry::RankTelemetryOptions RankTelemetryOptionsFor(const config::JobConfig& job);

/// metrics.*: how the exporter of the rank with node-local rank `local_rank` serves:
/// metrics.bind resolved against the rank's environment `env` (metrics::ResolveBind:
/// "auto" is the node's address for a job on several nodes (`multi_node`) or under Slurm
/// or Kubernetes), config::MetricsPort, basic auth
/// with the first line of metrics.basic_auth_password_file as the password, HTTPS with
/// metrics.tls_cert_file. Throws config::ConfigError naming the key when the password file
/// cannot be read or its first line is empty (the job's files are wrong: no restart helps).
metrics::ExporterOptions ExporterOptionsFor(const config::MetricsConfig& metrics, int local_rank,
                                            bool multi_node, const base::Environment& env);

#ifdef RINGPILOT_WITH_CUDA
comm::NcclOptions NcclOptionsFor(const config::CommConfig& comm);
#endif

/// data.*, train.seed and the model facts the input room reads (trainer/input: OpenDataset,
/// TokenSpecFor, InputFeed): the image or token model of model.name, model.num_classes (and
/// the CIFAR distribution it names), model.seq_len, model.vocab_size, the GPU pipeline's host
/// threads.
input::InputOptions InputOptionsFor(const config::JobConfig& job);

}  // namespace ringpilot::trainer
