// `ringpilot --version`: ringpilot's version and git commit, and the versions of the
// libraries a run uses (LibTorch, CUDA runtime, NCCL, MPI from `ringpilot-trainer
// --versions`; prometheus-cpp and yaml-cpp as built; mpirun's own).
#pragma once

#include <string>

#include "base/environment.h"

namespace ringpilot::cli {

/// The version text: "ringpilot X (git C)" and one `  NAME  VERSION` line per library.
/// Runs the trainer (TrainerPath(env)) and `mpirun --version` ($RINGPILOT_MPIRUN), each
/// with a timeout; what cannot be found says so on its line rather than failing.
std::string VersionText(const base::Environment& env);

}  // namespace ringpilot::cli
