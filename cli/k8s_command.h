// `ringpilot k8s render JOB.yaml [--set ...]`: prints the Kubernetes manifests.
#pragma once

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

/// Adds the `k8s` subcommand to `app`. Its handler runs as the subcommand's parse callback
/// and ends the process with the command's exit status (0 rendered, 2 bad job file).
void AddK8sCommand(CLI::App& app);

}  // namespace ringpilot::cli
