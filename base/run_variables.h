// Environment variables `ringpilot run` sets for every attempt and forwards to all ranks
// (mpirun -x); the trainer reads them. One definition for both sides.
#pragma once

namespace ringpilot::base {

/// The run directory (absolute, so ranks on other hosts find it too).
inline constexpr const char* kRunDirVar = "RINGPILOT_RUN_DIR";
/// Attempt number: 0 for the first attempt, then 1, 2, ... after restarts.
inline constexpr const char* kRestartVar = "RINGPILOT_RESTART";
/// Rendezvous address and port for `ringpilot exec` workers (torchrun's MASTER_ADDR/PORT).
inline constexpr const char* kMasterAddrVar = "RINGPILOT_MASTER_ADDR";
inline constexpr const char* kMasterPortVar = "RINGPILOT_MASTER_PORT";
/// Unix time (seconds) at which the supervisor started this attempt; the trainer reports
/// time-to-first-step from it.
inline constexpr const char* kLaunchTimeVar = "RINGPILOT_LAUNCH_UNIX";

/// Metrics of a program that `ringpilot exec` runs (the NCCL profiler plugin,
/// docs/nccl-profiler.md). The launcher may set the base, bind address and job name for all
/// ranks; `ringpilot exec` turns the base into this rank's port (config::MetricsPort).
inline constexpr const char* kMetricsPortBaseVar = "RINGPILOT_METRICS_PORT_BASE";
inline constexpr const char* kMetricsBindVar = "RINGPILOT_METRICS_BIND";
inline constexpr const char* kJobNameVar = "RINGPILOT_JOB_NAME";
/// The port this process serves its metrics on; per process, never forwarded to all ranks.
inline constexpr const char* kMetricsPortVar = "RINGPILOT_METRICS_PORT";
/// Path of the NCCL profiler plugin `ringpilot exec` names in NCCL_PROFILER_PLUGIN; by
/// default libringpilot-nccl-profiler.so next to the ringpilot executable.
inline constexpr const char* kNcclProfilerVar = "RINGPILOT_NCCL_PROFILER";

}  // namespace ringpilot::base
