// The commands that act on a run directory while its job runs or after: `ringpilot status`
// (how it stands; `--json`), `ringpilot logs` (a rank's or the launcher's log, `-f` to
// follow it to the job's end) and `ringpilot stop` (checkpoint and stop; `--force`).
// They read what launcher/run_status.h reads; `stop` signals the launcher recorded in
// RUN_DIR/launcher.json.
#pragma once

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

/// Adds `status`, `logs` and `stop` to `app`; each runs (and exits) from its callback.
void AddRunDirCommands(CLI::App& app);

/// `ringpilot logs` (cli/logs_command.cpp).
struct LogsArgs {
  std::string run_dir;
  int rank = 0;
  bool launcher = false;  ///< logs/launcher.log instead of a rank's
  bool follow = false;    ///< keep printing what is appended, until the launcher ends
  int lines = -1;         ///< only the last N lines first; -1 = all
  double poll_s = 0.25;   ///< how often a followed file is checked
};
int RunLogs(const LogsArgs& args);

}  // namespace ringpilot::cli
