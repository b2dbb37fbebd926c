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
  /// RINGPILOT_METRICS_PORT: serve /metrics on this port (0 = any free port); -1 = unset,
  /// no HTTP endpoint.
  int port = -1;
  /// RINGPILOT_METRICS_BIND; "" = the exporter's default (loopback).
  std::string bind;
  /// RINGPILOT_RUN_DIR: write RUN_DIR/logs/rank-RANK.nccl.json; "" = no file.
  std::string run_dir;
  /// RANK and LOCAL_RANK (torchrun's contract); -1 = unset (then the rank of the first
  /// communicator names the process).
  int rank = -1;
  int local_rank = -1;
  /// RINGPILOT_JOB_NAME, else "exec".
  std::string job = "exec";
};

/// Reads the variables above from `env`. Throws SettingsError for a malformed value
/// (a port outside 0..65535, a rank that is not a number) and when neither a port nor a
/// run directory is given (nothing to export to).
Settings SettingsFromEnvironment(const base::Environment& env);

}  // namespace ringpilot::nccl_profiler
