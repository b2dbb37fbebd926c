// `ringpilot doctor [--json] [--device cpu|cuda|auto]`: preflight checks of this node
// (launcher/doctor.h); exit 1 when any check FAILs, else 0.
#pragma once

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "launcher/doctor.h"

namespace ringpilot::launcher {

struct DoctorArgs {
  bool json = false;
  std::string device = "auto";  ///< cpu | cuda | auto (CLI11 checks the choice)
};

/// Adds the `doctor` subcommand to `app`. Like `topo`, its handler runs as a parse callback
/// and ends the process with RunDoctorCommand's exit status.
void AddDoctorCommand(CLI::App& app);

/// Runs every check against ENV and prints the table or the JSON document: 1 if any FAILed.
int RunDoctorCommand(const DoctorArgs& args, const DoctorEnv& env, std::ostream& out);

}  // namespace ringpilot::launcher
