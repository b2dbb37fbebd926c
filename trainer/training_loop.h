// The steps of one rank, from where it resumed to the run plan's end: graph capture after
// the eager warm-up, the timed window, progress lines, evaluation, periodic checkpoints,
// preemption, the attempt's records and the run summary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "data/image_source.h"
#include "trainer/checkpoint/store.h"
#include "trainer/evaluation.h"
#include "trainer/input/input_feed.h"
#include "trainer/input/validation_set.h"
#include "trainer/models/model.h"
#include "trainer/phase_report.h"
#include "trainer/startup/preemption.h"
#include "trainer/startup/rank_setup.h"
#include "trainer/step/lr_schedule.h"
#include "trainer/step/step_phases.h"
#include "trainer/step/train_step.h"
#include "trainer/step/training_state.h"
#include "trainer/summary.h"
#include "trainer/telemetry/heartbeat.h"
#include "trainer/telemetry/rank_log.h"
#include "trainer/telemetry/rank_telemetry.h"
#include "trainer/telemetry/step_stats.h"
#include "trainer/telemetry/training_metrics.h"

namespace ringpilot::trainer {

/// What the loop reads of the job and the run plan (trainer/options.cpp
/// TrainingLoopOptionsFor).
struct TrainingLoopOptions {
  std::string run_dir;
  std::string job_name;            ///< name, as checkpoints record it
  int attempt = 1;                 ///< RINGPILOT_ATTEMPT (1 = first)
  int64_t steps = 0;               ///< the run's optimizer steps (RunPlan::steps)
  int64_t steps_per_epoch = 0;     ///< RunPlan::steps_per_epoch (0: synthetic, no epochs)
  int64_t train_samples = -1;      ///< RunPlan::data (-1: synthetic)
  int64_t train_files = 0;         ///< ... and the files they are in
  int batch_per_rank = 0;          ///< data.batch_per_rank
  int grad_accum_steps = 1;        ///< train.grad_accum_steps
  int host_lead_steps = 1;         ///< train.host_lead_steps
  int64_t timing_skip_steps = 0;   ///< train.timing_skip_steps
  double log_every_s = 0;          ///< train.log_every_s
  int64_t eval_every_steps = 0;    ///< eval.every_steps (0: after the last step only)
  int checkpoint_every_steps = 0;  ///< checkpoint.every_steps (0: the last step only)
  int crash_rank = -1;             ///< fault.crash_rank
  int64_t crash_step = -1;         ///< fault.crash_step (first attempt only)
  step::LrScheduleOptions lr_schedule;
  EvaluationOptions evaluation;
  /// Token models: the run's ids (RunPlan::tokens), evaluated by masked-LM accuracy;
  /// nullopt for image models.
  std::optional<models::TokenSpec> tokens;
  SummaryOptions summary;
};

/// The data the loop reads. Owned by the caller, outliving the loop.
struct LoopData {
  input::InputFeed& input;
  input::ValidationSet* val = nullptr;              ///< data.val, or null
  const data::ImageSource* train_images = nullptr;  ///< image kinds' data.train (bad files)
};

/// Where the loop reports. Owned by the caller, outliving the loop.
struct LoopReporting {
  telemetry::TrainingMetrics& metrics;
  telemetry::RankTelemetry& telemetry;
  telemetry::StepStats& stats;
  telemetry::RankLog& log;
  telemetry::Heartbeat& heartbeat;
  PhaseReporter& reporter;
};

/// Runs steps `start_step` .. options.steps on this rank. Collective over the rank's
/// communicators (every rank calls it with the same options). Everything it is given is
/// owned by the caller and outlives the call. Returns the exit status: base::kExitOk, or
/// base::kExitPreempted when SIGUSR1 stopped it after a checkpoint.
int RunTrainingLoop(const TrainingLoopOptions& options, int64_t start_step,
                    const startup::RankPlace& place, const startup::RankDevice& device,
                    startup::RankCommunicators& comms, step::TrainingState& state,
                    step::TrainStep& train_step, step::StepPhases& phases,
                    checkpoint::CheckpointStore& store, const LoopData& data,
                    const LoopReporting& reporting, const startup::PreemptionWatch& preemption);

}  // namespace ringpilot::trainer
