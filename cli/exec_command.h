// `ringpilot exec -- CMD ARGS...`: runs any worker (a user's PyTorch script) with the
// torchrun environment derived from mpirun or srun; `ringpilot run` starts every rank of a
// launch.command job this way (with --log-dir, --bind and --device).
#pragma once

#include <string>
#include <vector>

namespace ringpilot::cli {

struct ExecArgs {
  std::vector<std::string> command;  ///< the program and its arguments
  /// Load the NCCL profiler plugin (launcher/nccl_metrics_env.h: NCCL loads
  /// libringpilot-nccl-profiler.so, which serves the rank's NCCL metrics); a plugin that
  /// cannot be loaded (checked with dlopen) costs one warning line, not the run.
  bool nccl_metrics = true;
  /// Non-empty: run the program as a child whose output also goes to DIR/rank-RANK.log,
  /// ending with a FATAL line when it fails (launcher/rank_program.h). Empty: execve it.
  std::string log_dir;
  /// Non-empty: place the rank first (cli/exec_placement.h): auto, numa, cores, none.
  std::string bind;
  std::string device = "auto";  ///< with `bind`: auto, cuda, cpu
};

/// Runs `args.command` with launcher::ComputeTorchrunEnv's environment. Without a log
/// directory it execve's and returns only on failure; with one it returns the program's
/// status as a shell would (128 + N after signal N). Errors: base::kExitUsage (no command,
/// bad rank environment or option), base::kExitNotFound, base::kExitNotExecutable,
/// base::kExitFailure (the rank log cannot be written).
int RunExec(const ExecArgs& args);

}  // namespace ringpilot::cli
