// `ringpilot exec -- CMD ARGS...`: runs any worker (a user's PyTorch script) with the
// torchrun environment derived from mpirun or srun.
#pragma once

#include <string>
#include <vector>

namespace ringpilot::cli {

/// execve's `command` with launcher::ComputeTorchrunEnv's environment and, unless
/// `nccl_metrics` is false, the NCCL profiler plugin's (launcher/nccl_metrics_env.h: NCCL
/// loads libringpilot-nccl-profiler.so, which serves the rank's NCCL metrics); a plugin
/// that cannot be loaded (checked with dlopen) costs one warning line, not the run. Returns only on
/// failure: base::kExitUsage (no command, bad rank environment), base::kExitNotFound,
/// base::kExitNotExecutable.
int RunExec(const std::vector<std::string>& command, bool nccl_metrics = true);

}  // namespace ringpilot::cli
