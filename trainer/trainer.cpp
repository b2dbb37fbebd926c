#include "trainer/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "base/environment.h"
#include "base/files.h"
#include "base/run_variables.h"
#include "comm/gradient_reducer.h"
#include "history/rank_files.h"
#include "history/trainer_beat.h"
#include "trainer/checkpoint/store.h"
#include "trainer/input/dataset_factory.h"
#include "trainer/input/input_feed.h"
#include "trainer/options.h"
#include "trainer/phase_report.h"
#include "trainer/run_plan.h"
#include "trainer/startup/bootstrap.h"
#include "trainer/startup/fatal_report.h"
#include "trainer/startup/preemption.h"
#include "trainer/startup/rank_setup.h"
#include "trainer/step/step_phases.h"
#include "trainer/step/train_step.h"
#include "trainer/step/training_state.h"
#include "trainer/telemetry/heartbeat.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/rank_telemetry.h"
#include "trainer/telemetry/scrape_targets.h"
#include "trainer/telemetry/step_stats.h"
#include "trainer/telemetry/training_metrics.h"
#include "trainer/telemetry/versions.h"
#include "trainer/training_loop.h"

namespace ringpilot::trainer {
namespace {

void LogJobLine(const config::JobConfig& job, const startup::RankPlace& place,
                const startup::RankDevice& device, const step::TrainingState& state,
                const comm::GradientReducer& reducer, const comm::Communicator& device_comm,
                const telemetry::TrainingMetrics& metrics, telemetry::RankLog& log) {
  int64_t nparams = 0;
  for (const at::Tensor& p : state.params) nparams += p.numel();
  log.Info("job " + job.name + ": " + config::ToString(job.model.name) + " (" +
           std::to_string(nparams) + " parameters), " + std::to_string(place.world) +
           " rank(s) x batch " + std::to_string(job.data.batch_per_rank) + " on " +
           (device.cuda ? "cuda" : "cpu") + ", " + std::to_string(device.threads) +
           " thread(s)/rank, " + std::to_string(reducer.buckets().size()) +
           " gradient bucket(s), comm " + device_comm.backend() +
           (metrics.exporter() ? ", metrics on " + metrics.exporter()->url() : ""));
}

}  // namespace

// The job stays as loaded: what the data decides is the RunPlan's.
struct Trainer::State {
  const config::JobConfig job;
  const TrainerOptions opts;
};

Trainer::Trainer(config::JobConfig config, TrainerOptions options)
    : s_(std::make_unique<State>(State{std::move(config), std::move(options)})) {}

Trainer::~Trainer() = default;

int Trainer::Run() {
  const config::JobConfig& job = s_->job;
  const std::string& run_dir = s_->opts.run_dir;
  startup::PreemptionWatch preemption;  // SIGUSR1: checkpoint at the next step boundary and stop
  const startup::RankPlace place = startup::JoinWorld();
  const std::string logs = run_dir + "/logs";
  base::MakeDirs(logs);
  telemetry::RankLog log(history::RankLogPath(logs, place.rank), place.rank, place.rank == 0,
                         s_->opts.verbose);
  const startup::FatalReporterScope fatal_reporter(log);
  log.Detail("rank " + std::to_string(place.rank) + "/" + std::to_string(place.world) + " on " +
             place.node + " (local rank " + std::to_string(place.local_rank) + "/" +
             std::to_string(place.local_size) + ", pid " + std::to_string(::getpid()) +
             ", attempt " + std::to_string(s_->opts.attempt) + ")");
  if (place.world != job.world.size()) {
    throw std::runtime_error("world size is " + std::to_string(place.world) +
                             " but the job asks for " + std::to_string(job.world.size()) +
                             " (world.nodes x procs_per_node)");
  }
  // data.train is opened once, before anything else starts (an image set is indexed, CIFAR
  // read, a token shard mapped): a bad file stops the rank here. What it decides about the
  // run (steps, vocabulary) is the plan's; the job stays as loaded.
  const input::InputOptions input_options = InputOptionsFor(job);
  const std::unique_ptr<input::Dataset> dataset =
      input::OpenDataset(input_options, place.rank, place.world);
  const RunPlan plan = MakeRunPlan(job, *dataset);
  if (place.rank == 0 && !plan.data_line.empty()) log.Info(plan.data_line);
  if (place.rank == 0 && !plan.epochs_line.empty()) log.Info(plan.epochs_line);
  CheckRunPlan(job, plan);
  if (job.train.lr_base_batch > 0 && place.rank == 0) log.Info(LearningRateLine(job));
  // Topology, cluster view, plan: NCCL NIC variables and CPU binding (trainer/startup/bootstrap.h),
  // before CUDA, NCCL and compute threads start.
  const startup::RankPlacement placement = startup::PlaceRank(
      PlacementOptionsFor(job), place.rank, place.world, place.local_rank, place.local_size, log);
  const startup::RankDevice device =
      startup::SetUpDevice(DeviceOptionsFor(job, startup::CudaAvailable(), place.node), place, log);
  const startup::TrainingStream stream(device);
  startup::RankCommunicators comms =
      startup::MakeCommunicators(CommunicatorOptionsFor(job), place, device, run_dir);
  telemetry::Heartbeat heartbeat(history::TrainerBeatPath(logs, place.rank), place.rank,
                                 comms.device.get());
  const startup::FatalHeartbeatScope fatal_heartbeat(heartbeat);

  // Metrics first, so a port clash fails fast, before the model is built. They outlive
  // the telemetry, which detaches from them when it ends.
  std::unique_ptr<telemetry::TrainingMetrics> metrics;
  telemetry::RankTelemetry telemetry(
      RankTelemetryOptionsFor(job), run_dir,
      {job.name, place.node, place.rank, place.local_rank, place.world, {}},
      device.cuda ? device.device.index() : -1);
  metrics = std::make_unique<telemetry::TrainingMetrics>(
      telemetry.identity(), history::CountersJournalPath(logs, place.rank), s_->opts.attempt - 1);
  metrics->SetBuildInfo(telemetry::BuildInfoLabels(telemetry::QueryLibraryVersions()));
  metrics->SetExpectedBusBandwidth(placement.expected_bus_bytes_per_second);
  if (dataset->images()) metrics->EnableImageInput();
  if (job.metrics.enabled) {
    const bool multi_node = place.world > place.local_size;
    metrics::ExporterOptions serve =
        ExporterOptionsFor(job.metrics, place.local_rank, multi_node, base::CurrentEnvironment());
    // A port another job holds: this node's ranks move up a block together.
    serve.port_step = std::max(1, place.local_size);
    serve.port_tries = base::kMetricsPortBlocks;
    metrics->Serve(serve);
    // Every rank's real address and port (free ones with port_base 0) for Prometheus.
    telemetry::PublishScrapeTargets(*comms.host, metrics->exporter(), job.name, run_dir,
                                    job.metrics.file_sd_dir);
  }
  comms.device->set_observer(metrics.get());
  telemetry::StepStats stats(place.rank, place.world, place.node, place.local_rank);
  stats.set_expected_busbw(placement.expected_bus_bytes_per_second);
  const double clock_offset = telemetry::EstimateClockOffset();
  metrics->set_stats(&stats);
  // Phase markers; on CUDA a GPU timeline that also times collectives in graph replays.
  step::StepPhases phases(device.cuda ? device.device.index() : -1, comms.device.get());
  metrics->WatchSequences(comms.device.get());
  telemetry.Start(*metrics, clock_offset, log);
  stats.set_gpu_clock_source(telemetry.ClockSource());

  step::TrainingState state = step::BuildTrainingState(TrainingStateOptionsFor(job, plan), place,
                                                       device, comms.batch_norm());
  checkpoint::CheckpointStore store(run_dir + "/checkpoints", job.checkpoint.keep);
  const int64_t start_step =
      step::ResumeFromCheckpoint(job.train.seed, plan.steps, place, comms, store, state, log);
  comm::ReducerOptions reducer_options = ReducerOptionsFor(job.comm);
  reducer_options.on_first_launch = [&phases] { phases.FirstGradientsReady(); };
  comm::GradientReducer reducer(state.params, *comms.device, reducer_options);
  if (place.rank == 0) {
    LogJobLine(job, place, device, state, reducer, *comms.device, *metrics, log);
  }

  input::InputFeed input(input_options, *dataset, *state.model, device.device, device.threads,
                         plan.batches, *metrics, log);
  if (std::optional<history::ImageDecode> route = dataset->image_decode()) {
    route->batch = static_cast<int64_t>(job.data.batch_per_rank) * job.train.grad_accum_steps;
    stats.set_image_decode(*route);
  }
  if (start_step > 0 && state.data_position[0].item<int64_t>() >= 0) {
    input.Resume(start_step * job.train.grad_accum_steps,
                 {state.data_position[0].item<int64_t>(), state.data_position[1].item<int64_t>()});
  }
  const std::unique_ptr<input::ValidationSet> val =
      dataset->LoadValidationSet(state.model->image_spec(), device.cuda);
  step::TrainStep train_step(TrainStepOptionsFor(job, device, place.rank), device, state, reducer,
                             phases, input, plan.tokens);
  PhaseReporter reporter(phases, *metrics, *comms.device, *comms.host, place.rank, place.world,
                         clock_offset);
  const TrainingLoopOptions loop_options =
      TrainingLoopOptionsFor(job, plan, device, run_dir, s_->opts.attempt);
  return RunTrainingLoop(loop_options, start_step, place, device, comms, state, train_step, phases,
                         store, {input, val.get(), dataset->images()},
                         {*metrics, telemetry, stats, log, heartbeat, reporter}, preemption);
}

}  // namespace ringpilot::trainer
