// What the NCCL profiler plugin exports and where, from its process environment
// (docs/nccl-profiler.md): `ringpilot exec` sets these variables.
#pragma once

#include <stdexcept>
#include <string>

#include "base/environment.h"

namespace ringpilot::nccl_profiler {

/// A variable with a value the plugin cannot use. `what()` is one line naming it.
class SettingsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Settings {
  /// Serve /metrics on this port (0 = any free port): RINGPILOT_METRICS_PORT, else
  /// base::MetricsPort(RINGPILOT_METRICS_PORT_BASE, LOCAL_RANK) (RANK when LOCAL_RANK is
  /// unset); -1 = neither set, no HTTP endpoint.
  int port = -1;
  /// A port from RINGPILOT_METRICS_PORT_BASE that another process holds: the next block of
  /// LOCAL_WORLD_SIZE ports, up to port_tries ports in all (metrics::ExporterOptions).
  int port_step = 1;
  int port_tries = 1;
  /// RINGPILOT_METRICS_BIND, else "auto" (metrics::ResolveBind: the node's address under
  /// Slurm or Kubernetes, else loopback).
  std::string bind;
  /// RINGPILOT_RUN_DIR: write RUN_DIR/logs/rank-RANK.nccl.json; "" = no file.
  std::string run_dir;
  /// RANK (torchrun's contract), else the rank of the process's first communicator.
  int rank = 0;
  /// LOCAL_RANK; -1 = unset (no label).
  int local_rank = -1;
  /// RINGPILOT_JOB_NAME, else "exec".
  std::string job = "exec";
  /// RINGPILOT_METRICS_FILE_SD_DIR: link DIR/<run>-rank-RANK.json to this process's
  /// file_sd file; "" = no link.
  std::string file_sd_dir;
  /// WORLD_SIZE > LOCAL_WORLD_SIZE (torchrun's): the job spans nodes, so "auto" binds the
  /// node's address.
  bool multi_node = false;
};

/// Reads the variables above from `env`; `first_comm_rank` stands in for an unset RANK.
/// Throws SettingsError for a malformed value (a port outside 0..65535, base + rank past
/// it, a rank that is not a number) and when neither a port nor a run directory is given
/// (nothing to export to).
Settings SettingsFromEnvironment(const base::Environment& env, int first_comm_rank);

}  // namespace ringpilot::nccl_profiler
