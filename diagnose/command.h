// `ringpilot diagnose RUN_DIR [--json] [--svg-dir DIR]`: explains a run's step time
// (straggler ranking, exposed communication, bus bandwidth against the expected one, NCCL
// transports); see docs/diagnose.md.
#pragma once

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace ringpilot::diagnose {

struct DiagnoseArgs {
  std::string run_dir;
  bool json = false;
  std::string svg_dir;  ///< "" writes no plots
  std::string infiniband_dir = "/sys/class/infiniband";
};

/// Adds the `diagnose` subcommand to `app`; its handler runs as a parse callback and ends
/// the process with RunDiagnose's exit status.
void AddDiagnoseCommand(CLI::App& app);

/// Runs it: 0; 2 with one line on `err` for a missing run directory or a malformed file;
/// 1 when the plots cannot be written.
int RunDiagnose(const DiagnoseArgs& args, std::ostream& out, std::ostream& err);

}  // namespace ringpilot::diagnose
