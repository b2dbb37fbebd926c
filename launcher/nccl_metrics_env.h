// `ringpilot exec`'s part of the NCCL profiler plugin (docs/nccl-profiler.md): which
// library NCCL loads and on which port this rank serves its metrics.
#pragma once

#include <string>

#include "base/environment.h"

namespace ringpilot::launcher {

/// File name of the plugin, built next to the ringpilot executable.
inline constexpr const char* kNcclProfilerLibrary = "libringpilot-nccl-profiler.so";

/// The plugin `ringpilot exec` names: RINGPILOT_NCCL_PROFILER when set, else
/// `self_dir`/libringpilot-nccl-profiler.so (as `ringpilot run` finds ringpilot-trainer).
std::string NcclProfilerPath(const base::Environment& env, const std::string& self_dir);

/// `env` (a worker's torchrun environment: RANK is set) plus
///   NCCL_PROFILER_PLUGIN = `plugin_path`, unless the caller set it (their plugin wins),
///   RINGPILOT_METRICS_PORT = config::MetricsPort(metrics, RANK), where metrics.port_base is
///     RINGPILOT_METRICS_PORT_BASE or the job default (9400); 0 lets the plugin pick a free
///     port. Kept when the caller set it.
/// Throws RankEnvError (launcher/torchrun_env.h) naming RINGPILOT_METRICS_PORT_BASE when it
/// is not a port, or when base + RANK passes 65535.
base::Environment AddNcclMetricsEnv(const base::Environment& env, const std::string& plugin_path);

}  // namespace ringpilot::launcher
