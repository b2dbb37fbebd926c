// The training loop of one rank: model, data, gradient reduction, optimizer,
// checkpoints, metrics and the run summary.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "config/job.h"

namespace ringpilot::trainer {

struct TrainerOptions {
  std::string run_dir;
  int attempt = 1;       ///< attempt number from the front end (RINGPILOT_ATTEMPT, 1 = first)
  bool verbose = false;  ///< rank 0 echoes its start-up detail too (RINGPILOT_VERBOSE)
};

/// Runs the job described by `config` on this rank. Collective over MPI_COMM_WORLD:
/// every rank constructs a Trainer and calls Run(). Throws on setup errors (config
/// that cannot run here, unreadable checkpoint, port in use); the caller reports and
/// aborts the job.
class Trainer {
 public:
  Trainer(config::JobConfig config, TrainerOptions options);
  ~Trainer();
  /// Trains from the newest valid checkpoint (or from scratch) to the run plan's steps
  /// (train.steps, or what train.epochs makes: trainer/run_plan.h).
  /// Returns the process exit status: base::kExitOk, or base::kExitPreempted when SIGUSR1
  /// stopped it after a checkpoint.
  int Run();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ringpilot::trainer
