// `ringpilot topo [--json|--dot] [--from SNAPSHOT]`: this node's topology (or a saved
// snapshot's) as a matrix like `nvidia-smi topo -m`, as the JSON snapshot, or as Graphviz.
#pragma once

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace ringpilot::cli {

struct TopoArgs {
  bool json = false;
  bool dot = false;
  std::string from;  ///< snapshot to render instead of probing; "" probes this node
};

/// Adds the `topo` subcommand to `app`. Like the slurm and k8s subcommands, its handler
/// runs as a parse callback and ends the process with RunTopo's exit status.
void AddTopoCommand(CLI::App& app);

/// Runs it: 0, or 2 with one line on `err` for a snapshot that cannot be read.
int RunTopo(const TopoArgs& args, std::ostream& out, std::ostream& err);

}  // namespace ringpilot::cli
