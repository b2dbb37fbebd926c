// Environment variables `ringpilot run` sets for every attempt and forwards to all ranks
// (mpirun -x); the trainer reads them. One definition for both sides.
#pragma once

namespace ringpilot::base {

/// The run directory (absolute, so ranks on other hosts find it too).
inline constexpr const char* kRunDirVar = "RINGPILOT_RUN_DIR";
/// Restarts before this attempt: 0 for the first attempt, then 1, 2, ... (a program under
/// `ringpilot exec` also gets it as torchrun's TORCHELASTIC_RESTART_COUNT). A count, not
/// an attempt's number: that is RINGPILOT_ATTEMPT.
inline constexpr const char* kRestartVar = "RINGPILOT_RESTART";
/// Attempt number of this `ringpilot run`: 1 for the first attempt, then 2, 3, ... after
/// restarts (always RINGPILOT_RESTART + 1). The one numbering of attempts: the launcher's
/// messages, the rank logs' `attempt N`, RUN_DIR/attempts/N/, summary.json's `attempt`,
/// launcher.json and `ringpilot status`.
inline constexpr const char* kAttemptVar = "RINGPILOT_ATTEMPT";
/// launch.max_restarts of the job (torchrun's TORCHELASTIC_MAX_RESTARTS under exec).
inline constexpr const char* kMaxRestartsVar = "RINGPILOT_MAX_RESTARTS";
/// "1" when `ringpilot run --verbose`: rank 0 also echoes its start-up detail (cluster
/// view, placement plan) to the terminal; it is in logs/rank-N.log either way.
inline constexpr const char* kVerboseVar = "RINGPILOT_VERBOSE";
/// Rendezvous address and port for `ringpilot exec` workers (torchrun's MASTER_ADDR/PORT).
inline constexpr const char* kMasterAddrVar = "RINGPILOT_MASTER_ADDR";
inline constexpr const char* kMasterPortVar = "RINGPILOT_MASTER_PORT";
/// Unix time (seconds) at which the supervisor started this attempt; the trainer reports
/// time-to-first-step from it.
inline constexpr const char* kLaunchTimeVar = "RINGPILOT_LAUNCH_UNIX";

/// RUN_DIR/<this>: written by `ringpilot stop` before it signals the launcher, so that a
/// requested stop is told from a scheduler's preemption (both end with exit 75): the Slurm
/// script does not requeue it, and launcher.json says who stopped the job.
inline constexpr const char* kStopRequestFile = "stop-request";

/// Metrics of a program that `ringpilot exec` runs (the NCCL profiler plugin,
/// docs/nccl-profiler.md): `metrics.port_base` (exec sets the job default when unset), the
/// bind address and the job name, the same for all ranks. Each process serves on
/// MetricsPort(base, its LOCAL_RANK), so the workers a `torchrun` under exec starts get
/// their own ports.
inline constexpr const char* kMetricsPortBaseVar = "RINGPILOT_METRICS_PORT_BASE";
inline constexpr const char* kMetricsBindVar = "RINGPILOT_METRICS_BIND";
inline constexpr const char* kJobNameVar = "RINGPILOT_JOB_NAME";
/// `metrics.file_sd_dir`: where each process links its file_sd file for Prometheus.
inline constexpr const char* kMetricsFileSdDirVar = "RINGPILOT_METRICS_FILE_SD_DIR";
/// An explicit port for one process (instead of base + RANK); never forward it to all ranks.
inline constexpr const char* kMetricsPortVar = "RINGPILOT_METRICS_PORT";
/// Path of the NCCL profiler plugin `ringpilot exec` names in NCCL_PROFILER_PLUGIN; by
/// default libringpilot-nccl-profiler.so next to the ringpilot executable.
inline constexpr const char* kNcclProfilerVar = "RINGPILOT_NCCL_PROFILER";

/// `metrics.bind` (and RINGPILOT_METRICS_BIND) value that lets each process choose: the
/// node's address under Slurm or Kubernetes, loopback elsewhere (metrics::ResolveBind).
inline constexpr const char* kMetricsBindAuto = "auto";

/// RUN_DIR/<this>: the Prometheus file_sd list of the job's exporters, which rank 0 writes
/// at start and empties ("[]") when the job ends on purpose; the launcher empties it when
/// the user stops the job (docs/metrics.md, "Discovery").
inline constexpr const char* kScrapeTargetsFile = "prometheus-targets.json";

/// The metrics port of the process with node-local rank `local_rank`: port_base +
/// local_rank, or 0 (pick a free port) when port_base is 0. Ports repeat on every node, so
/// a node's exporters sit on one small known range. The one place that rule is written
/// (config::MetricsPort for jobs, the NCCL profiler plugin for programs under
/// `ringpilot exec`).
inline int MetricsPort(int port_base, int local_rank) {
  return port_base == 0 ? 0 : port_base + local_rank;
}

/// A rank whose metrics port is taken (another job on the node) moves up by whole blocks of
/// its node's rank count: MetricsPort + k x procs_per_node for k = 1 .. this - 1, so two
/// jobs on one host both serve (docs/metrics.md, "Port"). Where it ended up is in
/// RUN_DIR/prometheus-targets.json.
inline constexpr int kMetricsPortBlocks = 32;

/// `ringpilot run` on one host (backend local): the first port of the first block of
/// procs_per_node free ports at or above metrics.port_base, which it found and printed; the
/// ranks start there (the job file keeps port_base as written).
inline constexpr const char* kMetricsPortFromVar = "RINGPILOT_METRICS_PORT_FROM";

}  // namespace ringpilot::base
