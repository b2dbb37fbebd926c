// `ringpilot exec`'s part of the NCCL profiler plugin (docs/nccl-profiler.md): which
// library NCCL loads and the metrics port base its processes serve on (base + LOCAL_RANK).
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
///   RINGPILOT_METRICS_PORT_BASE = the job default of metrics.port_base (config/job.h,
///     18400), unless set (a launcher's or the user's). The plugin serves on
///     base::MetricsPort(base, LOCAL_RANK) of its own process (RANK without LOCAL_RANK;
///     0: a free port), so the workers of a `torchrun` under exec each get theirs.
/// Throws RankEnvError (launcher/torchrun_env.h) naming RINGPILOT_METRICS_PORT_BASE when it
/// is not a port, or when base + LOCAL_RANK passes 65535.
base::Environment AddNcclMetricsEnv(const base::Environment& env, const std::string& plugin_path);

}  // namespace ringpilot::launcher
