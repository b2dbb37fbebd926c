// `ringpilot exec -- CMD ARGS...`: runs any worker (a user's PyTorch script) with the
// torchrun environment derived from mpirun or srun.
#pragma once

#include <string>
#include <vector>

namespace ringpilot::cli {

/// execve's `command` with launcher::ComputeTorchrunEnv's environment; returns only on
/// failure: base::kExitUsage (no command, bad rank environment), base::kExitNotFound,
/// base::kExitNotExecutable.
int RunExec(const std::vector<std::string>& command);

}  // namespace ringpilot::cli
